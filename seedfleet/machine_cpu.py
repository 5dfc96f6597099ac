"""The machine's CPU: its model and feature flags, recorded with every run (wall times compare
only between runs on the same kind of CPU), and its CPU time, to tell a slow run from a
crowded machine (seedfleet bench)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

from seedfleet.json_files import write_json

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


BFLOAT16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of CPUs with bfloat16 dot-product units
FLAGS_OF_INTEREST = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")  # what sets a torso's speed here
MACHINE_FILE = "machine.json"  # in a run's log dir: [{cpu, flags, cores, commit, ..., "from_frames": n}, ...]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def source_commit() -> str:
    """The short commit of the checkout this code runs from ("" for an install without git)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def machine() -> dict:
    """This machine as a run records it: the CPU model, its flags of interest and strongest
    vector units, the core count, Python, the code's commit and the date."""
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor())
    flags = cpu_flags()
    return {"cpu": cpu, "units": vector_units(flags), "flags": [f for f in FLAGS_OF_INTEREST if f in flags],
            "cores": os.cpu_count(),
            "python": platform.python_version(), "commit": source_commit(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def machine_label(m: dict) -> str:
    """The CPU model and its strongest vector units, e.g. "AMD EPYC, avx512_bf16": figures
    compare only between the same two."""
    return m["cpu"] + (f", {m['units']}" if m.get("units") else "")


def read_machine(logdir: Path) -> list[dict]:
    """The stretches of a run's MACHINE_FILE ([] for a run without one, or one cut short)."""
    try:
        return json.loads((logdir / MACHINE_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return []


def record_machine(logdir: Path, from_frames: int) -> None:
    """Notes this machine in the run's MACHINE_FILE, atomically: a run restored at
    `from_frames` > 0 adds a stretch (it may have moved to another machine), a run from frame
    0 starts the record again. OSError when it cannot be written (the old record is kept)."""
    stretches = read_machine(logdir) if from_frames > 0 else []
    write_json(logdir / MACHINE_FILE, [*stretches, {**machine(), "from_frames": from_frames}], indent=1)


def cpu_label(logdir: Path) -> str:
    """The CPU a run ran on; " then " between the machines of a run resumed on another;
    "not recorded" for a run without a record."""
    stretches = read_machine(logdir)
    return " then ".join(dict.fromkeys(machine_label(m) for m in stretches)) if stretches else "not recorded"
