"""Shared helpers: learner and actor processes on loopback, with their logs captured."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import pytest

from seedfleet.server.native_logs import import_tensorflow

ROOT = Path(__file__).resolve().parent.parent
if os.environ.get("PYTEST_XDIST_WORKER"):  # where the test modules run (`make test`), not in xdist's controller
    import_tensorflow()  # their `import tensorflow` finds it loaded, without Keras (server/native_logs.py)


class Proc:
    """A child process whose merged output is collected line by line in the background."""

    def __init__(self, args: list[str], env: dict | None = None, cwd: Path = ROOT):
        """`env`: variables beside this process's; a None value removes one."""
        self.args = args
        self.popen = subprocess.Popen(
            args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 60.0, start: int = 0) -> re.Match:
        """Waits for a line matching `pattern` among lines[start:]."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[start:]:
                match = re.search(pattern, line)
                if match:
                    return match
            if self.popen.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} within {timeout}s:\n{self.output()[-4000:]}")

    def stop(self, sig=signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()


def seedfleet(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedfleet.deploy.cli", *args]


def cli_in_process(capsys, *args: str) -> tuple[int, str]:
    """The `seedfleet` command run in this process, which has TensorFlow loaded already (a
    process of its own spends 4 to 6 s of CPU on that): its exit code and its output. The
    environment variables it sets (TensorFlow's log level) are undone."""
    from seedfleet.deploy.cli import main

    capsys.readouterr()
    with mock.patch.dict(os.environ):
        code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def tool(name: str) -> str:
    """A command the dev extra (or make) installs beside this Python, else on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is missing: make install .venv/bin/kustomize"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def progress_frames(lines: list[str]) -> list[int]:
    return [int(m.group(1).replace(",", "")) for m in (re.match(r"^frames ([\d,]+) ", line) for line in lines) if m]


def start_learner(*args: str, address: str = "127.0.0.1:0") -> tuple[Proc, str]:
    """A learner on loopback; without --logdir it gets a new temporary one (no stray checkpoints)."""
    if "--logdir" not in args:
        args = (*args, "--logdir", tempfile.mkdtemp(prefix="seedfleet-test-"))
    proc = Proc(seedfleet("learner", "--address", address, "--progress-interval-s", "1", *args))
    address = proc.wait_for(r"listening on (\S+),", timeout=120).group(1)
    return proc, address


# R2D2 with short sequences and a small replay to start from, for tests of plumbing rather than
# learning (test_end_to_end, test_resume): with the default's 30-step unroll (burn-in 10, unroll
# 20, 64 sequences before training) the resume test took 54 s against 36 s beside a training run.
R2D2_SMALL = ("--burn-in", "2", "--unroll-length", "8", "--batch-size", "8", "--min-replay-size", "8")


# The suite's longest tests, longest first (each 25 s or more on 2 idle cores, by `make test`'s
# durations): they run before the rest. pytest-xdist hands tests out in collection order, so the
# short ones fill the end and neither worker is left waiting on the other's last long test.
LONGEST_FIRST = (
    "test_end_to_end.py::test_learner_and_two_actors_learn_cartpole",
    "test_catch_family.py::test_catch_trains_checkpoints_and_evaluates_end_to_end",
    "test_multi_device.py::test_a_learner_step_on_two_devices_equals_one",
    "test_faults.py::test_the_learner_survives_every_fault_at_once",
    "test_resume.py::test_a_killed_learner_resumes_from_its_newest_checkpoint",
    "test_tracking.py::test_a_run_and_its_resumed_stretch",
    "test_image_learning.py::test_stacked_frames_solve_moving_dot",
    "test_image_learning.py::test_one_frame_cannot_solve_moving_dot",
    "test_end_to_end.py::test_r2d2_runs_end_to_end",
    "test_bench.py::test_bench_all_modes_on_cartpole",
    "test_k8s.py::test_the_pods_run_as_local_processes",
    "test_eval_export.py::test_image_observations_through_checkpoint_eval_and_export",
    "test_native_logs.py::test_commands_that_load_tensorflow_start_quietly",
    "test_continuous_control.py::test_mujoco_envs_act_train_a_step_and_checkpoint",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, name in enumerate(LONGEST_FIRST) if name in item.nodeid), len(LONGEST_FIRST))
    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch):
    """Flags read SEEDFLEET_* variables (deploy.flags): tests start from none, whatever the shell
    has, but one. The learners the suite starts train without XLA: its compile of the learner
    step takes 6 to 8 s of CPU per learner (CartPole, V-trace), and the suite starts dozens of
    them on 2 cores. Tests of the default path pass `--jit-compile`, and in-process agents keep
    NetworkConfig's default."""
    for name in [name for name in os.environ if name.startswith("SEEDFLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SEEDFLEET_JIT_COMPILE", "false")


@pytest.fixture
def procs():
    """Collects processes started by a test and stops them at its end."""
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop(signal.SIGKILL)
