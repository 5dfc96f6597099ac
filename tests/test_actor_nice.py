"""Local actors run nicer than their learner: `seedfleet actor --nice N`, and `--actor-nice N`
of `seedfleet run` and `seedfleet bench`, which hand it to their actors."""

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import free_port

from seedfleet.deploy import local
from seedfleet.deploy.local import Fleet, LaunchConfig


def _thread_niceness(pid: int) -> dict[int, int]:
    """Niceness of each thread of `pid` (Linux keeps one per thread): field 19 of /proc/PID/task/TID/stat."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # the thread ended
            continue
        found[int(task.name)] = int(fields[16])  # fields[0] is field 3 (state)
    return found


def _actor_threads(extra: list[str]) -> dict[int, int]:
    """Starts an actor toward a learner that is not there (it retries), waits until its gRPC and
    event-loop threads run, and returns their niceness."""
    command = [sys.executable, "-m", "seedfleet.deploy.cli", "actor", "--learner", f"127.0.0.1:{free_port()}",
               "--envs", "2", "--reconnect-max-s", "0.2", *extra]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(_thread_niceness(proc.pid)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the actor never started its threads"
            time.sleep(0.1)
        time.sleep(1.0)  # retries open more channels and threads
        return _thread_niceness(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_actor_with_nice_runs_every_thread_that_much_nicer():
    mine = os.nice(0)
    plain = _actor_threads([])
    niced = _actor_threads(["--nice", "7"])
    assert set(plain.values()) == {mine}
    assert len(niced) >= 3 and set(niced.values()) == {min(mine + 7, 19)}, niced


def test_the_local_fleet_hands_its_actors_the_niceness(monkeypatch):
    started = []
    monkeypatch.setattr(local, "start_child", lambda command: started.append(command))
    Fleet(LaunchConfig(actors=2, eval_actors=1, actor_nice=9)).start("127.0.0.1:1")
    assert len(started) == 3
    for command in started:
        assert command[command.index("--nice") + 1] == "9"
    started.clear()
    Fleet(LaunchConfig(actors=1, actor_nice=0)).start("127.0.0.1:1")
    assert "--nice" not in started[0]
