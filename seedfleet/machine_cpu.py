"""The whole machine's CPU time, to tell a slow run from a crowded machine (seedfleet bench)."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> dict[str, float]:
    """CPU seconds since boot, summed over cores, from /proc/stat: busy (user, system,
    interrupts), idle (with iowait) and steal (time the hypervisor gave to other guests:
    on a shared VM, the first suspect when two runs of the same phase differ)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return {"busy": (user + nice + system + irq + softirq) / TICKS, "idle": (idle + iowait) / TICKS,
            "steal": steal / TICKS}


def machine_cores(start: dict[str, float], end: dict[str, float], seconds: float) -> dict[str, float]:
    """Cores busy and cores stolen between two `machine_cpu_s` readings."""
    return {"machine_busy_cores": round((end["busy"] - start["busy"]) / seconds, 2),
            "steal_cores": round((end["steal"] - start["steal"]) / seconds, 2)}
