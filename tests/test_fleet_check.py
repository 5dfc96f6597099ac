"""The fleet check and the engine checks, without an engine: fake clients for what each must say, and
the check's services, variables and log patterns against the compose file and the real processes' lines."""

import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_deploy import COMPOSE_FILE, compose_config

from seedfleet.deploy import fleet_check
from seedfleet.deploy.engine import Missing, check_build, check_compose


def fake(tmp_path: Path, name: str, script: str) -> list[str]:
    """A client that answers per its arguments: `script` is the body of a POSIX `case "$*" in`."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\ncase "$*" in\n{script}\n*) exit 1 ;;\nesac\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return [str(path)]


def test_build_needs_an_engine_that_answers():
    with pytest.raises(Missing, match="is not installed"):
        check_build(["/nonexistent/docker"])


def test_build_says_when_the_engine_does_not_answer(tmp_path):
    docker = fake(tmp_path, "docker",
                  '"info --format {{.ServerVersion}}") echo "Cannot connect to the Docker daemon" >&2; exit 1 ;;')
    with pytest.raises(Missing, match="no Docker engine answers .*Cannot connect"):
        check_build(docker)


@pytest.mark.parametrize("client,buildx,fails", [("24.0.7", False, True), ("24.0.7", True, False),
                                                 ("20.10.24", False, False)])
def test_build_needs_buildx_only_where_the_client_builds_through_it(tmp_path, client, buildx, fails):
    docker = fake(tmp_path, "docker", f'''"info --format {{{{.ServerVersion}}}}") echo 20.10.24 ;;
"version --format {{{{.Client.Version}}}}") echo {client} ;;
{'"buildx version") echo v0.12.1 ;;' if buildx else ''}''')
    if fails:
        with pytest.raises(Missing, match="buildx plugin, which is missing: install it"):
            check_build(docker)
    else:
        assert check_build(docker) == "20.10.24"


def test_compose_must_be_v2(tmp_path):
    assert check_compose(fake(tmp_path, "v2", '"version --short") echo 2.30.3 ;;')) == "2.30.3"
    with pytest.raises(Missing, match="Compose 1.29.2: the compose files need v2"):
        check_compose(fake(tmp_path, "v1", '"version --short") echo 1.29.2 ;;'))
    with pytest.raises(Missing, match="is not Docker Compose: install the compose plugin"):
        check_compose(["/nonexistent/docker", "compose"])


def test_make_images_stops_at_once_with_the_missing_piece():
    done = subprocess.run(["make", "--no-print-directory", "images", "DOCKER=/nonexistent/docker"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "'/nonexistent/docker' is not installed" in done.stderr
    assert "docker build" not in done.stdout.split("\n", 1)[-1]  # nothing was tried after the check


def test_the_fleet_check_parses_and_refuses_without_an_engine():
    done = subprocess.run([sys.executable, "-m", "deploy.fleet_check", "--docker", "/nonexistent/docker"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "fleet check: '/nonexistent/docker' is not installed" in done.stderr


def test_the_throughput_run_parses_and_refuses_without_an_engine():
    done = subprocess.run([sys.executable, "-m", "deploy.fleet_throughput", "--docker", "/nonexistent/docker"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "fleet throughput: '/nonexistent/docker' is not installed" in done.stderr


def test_the_fleet_check_uses_the_compose_file_s_services_and_variables():
    config = compose_config()
    services = config["services"]
    assert set(fleet_check.SERVICES) == set(services)
    text = COMPOSE_FILE.read_text()
    for variable in [*fleet_check.SETTINGS, "SEEDFLEET_PORT", "SEEDFLEET_TENSORBOARD_PORT", "SEEDFLEET_SECRETS"]:
        assert re.search(rf"\b{variable}\b", text), f"the compose file does not read {variable}"
    assert services["learner"]["restart"].startswith("on-failure")  # what brings the killed learner back
    assert services["learner"]["working_dir"] == "/data"  # where its checkpoints survive the restart
    assert services["tensorboard"]["ports"][0]["target"] == 6006


def test_the_kill_script_finds_the_learner_and_spares_init_and_itself(tmp_path):
    """The script the check runs in the container, on a stand-in /proc and without killing: compose's
    init and the learner (as the learner service's entrypoint and command start it) and an actor."""
    learner_command = compose_config()["services"]["learner"]["command"]
    procs = {1: [b"/sbin/docker-init", b"--", b"seedfleet", *map(str.encode, learner_command)],
             7: [b"/usr/local/bin/python", b"/usr/local/bin/seedfleet", *map(str.encode, learner_command)],
             9: [b"/usr/local/bin/python", b"/usr/local/bin/seedfleet", b"actor"]}
    for pid, argv in procs.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    script = fleet_check.kill_learner_script(str(tmp_path), kill=False)
    assert "os.kill" not in script and "os.kill" in fleet_check.kill_learner_script()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["7"], done.stdout + done.stderr
