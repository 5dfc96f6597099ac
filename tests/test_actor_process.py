"""The actor process: no TensorFlow, reconnects after a learner restart, clean SIGTERM."""

import signal
import subprocess
import sys

from conftest import ROOT, Proc, seedfleet, start_learner


def test_seedfleet_actor_never_loads_tensorflow():
    """Runs the real `seedfleet actor` entry point (against no learner) and inspects sys.modules."""
    code = (
        "import os, signal, sys, threading\n"
        "threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
        "from deploy.cli import main\n"
        "rc = main(['actor', '--learner', '127.0.0.1:9', '--envs', '2'])\n"
        "heavy = ('tensorflow', 'keras', 'server', 'algorithms')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print('LOADED', loaded, 'RC', rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "LOADED [] RC 0" in out.stdout, out.stdout + out.stderr
    assert "grpc" in out.stderr or "learner" in out.stderr  # it did try to reach the learner


def test_actor_reconnects_after_the_learner_restarts(procs, tmp_path):
    learner, address = start_learner("--env", "CartPole-v1", "--logdir", str(tmp_path))
    procs.append(learner)
    actor = Proc(seedfleet("actor", "--learner", address, "--envs", "4", "--reconnect-max-s", "0.5"))
    procs.append(actor)
    learner.wait_for("actor connected")
    learner.wait_for(r"^frames [1-9]")
    learner.stop(signal.SIGKILL)

    mark = len(actor.lines)
    actor.wait_for("UNAVAILABLE", start=mark)  # it noticed
    again = Proc(seedfleet("learner", "--address", address, "--progress-interval-s", "1", "--logdir", str(tmp_path)))
    procs.append(again)
    again.wait_for("actor connected", timeout=120)
    again.wait_for(r"^frames [1-9]")  # and steps flow again
    assert actor.popen.poll() is None
    assert len([ln for ln in actor.lines if "connected to" in ln]) == 2

    assert actor.stop(signal.SIGTERM) == 0
    assert "stopping after" in actor.output()


def test_an_actor_install_does_not_pull_tensorflow():
    """The `actor` extra's dependency closure (from installed metadata) holds no TensorFlow."""
    import re
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["actor"]

    def name(requirement: str) -> str:
        return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")

    seen, todo = set(), [name(r) for r in extra]
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        try:
            reqs = requires(package) or []
        except PackageNotFoundError:
            continue
        todo += [name(r) for r in reqs if "extra ==" not in r]
    assert {"grpcio", "gymnasium", "ale-py", "numpy"} <= seen
    assert not {p for p in seen if p.startswith(("tensorflow", "keras", "tf-"))}, sorted(seen)
