"""Inference round trips as an actor sees them: from sending Steps to holding the Actions."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from seedfleet.json_files import write_json


class RoundTrips:
    """The last `capacity` round trips, each with the wall-clock time it ended (a ring)."""

    def __init__(self, capacity: int = 1 << 18):
        self.ended_at = np.zeros(capacity, np.float64)  # time.time() when the actions arrived
        self.seconds = np.zeros(capacity, np.float32)
        self.count = 0

    def record(self, seconds: float) -> None:
        i = self.count % len(self.seconds)
        self.ended_at[i], self.seconds[i] = time.time(), seconds
        self.count += 1

    def latest(self) -> tuple[np.ndarray, np.ndarray]:
        """(ended_at, seconds) of the kept round trips, oldest first."""
        n = min(self.count, len(self.seconds))
        order = (np.arange(n) + self.count - n) % len(self.seconds)
        return self.ended_at[order], self.seconds[order]

    def write(self, path: Path) -> None:
        """Writes {"ended_at", "seconds"} as JSON, atomically."""
        ended_at, seconds = self.latest()
        body = {"ended_at": ended_at.tolist(), "seconds": seconds.tolist()}
        write_json(path, body, indent=None)
