"""CPU seconds per thread, read from /proc, to see where a phase's cores went."""

from __future__ import annotations

from collections import defaultdict

from seedfleet.threads import thread_cpu_s


def snapshot(pids: dict[str, list[int]]) -> dict[str, dict[int, dict[int, tuple[str, float]]]]:
    """Per role (learner, actor, ...), per process: its threads' CPU seconds."""
    return {role: {pid: thread_cpu_s(pid) for pid in role_pids} for role, role_pids in pids.items()}


def cores_by_thread(start: dict, end: dict, seconds: float) -> dict[str, float]:
    """Cores used per "role/thread name" between two snapshots (threads summed over processes)."""
    cores: dict[str, float] = defaultdict(float)
    for role, processes in end.items():
        for pid, threads in processes.items():
            before = start.get(role, {}).get(pid, {})
            for tid, (name, cpu) in threads.items():
                cores[f"{role}/{name}"] += (cpu - before.get(tid, (name, 0.0))[1]) / seconds
    return {k: round(v, 3) for k, v in sorted(cores.items(), key=lambda kv: -kv[1]) if v >= 0.005}


TRANSPORT_THREADS = ("main", "grpc", "event_engine", "grpc_global_tim")


def transport_share(cores: dict[str, float]) -> float:
    """The share of the phase's CPU spent by gRPC and the Python around it: the learner's and
    actors' main threads (event loops: message (de)coding, checks, batching; the actor's
    also the env wrapper) and gRPC's own threads."""
    total = sum(cores.values())
    transport = sum(v for k, v in cores.items() if k.split("/", 1)[1] in TRANSPORT_THREADS)
    return round(transport / total, 3) if total else 0.0
