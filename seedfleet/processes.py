"""The launchers' child processes (`seedfleet run`, `seedfleet bench`): started with the
command an actor runs, dying with their launcher, and stopped with SIGTERM, then SIGKILL."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

PARENT_PID_ENV = "SEEDFLEET_PARENT_PID"
SETTINGS_PREFIX = "SEEDFLEET_"  # flags' defaults from the environment (deploy.flags)
# How much nicer than their launcher local actors run (`seedfleet run` and `seedfleet bench`:
# --actor-nice), so that the envs step in the gaps the learner's training leaves, as Sample
# Factory's rollout workers run at its default niceness + 10 (sample_factory/algo/sampling/
# rollout_worker.py). 0: on sticky Pong (2 cores) +10 was no faster (BENCHMARKS.md, "Actors
# nicer than the learner").
LOCAL_ACTOR_NICE = 0


def launched_env() -> dict[str, str]:
    """The environment for a child that should end when this process ends.

    It has no SEEDFLEET_* settings: the launcher gives its children every setting on their command lines.
    """
    kept = {key: value for key, value in os.environ.items() if not key.startswith(SETTINGS_PREFIX)}
    return {**kept, PARENT_PID_ENV: str(os.getpid())}


def exit_with_parent() -> None:
    """Linux: asks for SIGTERM when the launcher dies, even by SIGKILL.

    The child sets this itself at start-up, not in a `preexec_fn`: running Python between
    fork and exec in a launcher with gRPC threads can hang or kill the child.
    """
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):  # the launcher died before the request took
        os.kill(os.getpid(), signal.SIGTERM)


def run_nicer(steps: int) -> None:
    """Raises the niceness of every thread of this process by `steps` (at most 19). Linux keeps a
    niceness per thread and a new thread inherits its creator's, so threads started at import
    (numpy's BLAS pool, say) need their own call; elsewhere `os.nice` does the process."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        os.nice(steps)
        return
    for task in tasks.iterdir():
        tid = int(task.name)
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + steps, 19))
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def actor_command(address: str, envs: int, evaluation: bool = False, env_groups: int = 1,
                  token_file: str = "", nice: int = 0) -> list[str]:
    """The command line of one `seedfleet actor` process serving `envs` envs, `nice` steps
    nicer than its launcher."""
    command = [sys.executable, "-m", "seedfleet.deploy.cli", "actor", "--learner", address, "--envs", str(envs),
               "--env-groups", str(env_groups)]
    if token_file:
        command += ["--token-file", token_file]
    if nice:
        command += ["--nice", str(nice)]
    return command + ["--evaluation"] if evaluation else command


def start_child(command: list[str], **kwargs) -> subprocess.Popen:
    """A child process that gets SIGTERM when this one dies (see `exit_with_parent`)."""
    return subprocess.Popen(command, env=launched_env(), **kwargs)


def stop_children(procs: list[subprocess.Popen], timeout_s: float) -> None:
    """SIGTERM to all, then SIGKILL to any still running after `timeout_s` (one still
    building its envs, say: SIGTERM waits for that)."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
