"""`seedfleet bench --mode train_profile`: where a learner step's time goes, primitive by primitive.

On a CPU, TensorFlow runs convolutions, matmuls and their gradients through oneDNN, and a
learner step on Atari frames is almost all of them. oneDNN can time every primitive it
executes (`ONEDNN_VERBOSE=profile_exec`: one line per call, with its kind, its pass, its
shape and its milliseconds). This phase turns that on, runs `learn` on one real-layout
batch (as train_only does) a few times after a warm-up, and sums the lines of the measured
calls by (kind, pass, implementation, shape), per learner step.

oneDNN reads ONEDNN_VERBOSE once, when it creates its first primitive, so the phase must
run before anything else in the process touches a convolution or a matmul; it says so if
no line came. The lines go to the process's standard output at the C level, so the phase
points file descriptor 1 at a temporary file while it runs.

Primitives that TensorFlow runs at the same time (a step's independent gradient ops) are
timed each on its own clock, so their sum can exceed the wall time; what is not oneDNN
(element-wise ops, casts, transposes, the optimizer's update, Python) is the wall time
left over when nothing overlapped.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass

import tensorflow as tf

from seedfleet.bench.phases import Setup, bench_agent, real_layout_batch

VERBOSE_PREFIX = "onednn_verbose,"
MARK = "seedfleet-train-profile-measured"


@dataclass(frozen=True)
class PrimitiveCall:
    kind: str  # convolution, matmul, inner_product, reorder, ...
    implementation: str  # e.g. jit_bf16:avx512_core_bf16
    propagation: str  # forward_training, backward_data, backward_weights, undef
    shape: str  # oneDNN's problem descriptor, e.g. mb264_ic32oc64_ih20oh9kh4sh2...
    ms: float


def parse_exec_line(line: str) -> PrimitiveCall | None:
    """One `profile_exec` line of oneDNN 3.x, or None for any other line:

    onednn_verbose,[timestamp,]v1,primitive,exec,cpu,<kind>,<impl>,<prop>,<memory descriptors>,
    <attributes>,<algorithm>,<problem>,<ms>
    """
    if not line.startswith(VERBOSE_PREFIX):
        return None
    fields = line.strip().split(",")
    try:
        at = fields.index("exec")
    except ValueError:
        return None
    if len(fields) < at + 6 or fields[at - 1] != "primitive":
        return None
    try:
        ms = float(fields[-1])
    except ValueError:
        return None
    return PrimitiveCall(fields[at + 2], fields[at + 3], fields[at + 4], fields[-2], ms)


def summarize(calls: list[PrimitiveCall], learner_steps: int, wall_s: float) -> dict:
    """The calls summed by (kind, pass, implementation, shape), per learner step, largest first."""
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for call in calls:
        groups[(call.kind, call.propagation, call.implementation, call.shape)].append(call.ms)
    rows = [{"kind": kind, "pass": prop, "implementation": impl, "shape": shape,
             "calls_per_step": round(len(ms) / learner_steps, 2),
             "ms_per_step": round(sum(ms) / learner_steps, 2)}
            for (kind, prop, impl, shape), ms in groups.items()]
    rows.sort(key=lambda row: -row["ms_per_step"])
    onednn_ms = sum(call.ms for call in calls) / learner_steps
    return {"learner_steps": learner_steps, "wall_ms_per_step": round(1000 * wall_s / learner_steps, 1),
            "onednn_ms_per_step": round(onednn_ms, 1), "primitives": rows}


def train_profile_phase(setup: Setup, learner_steps: int = 2, warmup_steps: int = 2) -> dict:
    """`learn` on one real-layout batch, `warmup_steps` times, then `learner_steps` times with
    every oneDNN primitive timed; the summary of the measured calls (`summarize`)."""
    os.environ["ONEDNN_VERBOSE"] = "profile_exec"
    libc = ctypes.CDLL(None)
    with tempfile.TemporaryFile() as captured:
        saved_stdout = os.dup(1)
        sys.stdout.flush()
        libc.fflush(None)
        os.dup2(captured.fileno(), 1)
        try:
            agent, env_config, _, device = bench_agent(setup)
            batch = real_layout_batch(agent, env_config, device)
            with tf.device(device):
                for _ in range(warmup_steps):
                    agent.learn(batch)
                libc.fflush(None)
                os.write(1, f"\n{MARK}\n".encode())
                start = time.monotonic()
                for _ in range(learner_steps):
                    agent.learn(batch)
                wall_s = time.monotonic() - start
                libc.fflush(None)
        finally:
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)
        captured.seek(0)
        text = captured.read().decode(errors="replace")
    if VERBOSE_PREFIX not in text:
        raise RuntimeError("oneDNN printed nothing: TensorFlow runs without it here (TF_ENABLE_ONEDNN_OPTS=0, or "
                           "a GPU), or something in this process used it before the profile began")
    measured = text.partition(MARK)[2].splitlines()
    calls = [call for call in map(parse_exec_line, measured) if call is not None]
    return summarize(calls, learner_steps, wall_s)


def profile_rows(profile: dict, top: int = 15) -> list[str]:
    """The profile as a Markdown table, the `top` largest groups."""
    lines = [f"train_profile: {profile['wall_ms_per_step']:,.1f} ms per learner step, "
             f"{profile['onednn_ms_per_step']:,.1f} ms of it in oneDNN primitives "
             f"(over {profile['learner_steps']} steps)",
             "| ms per step | calls per step | kind | pass | implementation | shape |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in profile["primitives"][:top]:
        lines.append(f"| {row['ms_per_step']:,.1f} | {row['calls_per_step']:g} | {row['kind']} | {row['pass']} | "
                     f"{row['implementation']} | {row['shape']} |")
    return lines
