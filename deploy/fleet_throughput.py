"""Pong frames/s of the compose fleet beside `seedfleet run` on the same machine (`make fleet-throughput`).

    python3 -m deploy.fleet_throughput [--docker docker] [--compose "docker compose"] [--actors 4]
        [--warmup-s 120] [--seconds 180] [--seedfleet .venv/bin/seedfleet]

Runs, one after the other on this machine: the fleet of `make fleet ACTORS=N` (learner and N
actors of 32 envs on ALE/Pong-v5, compose's defaults; project `seedfleet-throughput`, images
already built), then `seedfleet run --env ALE/Pong-v5 --actors N` (the same learner, algorithm
and envs, actors as local processes). Each learner's rate is read off its own progress lines,
frames over elapsed seconds across the window after the warm-up, and the script prints one
JSON line: both rates and fleet / local. Run it on a machine with nothing else to do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .certs import make_credentials
from .engine import Missing, check_build, check_compose
from .fleet_check import ROOT, CheckFailed, Fleet, free_port, wait_for

PROJECT = "seedfleet-throughput"
PROGRESS = re.compile(r"frames ([\d,]+) .* elapsed (\d+)s")


def rate(lines: list[str], warmup_s: float, seconds: float) -> dict | None:
    """Frames/s between the first progress line `warmup_s` past the first frames (a fleet's
    actors start once the learner is healthy) and the first one `seconds` after it; None until
    the window is complete."""
    points = [(int(m.group(2)), int(m.group(1).replace(",", ""))) for m in map(PROGRESS.search, lines) if m]
    flowing = next((t for t, f in points if f > 0), None)
    if flowing is None:
        return None
    window = [(t, f) for t, f in points if t >= flowing + warmup_s]
    if not window or window[-1][0] - window[0][0] < seconds:
        return None
    (t0, f0), (t1, f1) = window[0], next(p for p in window if p[0] - window[0][0] >= seconds)
    return {"frames_per_s": round((f1 - f0) / (t1 - t0), 1), "from_s": t0, "to_s": t1, "frames": f1 - f0}


def measure_fleet(fleet: Fleet, actors: int, warmup_s: float, seconds: float) -> dict:
    if fleet.left():
        fleet.run("down", "--volumes", "--remove-orphans")
    try:
        fleet.run("up", "--detach", "--scale", f"actor={actors}", "learner", "actor")
        (learner,) = wait_for("the learner container", lambda: fleet.containers("learner"), 120)
        return wait_for("the fleet's window", lambda: rate(fleet.logs(learner), warmup_s, seconds),
                        warmup_s + seconds + 600, poll_s=5.0)
    finally:
        fleet.run("down", "--volumes", "--remove-orphans", "--timeout", "60", check=False)


def measure_local(seedfleet: str, actors: int, warmup_s: float, seconds: float) -> dict:
    logdir = Path(tempfile.mkdtemp(prefix="seedfleet-throughput-"))
    command = [seedfleet, "run", "--env", "ALE/Pong-v5", "--actors", str(actors), "--progress-interval-s", "5",
               "--logdir", str(logdir), "--fresh"]
    out = logdir / "console.log"
    with out.open("w") as console:
        proc = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        return wait_for("the local run's window", lambda: rate(out.read_text().splitlines(), warmup_s, seconds),
                        warmup_s + seconds + 600, poll_s=5.0)
    finally:
        proc.terminate()
        proc.wait(120)
        shutil.rmtree(logdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.fleet_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docker", default="docker", help="the docker client command")
    parser.add_argument("--compose", default="docker compose", help="the compose command")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--warmup-s", type=float, default=120.0, help="seconds from the first frames to the window")
    parser.add_argument("--seconds", type=float, default=180.0, help="the measured window")
    parser.add_argument("--seedfleet", default=str(ROOT / ".venv" / "bin" / "seedfleet"),
                        help="the seedfleet command of the local run")
    args = parser.parse_args(argv)
    docker, compose = shlex.split(args.docker), shlex.split(args.compose)
    try:
        engine = check_build(docker)
        check_compose(compose)
    except Missing as missing:
        print(f"fleet throughput: {missing}", file=sys.stderr)
        return 1
    secrets = Path(tempfile.mkdtemp(prefix="seedfleet-throughput-"))
    make_credentials(secrets)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDFLEET_")} | {
        "SEEDFLEET_ENV": "ALE/Pong-v5", "SEEDFLEET_PROGRESS_INTERVAL_S": "5", "SEEDFLEET_FRESH": "1",
        "SEEDFLEET_PORT": str(free_port()), "SEEDFLEET_TENSORBOARD_PORT": str(free_port()),
        "SEEDFLEET_SECRETS": str(secrets)}
    try:
        fleet = measure_fleet(Fleet(docker, compose, env, PROJECT), args.actors, args.warmup_s, args.seconds)
        print(f"fleet ({args.actors} actor containers): {fleet['frames_per_s']:,.0f} frames/s", flush=True)
        local = measure_local(args.seedfleet, args.actors, args.warmup_s, args.seconds)
        print(f"local ({args.actors} actor processes): {local['frames_per_s']:,.0f} frames/s", flush=True)
    except (CheckFailed, subprocess.CalledProcessError, subprocess.TimeoutExpired) as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(secrets, ignore_errors=True)
    print(json.dumps({"engine": engine, "actors": args.actors, "fleet": fleet, "local": local,
                      "fleet_over_local": round(fleet["frames_per_s"] / local["frames_per_s"], 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
