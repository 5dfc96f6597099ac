"""How far along a run is, for its console line: with a frame budget, the share done and an
ETA from the recent rate; with a target return, the best mean return so far against it.

The rate is the frames over the last RATE_WINDOW_S seconds of progress lines, not since the
start: a run resumed, or one whose machine got busier, tells its end from how it goes now.
"""

from __future__ import annotations

import math
from collections import deque

RATE_WINDOW_S = 120.0  # the recent rate over about this long (at least two progress lines)


def duration(seconds: float) -> str:
    """`1h02m`, `12m05s` or `40s`."""
    seconds = max(int(round(seconds)), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class RunProgress:
    """The run's progress against its budget (`max_frames`, 0: none) and its target return
    (NaN: none), read at each progress line."""

    def __init__(self, max_frames: int = 0, target_return: float = math.nan):
        self.max_frames = max_frames
        self.target_return = target_return
        self.best_return = math.nan
        self._recent: deque[tuple[float, int]] = deque()  # (monotonic time, frames) of recent lines

    def frames_per_s(self) -> float:
        """Frames a second over the recent window (NaN before two lines)."""
        if len(self._recent) < 2:
            return math.nan
        (t0, f0), (t1, f1) = self._recent[0], self._recent[-1]
        return (f1 - f0) / (t1 - t0) if t1 > t0 else math.nan

    def update(self, now: float, frames: int, mean_return: float) -> str:
        """Notes a progress line's time, frames and the mean return the target reads; returns
        the line's progress words: `(12.5%, ETA 1h02m)` and/or `best 17.3 of target 18`, or ""."""
        self._recent.append((now, frames))
        while len(self._recent) > 2 and now - self._recent[1][0] >= RATE_WINDOW_S:
            self._recent.popleft()
        if not math.isnan(mean_return):
            self.best_return = mean_return if math.isnan(self.best_return) else max(self.best_return, mean_return)
        words = []
        if self.max_frames:
            rate = self.frames_per_s()
            left = max(self.max_frames - frames, 0)
            eta = duration(left / rate) if rate > 0 else ("0s" if not left else "?")
            words.append(f"({100 * min(frames / self.max_frames, 1.0):.1f}%, ETA {eta})")
        if not math.isnan(self.target_return):
            best = "-" if math.isnan(self.best_return) else f"{self.best_return:.1f}"
            words.append(f"best {best} of target {self.target_return:g}")
        return "  ".join(words)
