"""The compose fleet against a real container engine, end to end (`make fleet-check`).

    python3 -m deploy.fleet_check [--docker docker] [--compose "docker compose"] [--skip-build]

Steps, one line each with its time: bring down what an interrupted check left; build both
images (`make images`); start the learner, two actors and TensorBoard on CartPole (project
`seedfleet-check`, free host ports, credentials of its own); wait for env steps from both
actors; scale to three and wait for the third; kill the learner process inside its container
and check that compose restarts it and that it resumes from its checkpoint (frames go on from
there, not from 0); ask TensorBoard's HTTP port; bring the fleet down (volumes too) and check
that no container is left. It exits 1 at the first step that fails, with the logs that show
why, after bringing the fleet down.
Not part of `make test` (CI has no engine); tests/test_deploy.py checks that its services,
variables and commands match the compose file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from .certs import make_credentials
from .engine import Missing, check_build, check_compose

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "deploy" / "docker-compose.yml"
PROJECT = "seedfleet-check"
SERVICES = ("learner", "actor", "tensorboard")  # the compose file's, as this check uses them
SETTINGS = {  # SEEDFLEET_* variables of the compose file: a small CartPole run that checkpoints often
    "SEEDFLEET_ENV": "CartPole-v1",
    "SEEDFLEET_ALGO": "vtrace",
    "SEEDFLEET_ENVS": "8",
    "SEEDFLEET_PROGRESS_INTERVAL_S": "2",
    "SEEDFLEET_CHECKPOINT_INTERVAL_S": "10",
    "SEEDFLEET_LOG_INTERVAL_S": "2",
}
# What the check reads in the services' logs
ACTOR_STEPS = re.compile(r"seedfleet\.actor (\d+) env steps")
PROGRESS = re.compile(r"^(?:\S+ \| )?frames ([\d,]+) ")
SAVED = re.compile(r"seedfleet\.checkpoint saved (\S+)")
RESTORED = re.compile(r"seedfleet\.checkpoint restored (\S+): (\d+) frames")


def kill_learner_script(proc: str = "/proc", kill: bool = True) -> str:
    """Python for the learner's container: SIGKILL (with `kill`) to the `seedfleet learner`
    process, not to PID 1 (compose's init, whose command line holds the same words) nor to
    itself; prints the pids it picked. `proc` is where it reads the processes."""
    action = "os.kill(pid, signal.SIGKILL)" if kill else "pass"
    return f"""import os, signal
for pid in (int(p) for p in os.listdir({proc!r}) if p.isdigit()):
    try:
        argv = open(os.path.join({proc!r}, str(pid), "cmdline"), "rb").read().split(bytes(1))
    except OSError:
        continue
    if pid not in (1, os.getpid()) and b"learner" in argv:
        {action}
        print(pid)
"""


class CheckFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Fleet:
    """One compose project of the fleet file, driven by the client commands given."""

    def __init__(self, docker: list[str], compose: list[str], env: dict[str, str], project: str = PROJECT):
        self.docker, self.compose, self.env, self.project = docker, compose, env, project

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        command = [*self.compose, "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(command, capture_output=True, text=True, env=self.env, timeout=timeout, cwd=ROOT)
        if check and done.returncode:
            raise CheckFailed(f"{shlex.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout

    def containers(self, service: str) -> list[str]:
        """The service's running containers."""
        return self.run("ps", "-q", service).split()

    def logs(self, container: str) -> list[str]:
        """The container's output, its stdout (progress lines) and stderr (logging) in one stream, in order."""
        done = subprocess.run([*self.docker, "logs", container], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=60)
        return done.stdout.splitlines()

    def inspect(self, container: str) -> dict:
        out = subprocess.run([*self.docker, "inspect", container], capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout)[0]

    def left(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.project}"
        out = subprocess.run([*self.docker, "ps", "-aq", "--filter", label], capture_output=True, text=True, timeout=60)
        return out.stdout.split()


def wait_for(what: str, condition: Callable[[], object], timeout: float, poll_s: float = 1.0) -> object:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s")
        time.sleep(poll_s)
    return result


def actor_steps(fleet: Fleet, container: str) -> int:
    steps = [int(m.group(1)) for m in map(ACTOR_STEPS.search, fleet.logs(container)) if m]
    return steps[-1] if steps else 0


def learner_frames(lines: list[str]) -> list[int]:
    return [int(m.group(1).replace(",", "")) for m in map(PROGRESS.search, lines) if m]


def steps_of_every_actor(fleet: Fleet, count: int) -> Callable[[], str]:
    def check() -> str:
        actors = fleet.containers("actor")
        steps = [actor_steps(fleet, c) for c in actors]
        return f"{count} actors stepping ({', '.join(map(str, steps))} env steps)" if (
            len(actors) == count and all(steps)) else ""
    return check


def run_check(fleet: Fleet, tensorboard_port: int, build: Callable[[], None] | None) -> None:
    started = time.monotonic()

    def step(name: str, action: Callable[[], object]) -> None:
        t0 = time.monotonic()
        detail = action()
        print(f"ok {time.monotonic() - t0:6.1f} s  {name}{': ' + str(detail) if detail else ''}", flush=True)

    if fleet.left():  # a check stopped half way: its containers would clash with this one's
        step("the fleet a previous check left, down", lambda: fleet.run("down", "--volumes", "--remove-orphans"))
    if build is not None:
        step("both images built (make images)", build)
    step("fleet up: learner, 2 actors, TensorBoard", lambda: fleet.run("up", "--detach", "--scale", "actor=2"))
    step("env steps from both actors", lambda: wait_for("steps from 2 actors", steps_of_every_actor(fleet, 2), 240))
    step("scaled to 3 actors", lambda: (fleet.run("up", "--detach", "--no-recreate", "--scale", "actor=3"),
                                        wait_for("steps from 3 actors", steps_of_every_actor(fleet, 3), 120))[1])
    (learner,) = fleet.containers("learner")

    def checkpoint_then_kill() -> str:
        saved = wait_for("a checkpoint", lambda: [m.group(1) for m in map(SAVED.search, fleet.logs(learner)) if m], 60)
        frames = learner_frames(fleet.logs(learner))
        restarts = fleet.inspect(learner)["RestartCount"]
        pid = fleet.run("exec", "-T", "learner", "python", "-c", kill_learner_script()).split()
        if not pid:
            raise CheckFailed("no learner process found in its container")
        wait_for("compose restarts the learner", lambda: fleet.inspect(learner)["RestartCount"] > restarts and
                 fleet.inspect(learner)["State"]["Running"], 120)
        return f"process {pid[0]} killed at {frames[-1] if frames else 0:,} frames after checkpoint {saved[-1]}"

    step("learner killed inside its container, restarted by compose", checkpoint_then_kill)

    def resumed() -> str:
        def after_restore() -> tuple[int, int] | None:
            lines = fleet.logs(learner)
            restores = [(i, int(m.group(2))) for i, m in enumerate(map(RESTORED.search, lines)) if m]
            if not restores:
                return None
            at, restored = restores[-1]
            later = learner_frames(lines[at:])
            return (restored, later[-1]) if restored > 0 and later and later[-1] > restored else None

        restored, now = wait_for("frames going on from the checkpoint", after_restore, 240)
        return f"restored at {restored:,} frames, now {now:,}"

    step("learner resumed from its checkpoint", resumed)

    def tensorboard() -> str:
        def answer() -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{tensorboard_port}/", timeout=5) as reply:
                    return reply.status
            except OSError:
                return 0
        return f"HTTP {wait_for('TensorBoard answers', answer, 60)}"

    step("TensorBoard answers on its port", tensorboard)
    down(fleet, step)
    print(f"fleet check passed in {time.monotonic() - started:.0f} s", flush=True)


def down(fleet: Fleet, step: Callable[[str, Callable[[], object]], None]) -> None:
    def nothing_left() -> None:
        if left := fleet.left():
            raise CheckFailed(f"containers left after down: {left}")

    step("fleet down", lambda: fleet.run("down", "--volumes", "--remove-orphans", "--timeout", "60"))
    step("no container left", nothing_left)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.fleet_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docker", default="docker", help="the docker client command")
    parser.add_argument("--compose", default="docker compose", help="the compose command")
    parser.add_argument("--skip-build", action="store_true", help="use the images already built")
    args = parser.parse_args(argv)
    docker, compose = shlex.split(args.docker), shlex.split(args.compose)
    try:
        print(f"engine {check_build(docker)}, compose {check_compose(compose)}", flush=True)
    except Missing as missing:
        print(f"fleet check: {missing}", file=sys.stderr)
        return 1
    secrets = Path(tempfile.mkdtemp(prefix="seedfleet-check-"))
    make_credentials(secrets)
    tensorboard_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDFLEET_")} | SETTINGS | {
        "SEEDFLEET_PORT": str(free_port()), "SEEDFLEET_TENSORBOARD_PORT": str(tensorboard_port),
        "SEEDFLEET_SECRETS": str(secrets)}
    fleet = Fleet(docker, compose, env)

    def build() -> None:
        subprocess.run(["make", "--no-print-directory", "images", f"DOCKER={args.docker}"], cwd=ROOT, check=True)

    try:
        run_check(fleet, tensorboard_port, None if args.skip_build else build)
    except (CheckFailed, subprocess.CalledProcessError, subprocess.TimeoutExpired) as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        for service in SERVICES:
            listed = fleet.run("ps", "-a", "-q", service, check=False).split()
            for container in listed:
                print(f"--- {service} {container[:12]}:\n" + "\n".join(fleet.logs(container)[-40:]), file=sys.stderr)
        fleet.run("down", "--volumes", "--remove-orphans", "--timeout", "60", check=False)
        return 1
    finally:
        shutil.rmtree(secrets, ignore_errors=True)  # the check's own keys and token
    return 0


if __name__ == "__main__":
    sys.exit(main())
