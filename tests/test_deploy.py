"""Images and the compose fleet, checked without a Docker engine: hadolint on the Dockerfile, the real
Compose parser on the compose files, and the resolved services started as local processes."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, Proc, free_port, progress_frames, tool

from seedfleet.deploy import fleet_check, fleet_throughput
from seedfleet.deploy.certs import make_credentials
from seedfleet.deploy.cli import build_parser
from seedfleet.deploy.requirements import requirements

COMPOSE_FILE = ROOT / "deploy" / "docker-compose.yml"
GPU_FILE = ROOT / "deploy" / "docker-compose.gpu.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def compose_config(*files: Path, **settings: str) -> dict:
    """`docker-compose config` of `files` as JSON, under `settings` and no other SEEDFLEET_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDFLEET_")} | settings
    args = [tool("docker-compose"), *(a for f in files or (COMPOSE_FILE,) for a in ("-f", str(f))),
            "config", "--format", "json"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_hadolint_passes_the_dockerfile():
    done = subprocess.run([tool("hadolint"), "--failure-threshold", "style", "--format", "json", str(DOCKERFILE)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stdout + done.stderr


def test_dockerfile_targets_entrypoint_user_and_healthcheck():
    text = DOCKERFILE.read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)  # BuildKit would pull a frontend from a registry
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11\.\d+-slim-bookworm$", text, re.M)
    assert text.index("ARG BASE_IMAGE=") < text.index("\nFROM ")
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS base$", text, re.M)
    stages = re.findall(r"^FROM \S+ AS (\S+)$", text, re.M)
    assert {"actor", "learner"} <= set(stages)
    actor, learner = (text.split(f" AS {name}\n")[1].split("\nFROM ")[0] for name in ("actor", "learner"))
    for stage in (actor, learner):
        assert 'ENTRYPOINT ["seedfleet"]' in stage and re.search(r"^USER 10001", stage, re.M)
    assert '"/src[actor]"' in actor and "HEALTHCHECK" not in actor
    assert re.search(r'^HEALTHCHECK .*CMD \["python", "-m", "seedfleet.deploy.healthcheck"\]$', learner, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "runs", "**/__pycache__", ".pytest_cache", ".ruff_cache", "deploy/secrets"} <= set(ignored)


def test_the_actor_image_installs_no_tensorflow():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    actor, learner, gpu = (requirements(project, extra) for extra in ("actor", "learner", "gpu"))
    assert "grpcio-health-checking==1.85.1" in actor and "grpcio==1.85.1" in actor
    assert any(r.startswith("mujoco==") for r in actor)  # the actor image (compose, Kubernetes) steps MuJoCo's envs
    assert not [r for r in actor if r.startswith(("tensorflow", "tensorboard"))]
    assert set(actor) < set(learner) and "tensorflow==2.21.0" in learner
    assert set(learner) < set(gpu) and "tensorflow[and-cuda]==2.21.0" in gpu
    assert not [r for r in gpu if r.startswith("seedfleet")]


def test_compose_file_resolves_with_its_defaults():
    services = compose_config()["services"]
    assert set(services) == {"learner", "actor", "tensorboard"}
    learner, actor, board = services["learner"], services["actor"], services["tensorboard"]
    assert learner["build"]["target"] == "learner" and actor["build"]["target"] == "actor"
    assert Path(learner["build"]["context"], learner["build"]["dockerfile"]) == DOCKERFILE
    assert {k: learner["environment"][k] for k in ("SEEDFLEET_ENV", "SEEDFLEET_ALGO", "SEEDFLEET_SEED",
                                                   "SEEDFLEET_ADDRESS")} == {
        "SEEDFLEET_ENV": "ALE/Pong-v5", "SEEDFLEET_ALGO": None, "SEEDFLEET_SEED": "0",  # ALGO: the env's own
        "SEEDFLEET_ADDRESS": "[::]:8470"}
    assert learner["environment"]["SEEDFLEET_MAX_FRAMES"] is None  # unset: the flag's own default
    assert [(p["published"], p["target"]) for p in learner["ports"]] == [("8470", 8470)]
    assert "seedfleet.deploy.healthcheck" in learner["healthcheck"]["test"]
    assert [(v["source"], v["target"]) for v in learner["volumes"]] == [("data", "/data")]
    assert learner["working_dir"] == "/data"
    for service in (learner, actor):  # the token is a file secret, not a command line or a variable's value
        assert [(s["source"], s["target"]) for s in service["secrets"]] == [("token", "/run/secrets/token")]
        assert service["environment"]["SEEDFLEET_TOKEN_FILE"] == "/run/secrets/token"
    assert compose_config()["secrets"]["token"]["file"] == str(ROOT / "deploy" / "secrets" / "token")

    assert actor["environment"]["SEEDFLEET_LEARNER"] == "learner:8470"
    assert actor["environment"]["SEEDFLEET_ENVS"] == "32"
    assert actor["restart"] == "unless-stopped"
    assert actor["depends_on"]["learner"]["condition"] == "service_healthy"
    assert "container_name" not in actor and "ports" not in actor  # --scale actor=N

    assert board["entrypoint"] == ["tensorboard"] and board["image"] == learner["image"]
    assert [(v["source"], v["target"], v.get("read_only")) for v in board["volumes"]] == [("data", "/data", True)]
    assert [(p["published"], p["target"]) for p in board["ports"]] == [("6006", 6006)]
    assert board["command"][:2] == ["--logdir", "/data"] and board["healthcheck"] == {"disable": True}


def test_compose_settings_come_from_seedfleet_variables():
    services = compose_config(SEEDFLEET_ENV="CartPole-v1", SEEDFLEET_ALGO="r2d2", SEEDFLEET_SEED="3",
                              SEEDFLEET_ENVS="8", SEEDFLEET_PORT="9000", SEEDFLEET_TENSORBOARD_PORT="7000",
                              SEEDFLEET_MAX_FRAMES="100000")["services"]
    learner, actor = services["learner"]["environment"], services["actor"]["environment"]
    assert (learner["SEEDFLEET_ENV"], learner["SEEDFLEET_ALGO"], learner["SEEDFLEET_SEED"]) == (
        "CartPole-v1", "r2d2", "3")
    assert learner["SEEDFLEET_ADDRESS"] == "[::]:9000" and learner["SEEDFLEET_MAX_FRAMES"] == "100000"
    assert [(p["published"], p["target"]) for p in services["learner"]["ports"]] == [("9000", 9000)]
    assert (actor["SEEDFLEET_LEARNER"], actor["SEEDFLEET_ENVS"]) == ("learner:9000", "8")
    assert [p["published"] for p in services["tensorboard"]["ports"]] == ["7000"]


def test_every_container_variable_is_a_flag_of_its_command_and_in_the_readme():
    services = compose_config()["services"]
    readme = (ROOT / "README.md").read_text().split("## Fleets with docker compose")[1].split("\n## ")[0]
    for name in ("learner", "actor"):
        command = services[name]["command"][0]
        flags = {opt for action in build_parser(command)._actions for opt in action.option_strings}
        for variable in services[name]["environment"]:
            flag = "--" + variable.removeprefix("SEEDFLEET_").lower().replace("_", "-")
            assert flag in flags, f"{variable} of service {name} is no flag of seedfleet {command}"
    for variable in set(re.findall(r"SEEDFLEET_\w+", COMPOSE_FILE.read_text())):
        assert f"`{variable}`" in readme, f"README's fleet section lacks {variable}"


def test_gpu_file_switches_the_learner_to_the_gpu_build():
    services = compose_config(COMPOSE_FILE, GPU_FILE)["services"]
    for name in ("learner", "tensorboard"):
        assert services[name]["build"]["args"]["LEARNER_EXTRA"] == "gpu"
        assert services[name]["image"] == "seedfleet-learner:gpu"
    devices = services["learner"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"capabilities": ["gpu"], "driver": "nvidia", "count": -1}]


def test_make_targets_build_and_start_the_fleet():
    def dry(*args: str) -> str:
        return subprocess.run(["make", "--no-print-directory", "-n", *args], cwd=ROOT, capture_output=True,
                              text=True, check=True,
                              env={k: v for k, v in os.environ.items() if k not in ("ENV", "SEED")}).stdout

    images = dry("images").splitlines()
    assert images[0] == 'python3 -m deploy.engine build --docker "docker"'  # says what is missing, first
    assert images[1] == "DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile --target actor -t seedfleet-actor ."
    assert "--target learner --build-arg LEARNER_EXTRA=learner" in images[2] and "-t seedfleet-learner ." in images[2]
    assert "LEARNER_EXTRA=gpu" in dry("images", "GPU=1") and "-t seedfleet-learner:gpu ." in dry("images", "GPU=1")
    mirrored = dry("images", "BASE_IMAGE=mirror.example/python:3.11.14-slim-bookworm").splitlines()
    assert all("--build-arg BASE_IMAGE=mirror.example/python:3.11.14-slim-bookworm" in line for line in mirrored[1:])
    fleet = dry("fleet", "ACTORS=8", "ENV=ALE/Breakout-v5", "ENVS=16").strip().splitlines()
    assert fleet[-2:] == ['python3 -m deploy.engine compose --compose "docker compose"',
                          "SEEDFLEET_ENV='ALE/Breakout-v5' SEEDFLEET_ENVS='16' docker compose "
                          "-f deploy/docker-compose.yml up --detach --scale actor=8"]
    assert fleet[:-2] == ([] if (ROOT / "deploy" / "secrets" / "token").exists()  # the token secret, once
                          else ["python3 -m deploy.certs deploy/secrets"])
    assert dry("fleet-check", "COMPOSE=docker-compose").strip() == (
        'python3 -m deploy.fleet_check --docker "docker" --compose "docker-compose"')
    assert "SEEDFLEET_SEED" not in dry("fleet")  # SEED's make default is make run's, not the fleet's
    assert "-f deploy/docker-compose.gpu.yml down" in dry("fleet-down", "GPU=1")


class LocalFleet:
    """Resolved compose services started as processes on this machine: the image's entrypoint `seedfleet`
    becomes this Python's `-m seedfleet.deploy.cli`, each volume a directory under `root`, and the learner's gRPC port
    a free one on loopback, for the learner's [::] and the actors' `learner` host alike."""

    def __init__(self, config: dict, root: Path, procs: list):
        assert re.findall(r"^ENTRYPOINT (.+)$", DOCKERFILE.read_text(), re.M) == ['["seedfleet"]'] * 2
        self.services, self.root, self.procs = config["services"], root, procs
        learner = self.services["learner"]
        self.grpc_port, self.port = learner["ports"][0]["target"], free_port()
        self.mounts = {v["target"]: root / v["source"] for v in learner["volumes"]}
        secrets = config.get("secrets", {})  # file secrets: mounted at their target, read where they are
        self.mounts |= {s["target"]: Path(secrets[s["source"]]["file"])
                        for service in self.services.values() for s in service.get("secrets", ())}

    def local(self, value: str) -> str:
        for target, directory in self.mounts.items():
            value = re.sub(rf"^{re.escape(target)}(?=/|$)", str(directory), value)
        for host in ("[::]", "learner"):
            value = value.replace(f"{host}:{self.grpc_port}", f"127.0.0.1:{self.port}")
        return value

    def env(self, name: str) -> dict[str, str]:
        """The service's environment (unset pass-through variables left out, as Docker does), made local."""
        env = {k: self.local(v) for k, v in self.services[name]["environment"].items() if v is not None}
        return env | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def start(self, name: str) -> Proc:
        service = self.services[name]
        assert service.get("entrypoint") is None  # the image's: seedfleet
        cwd = Path(self.local(service.get("working_dir") or str(self.root)))
        cwd.mkdir(parents=True, exist_ok=True)
        proc = Proc([sys.executable, "-m", "seedfleet.deploy.cli", *service["command"]], env=self.env(name), cwd=cwd)
        self.procs.append(proc)
        return proc

    def wait_until_healthy(self, learner: Proc, timeout: float = 120.0) -> None:
        """Runs the learner service's health check command until it passes."""
        check = self.services["learner"]["healthcheck"]["test"]
        assert check[:2] == ["CMD", "python"]
        deadline = time.monotonic() + timeout
        while subprocess.run([sys.executable, *check[2:]], cwd=self.root, env={**os.environ, **self.env("learner")},
                             capture_output=True).returncode:
            assert learner.popen.poll() is None, f"the learner exited:\n{learner.output()[-3000:]}"
            assert time.monotonic() < deadline, f"no SERVING within {timeout} s:\n{learner.output()[-3000:]}"
            time.sleep(1)


def test_compose_services_run_as_local_processes(tmp_path, procs):
    """The learner and two actors with their resolved compose commands and environments: healthy, then frames flow."""
    make_credentials(tmp_path / "secrets")
    config = compose_config(SEEDFLEET_ENV="CartPole-v1", SEEDFLEET_ENVS="4", SEEDFLEET_SEED="1",
                            SEEDFLEET_PROGRESS_INTERVAL_S="1", SEEDFLEET_LOG_INTERVAL_S="1",
                            SEEDFLEET_SECRETS=str(tmp_path / "secrets"))
    fleet = LocalFleet(config, tmp_path, procs)
    learner = fleet.start("learner")
    fleet.wait_until_healthy(learner)
    actors = [fleet.start("actor") for _ in range(2)]
    since, deadline = len(learner.lines), time.monotonic() + 60
    while not (len(frames := progress_frames(learner.lines[since:])) >= 3 and 0 < frames[-3] < frames[-2] < frames[-1]):
        assert time.monotonic() < deadline, learner.output()[-3000:] + "\n" + actors[0].output()[-2000:]
        assert all(p.popen.poll() is None for p in (learner, *actors)), learner.output()[-3000:]
        time.sleep(0.5)
    assert sum("learner actor connected" in line for line in learner.lines) == 2
    actors[0].wait_for(fleet_check.ACTOR_STEPS.pattern, timeout=10)  # the lines `make fleet-check` reads
    assert learner.stop(signal.SIGTERM, timeout=30) == 0, learner.output()[-2000:]
    assert fleet_check.learner_frames(learner.lines) and any(map(fleet_check.SAVED.search, learner.lines))
    window = fleet_throughput.rate(learner.lines, 0, 1)  # the lines `make fleet-throughput` reads
    assert window is not None and window["frames_per_s"] > 0
    summary = json.loads((tmp_path / "data" / "runs" / "CartPole-v1-vtrace-seed1" / "summary.json").read_text())
    assert summary["env"] == "CartPole-v1" and summary["frames"] >= frames[-1]


def test_a_wrong_flag_in_compose_fails_the_local_run(tmp_path, procs):
    """The run test's start-up, on a compose file whose learner command has a flag seedfleet does not know."""
    text = COMPOSE_FILE.read_text().replace('command: ["learner"]', 'command: ["learner", "--no-such-flag"]')
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(text.replace("context: ..", f"context: {ROOT}"))
    fleet = LocalFleet(compose_config(broken), tmp_path, procs)
    learner = fleet.start("learner")
    with pytest.raises(AssertionError, match="the learner exited"):
        fleet.wait_until_healthy(learner)
    learner.wait_for(r"unrecognized arguments: --no-such-flag", timeout=10)
