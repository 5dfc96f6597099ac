"""OS-visible thread names, so per-thread CPU (top -H, /proc, seedfleet bench) tells the
env pool from the gRPC threads, the inference thread from the trainer.

Linux gives a new thread its creator's name. Threads that libraries start for us (ALE's
env pool, gRPC's poller, TensorFlow's compute pools) are therefore named by renaming the
creating thread for the moment they are started: `with spawned_threads_named("env"): ...`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

PR_SET_NAME, PR_GET_NAME = 15, 16
TICKS = os.sysconf("SC_CLK_TCK")
_LINUX = sys.platform.startswith("linux")


def name_this_thread(name: str) -> None:
    """Sets the calling thread's OS-visible name (Linux, at most 15 bytes); a no-op elsewhere."""
    if _LINUX:
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _this_thread_name() -> bytes:
    buffer = ctypes.create_string_buffer(16)
    ctypes.CDLL(None).prctl(PR_GET_NAME, buffer, 0, 0, 0)
    return buffer.value


@contextlib.contextmanager
def spawned_threads_named(name: str) -> Iterator[None]:
    """Threads started inside the block are named `name`; the caller keeps its own name."""
    if not _LINUX:
        yield
        return
    before = _this_thread_name()
    name_this_thread(name)
    try:
        yield
    finally:
        ctypes.CDLL(None).prctl(PR_SET_NAME, before, 0, 0, 0)


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """{thread id: (thread name, user + system CPU seconds)} of one process; {} if it is gone.
    The main thread is called "main" (its OS name is the process's)."""
    out = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = "main" if task.name == str(pid) else stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
    return out


def cpu_by_thread_name(pid: int) -> dict[str, float]:
    """CPU seconds of a process's threads so far, summed by name with the pools' numbers
    taken off ("inference_0" -> "inference", "tf_3" -> "tf")."""
    out: dict[str, float] = {}
    for name, cpu in thread_cpu_s(pid).values():
        name = re.sub(r"[\d_-]+$", "", name) or name
        out[name] = out.get(name, 0.0) + cpu
    return out
