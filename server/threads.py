"""Names the learner's threads for the OS, so per-thread CPU (top -H, /proc, seedfleet bench)
tells the inference thread from the trainer and the gRPC event loop."""

from __future__ import annotations

import ctypes
import sys

PR_SET_NAME = 15


def name_this_thread(name: str) -> None:
    """Sets the calling thread's OS-visible name (Linux, at most 15 bytes); a no-op elsewhere."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
