"""The benchmark's phases, each measured after its own warm-up, one after the other.

- env: the actor processes step their envs with random actions, no learner (the env ceiling);
- model: the agent's `act` alone, in this process, at the batch size serve reached;
- serve: learner and actors, acting only (unrolls are assembled, then dropped);
- train: the whole system, training;
- train_only: the agent's `learn` alone on one real-layout batch, in this process.

Every phase returns a dict with `env_steps_per_s` and `frames_per_s`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.actor_client.actor import ActorConfig
from seedfleet.algorithms.agent import Agent, Unroll
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm
from seedfleet.bench import timed_actor
from seedfleet.bench.cpu import cores_by_thread, snapshot, transport_share
from seedfleet.envs import StepBatch
from seedfleet.machine_cpu import machine_cores, machine_cpu_s
from seedfleet.processes import LOCAL_ACTOR_NICE, start_child, stop_children
from seedfleet.server.assembly import LearnerConfig, compute_device, env_config_for, make_agent
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.inference import InferenceEngine, StepRequest
from seedfleet.server.learner import serve
from seedfleet.server.metrics import Metrics
from seedfleet.server.unroll_queue import UnrollQueue
from seedfleet.wire import EnvSpec


@dataclasses.dataclass
class Setup:
    """What every phase runs: the learner's configs and the actor fleet's shape."""

    learner: LearnerConfig
    algorithm: Algorithm  # the registry's entry for learner.algo, as the CLI resolved it
    algo: AlgoConfig
    network: NetworkConfig
    actors: int
    envs_per_actor: int
    env_groups: int
    seconds: float
    warmup_s: float
    env_threads: int = 0  # each actor's Atari vector env threads (0: one per core)
    actor_nice: int = LOCAL_ACTOR_NICE  # each actor's niceness above the learner's (seedfleet actor --nice)


def _rates(env_steps: float, seconds: float, frame_skip: int) -> dict:
    per_s = env_steps / seconds
    return {"env_steps_per_s": round(per_s, 1), "frames_per_s": round(per_s * frame_skip, 1)}


def env_phase(setup: Setup) -> dict:
    """The environment ceiling: the same number of actor processes, random actions."""
    command = [sys.executable, "-m", "seedfleet.actor_client.ceiling", "--env", setup.learner.env,
               "--envs", str(setup.envs_per_actor), "--seconds", str(setup.seconds),
               "--warmup-s", str(setup.warmup_s), "--env-groups", str(setup.env_groups),
               "--env-threads", str(setup.env_threads)]
    procs = [start_child([*command, "--seed", str(i)], stdout=subprocess.PIPE, text=True)
             for i in range(setup.actors)]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=setup.warmup_s + setup.seconds + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"env ceiling process failed with exit code {proc.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    per_s = sum(r["env_steps"] / r["seconds"] for r in results)
    machine = {key: round(float(np.mean([r[key] for r in results])), 2)
               for key in ("machine_busy_cores", "steal_cores")}
    return {**_rates(per_s, 1.0, results[0]["frame_skip"]), "actors": setup.actors, **machine}


def bench_agent(setup: Setup):
    """The agent the learner would build for `setup`, on the compute device: (agent, env config,
    frames per env step, device)."""
    env_config, frame_skip = env_config_for(setup.learner)
    device = compute_device()
    with tf.device(device):
        agent = make_agent(setup.learner, setup.algorithm, setup.algo, setup.network, env_config, device, frame_skip,
                           launched_envs=setup.actors * setup.envs_per_actor)
    return agent, env_config, frame_skip, device


def _random_observations(rng: np.random.Generator, batch: int, env_config) -> np.ndarray:
    spec = EnvSpec.from_proto(env_config)
    shape, dtype = (batch, *spec.obs_shape), spec.obs_dtype
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.standard_normal(shape).astype(dtype)


def _time_calls(call: Callable[[], object], warmup_s: float, seconds: float) -> tuple[int, float, dict]:
    """Calls `call` through a warm-up, then counts calls over `seconds`: (calls, elapsed,
    the machine's busy and stolen cores meanwhile)."""
    until = time.monotonic() + warmup_s
    while time.monotonic() < until:
        call()
    start = now = time.monotonic()
    cpu_start = machine_cpu_s()
    calls = 0
    while now - start < seconds:
        call()
        calls += 1
        now = time.monotonic()
    return calls, now - start, machine_cores(cpu_start, machine_cpu_s(), now - start)


def model_phase(setup: Setup, batch_size: int) -> dict:
    """The inference ceiling: `act` on random observations at `batch_size`, nothing else."""
    agent, env_config, frame_skip, device = bench_agent(setup)
    rng = np.random.default_rng(0)
    obs = _random_observations(rng, batch_size, env_config)
    reward = np.zeros(batch_size, np.float32)
    first = np.zeros(batch_size, bool)
    env_ids = np.arange(batch_size, dtype=np.int32)
    state = agent.initial_state(batch_size)

    def act() -> None:
        with tf.device(device):
            actions, _, _ = agent.act(obs, reward, first, env_ids, state)
        actions.numpy()

    calls, elapsed, machine = _time_calls(act, min(setup.warmup_s, 3.0), setup.seconds)
    return {**_rates(calls * batch_size, elapsed, frame_skip), "batch_size": batch_size, **machine}


def real_layout_batch(agent: Agent, env_config, device: str) -> Unroll:
    """One training batch exactly as the learner assembles it, from random steps."""
    rows = agent.batch_size
    slots = EnvSlots.for_agent(rows, agent, EnvSpec.from_proto(env_config))
    queue = UnrollQueue(2 * rows, rows)
    engine = InferenceEngine(agent, slots, queue, Metrics(1), device)
    engine.reset(0, rows)
    rng = np.random.default_rng(0)
    env_ids = np.arange(rows, dtype=np.int32)
    for t in range(agent.layout.rows):
        step = StepBatch(_random_observations(rng, rows, env_config), rng.standard_normal(rows).astype(np.float32),
                         np.zeros(rows, bool), np.zeros(rows, bool), np.full(rows, t == 0))
        engine.process([StepRequest(env_ids, step)])
    return queue.get_batch(rows, timeout_s=0.0)


def env_steps_per_learner_step(setup: Setup) -> float:
    """Env steps whose data one learner step consumes: B * T, over the replay ratio for R2D2."""
    transitions = setup.algo.batch_size * setup.algo.unroll_length
    return transitions / setup.algorithm.learn_calls_per_sequence(setup.algo)


def train_only_phase(setup: Setup) -> dict:
    """The train-step cost: `learn` on one real-layout batch, again and again."""
    agent, env_config, frame_skip, device = bench_agent(setup)
    batch = real_layout_batch(agent, env_config, device)

    def learn() -> None:
        with tf.device(device):
            out = agent.learn(batch)
        float(out["loss"] if "loss" in out else next(iter(out.values())))

    calls, elapsed, machine = _time_calls(learn, min(setup.warmup_s, 3.0), setup.seconds)
    steps = calls * env_steps_per_learner_step(setup)
    return {**_rates(steps, elapsed, frame_skip), "learner_steps_per_s": round(calls / elapsed, 2), **machine}


@dataclasses.dataclass
class _Mark:
    monotonic: float
    wall: float
    env_steps: int
    inference_calls: int
    learner_steps: int
    cpu_s: float
    machine: dict[str, float]
    threads: dict


def _mark(metrics: Metrics, actor_pids: list[int]) -> _Mark:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    threads = snapshot({"learner": [os.getpid()], "actor": actor_pids})
    return _Mark(time.monotonic(), time.time(), metrics.env_steps, metrics.inference_calls, metrics.learner_steps,
                 usage.ru_utime + usage.ru_stime, machine_cpu_s(), threads)


def _latencies_ms(files: list[Path], start_wall: float, end_wall: float) -> np.ndarray:
    kept = []
    for path in files:
        body = json.loads(path.read_text())
        ended_at, seconds = np.asarray(body["ended_at"]), np.asarray(body["seconds"])
        kept.append(seconds[(ended_at >= start_wall) & (ended_at <= end_wall)])
    return np.concatenate(kept) * 1e3 if kept else np.zeros(0)


def system_phase(setup: Setup, workdir: Path, train: bool) -> dict:
    """Learner (in this process) and actor processes, measured after the warm-up; `train`
    off is serve mode."""
    phase_dir = Path(tempfile.mkdtemp(prefix=f"{'train' if train else 'serve'}-{setup.actors}-actors-", dir=workdir))
    learner = dataclasses.replace(setup.learner, logdir=str(phase_dir), fresh=True)
    files = [phase_dir / f"round-trips-{i}.json" for i in range(setup.actors)]
    actors: list[subprocess.Popen] = []

    def start_actors(address: str) -> None:
        for path in files:
            config = ActorConfig(learner=address, envs=setup.envs_per_actor, env_groups=setup.env_groups,
                                 env_threads=setup.env_threads, log_interval_s=0, nice=setup.actor_nice)
            actors.append(start_child(timed_actor.command(path, config)))

    started = time.monotonic()
    marks: dict[str, _Mark | float] = {}

    def stop_when(metrics: Metrics) -> str | None:
        now = time.monotonic()
        if any(proc.poll() is not None for proc in actors):
            return "actor_failed"
        if "flowing" not in marks:  # the warm-up counts from the first env step (train: learner step)
            if metrics.env_steps == 0 or (train and metrics.learner_steps == 0):
                return "no_steps_failed" if now - started > 180 else None
            marks["flowing"] = now
        if "start" not in marks:
            if now - marks["flowing"] >= setup.warmup_s:
                marks["start"] = _mark(metrics, [proc.pid for proc in actors])
        elif now - marks["start"].monotonic >= setup.seconds:
            marks["end"] = _mark(metrics, [proc.pid for proc in actors])
            return "measured"
        return None

    try:
        summary = asyncio.run(serve(learner, setup.algorithm, setup.algo, setup.network, on_ready=start_actors,
                                    stop_when=stop_when, train=train,
                                    launched_envs=setup.actors * setup.envs_per_actor))
    finally:
        stop_children(actors, timeout_s=30)
    if summary["stop_reason"] != "measured":
        raise RuntimeError(f"the {'train' if train else 'serve'} phase stopped early: {summary['stop_reason']}")
    start, end = marks["start"], marks["end"]
    elapsed = end.monotonic - start.monotonic
    env_steps = end.env_steps - start.env_steps
    if env_steps == 0:
        raise RuntimeError(f"no env steps in the measured {elapsed:.0f} s: the system stalled")
    latencies = _latencies_ms(files, start.wall, end.wall)
    frame_skip = summary["frames"] // max(summary["env_steps"], 1)
    learner_steps_per_s = (end.learner_steps - start.learner_steps) / elapsed
    result = {
        **_rates(env_steps, elapsed, frame_skip),
        "actors": setup.actors,
        "mean_inference_batch": round(env_steps / max(end.inference_calls - start.inference_calls, 1), 1),
        "latency_p50_ms": round(float(np.percentile(latencies, 50)), 2) if len(latencies) else None,
        "latency_p99_ms": round(float(np.percentile(latencies, 99)), 2) if len(latencies) else None,
        "server_cpu_cores": round((end.cpu_s - start.cpu_s) / elapsed, 2),
        **machine_cores(start.machine, end.machine, elapsed),
        "learner_steps_per_s": round(learner_steps_per_s, 2),
        "cores_by_thread": cores_by_thread(start.threads, end.threads, elapsed),
    }
    result["transport_share"] = transport_share(result["cores_by_thread"])
    if train:
        result["samples_trained_per_s"] = round(learner_steps_per_s * setup.algo.batch_size
                                                * setup.algo.unroll_length, 1)
    return result
