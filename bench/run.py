"""`seedfleet bench`: the system's frames/s beside the ceilings it shares the machine with.

Phases run one after the other (see bench/phases.py); in `--mode all` the env ceiling is
measured before and after serve and their mean is used. Two bounds turn them into ratios:
when envs and inference share the same cores, a step costs 1/env + 1/model seconds at
best, so serve can reach at most 1 / (1/env + 1/model); training adds 1/train_only, the
train-step cost per env step, so train can reach at most 1 / (1/env + 1/model + 1/train_only).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from algorithms import registry
from algorithms.networks import NetworkConfig
from bench.phases import Setup, env_phase, model_phase, system_phase, train_only_phase
from bench.report import machine, plot_sweep, print_table
from server.assembly import LearnerConfig

NETWORK_FIELDS = {f.name for f in dataclasses.fields(NetworkConfig)}

MODES = ("env", "serve", "train", "all")


@dataclass
class BenchConfig:
    env: str = "ALE/Pong-v5"  # the env every phase runs
    algo: str = "vtrace"  # the agent: vtrace, appo or r2d2
    actors: int = 4  # actor processes
    envs_per_actor: int = 64  # envs hosted by each actor
    env_groups: int = 1  # Atari: each actor steps its envs in this many groups (see seedfleet actor)
    env_threads: int = 1  # Atari: each actor's vector-env threads (0: one per core)
    seconds: float = 30.0  # measured seconds per phase, after its warm-up
    warmup_s: float = 10.0  # seconds of warm-up before each phase is measured
    mode: str = "all"  # env, serve, train, or all (all phases, with the bounds and ratios)
    json: str = ""  # write the results here as JSON
    plot: str = ""  # with --sweep-actors: a PNG of frames/s against actors
    sweep_actors: str = ""  # comma-separated actor counts (1,2,4,8): env and serve at each
    inference_batch_size: int = LearnerConfig.inference_batch_size  # the learner's: flush once this many envs wait
    inference_timeout_ms: float = LearnerConfig.inference_timeout_ms  # the learner's: ... or after this long


def bound(*rates: float) -> float:
    """The best combined rate when each step pays 1/rate seconds in every stage, on shared cores."""
    return 1.0 / sum(1.0 / r for r in rates)


def bracketed(before: dict, after: dict) -> dict:
    """One phase measured before and after another: the mean of each figure, so a steady drift
    in the machine's speed (a shared VM's, over minutes) cancels out of the ratio; both kept."""
    mean = {key: round((value + after[key]) / 2, 2) for key, value in before.items()
            if isinstance(value, float) and isinstance(after.get(key), float)}
    return {**before, **mean, "before": before, "after": after}


def _setup(config: BenchConfig, actors: int, task_defaults: dict) -> Setup:
    algo_cls = registry.algorithm(config.algo).config_class
    names = {f.name for f in dataclasses.fields(algo_cls)}
    algo = algo_cls(**{k: v for k, v in task_defaults.items() if k in names})
    learner = LearnerConfig(env=config.env, algo=config.algo, address="127.0.0.1:0",
                            progress_interval_s=math.inf, exploration_envs=actors * config.envs_per_actor,
                            inference_batch_size=config.inference_batch_size,
                            inference_timeout_ms=config.inference_timeout_ms,
                            max_frames=int(task_defaults.get("max_frames", 0)))  # the decay's horizon
    network = NetworkConfig(**{k: v for k, v in task_defaults.items() if k in NETWORK_FIELDS})
    return Setup(learner, algo, network, actors, config.envs_per_actor, config.env_groups, config.seconds,
                 config.warmup_s, config.env_threads)


def measure(config: BenchConfig, task_defaults: dict, workdir: Path) -> dict:
    if config.mode not in MODES:
        raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {config.mode!r}")
    setup = _setup(config, config.actors, task_defaults)
    results: dict = {}
    if config.mode in ("env", "all"):
        results["env"] = env_phase(setup)
    if config.mode in ("serve", "all"):
        results["serve"] = system_phase(setup, workdir, train=False)
    if config.mode == "all":  # the env ceiling again: serve sits between its two measurements
        results["env"] = bracketed(results["env"], env_phase(setup))
        results["model"] = model_phase(setup, max(1, round(results["serve"]["mean_inference_batch"])))
        results["train_only"] = train_only_phase(setup)
    if config.mode in ("train", "all"):
        results["train"] = system_phase(setup, workdir, train=True)
    if config.mode == "all":
        rate = {name: results[name]["env_steps_per_s"] for name in ("env", "model", "train_only")}
        serve_bound = bound(rate["env"], rate["model"])
        train_bound = bound(rate["env"], rate["model"], rate["train_only"])
        results["bounds"] = {"serve_env_steps_per_s": round(serve_bound, 1),
                             "train_env_steps_per_s": round(train_bound, 1)}
        results["ratios"] = {"serve_vs_bound": round(results["serve"]["env_steps_per_s"] / serve_bound, 3),
                             "train_vs_bound": round(results["train"]["env_steps_per_s"] / train_bound, 3)}
    return results


def sweep(config: BenchConfig, task_defaults: dict, workdir: Path, counts: list[int]) -> list[dict]:
    rows = []
    for actors in counts:
        setup = _setup(config, actors, task_defaults)
        rows.append({"actors": actors, "env": env_phase(setup), "serve": system_phase(setup, workdir, train=False)})
    return rows


def main(config: BenchConfig) -> int:
    """`seedfleet bench`: measures, prints the table, writes --json and --plot."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    task_defaults = registry.task_defaults(config.algo, config.env)
    command = shlex.join(["seedfleet", *sys.argv[1:]])
    with tempfile.TemporaryDirectory(prefix="seedfleet-bench-") as tmp:
        results = {"config": dataclasses.asdict(config), "command": command, "machine": machine(),
                   **measure(config, task_defaults, Path(tmp))}
        if config.sweep_actors:
            counts = [int(n) for n in config.sweep_actors.split(",")]
            results["sweep"] = sweep(config, task_defaults, Path(tmp), counts)
    print_table(results)
    if config.json:
        Path(config.json).write_text(json.dumps(results, indent=2) + "\n")
    if config.plot and "sweep" in results:
        plot_sweep(results, Path(config.plot))
    return 0
