"""The machine's CPU: its feature flags, and its CPU time, to tell a slow run from a crowded
machine (seedfleet bench)."""

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


def cpu_flags() -> set[str]:
    """This machine's CPU feature flags (/proc/cpuinfo), empty where it cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.partition(":")[2].split()}


# The vector units that set a conv torso's training rate on a CPU, strongest first: AMX and
# AVX-512 BF16 train Atari's Nature CNN in bfloat16 through oneDNN (at 1,635 and 1,023 env
# steps/s on 2 cores, BENCHMARKS.md), the others in float32.
VECTOR_UNITS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")


def vector_units(flags: set[str]) -> str:
    """The strongest of VECTOR_UNITS among `flags` ("" when none is)."""
    return next((unit for unit in VECTOR_UNITS if unit in flags), "")
