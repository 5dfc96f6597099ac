"""`seedfleet bench`: the system's frames/s beside the ceilings it shares the machine with.

Phases run one after the other (see bench/phases.py); in `--mode all` the env ceiling is
measured before and after serve and their mean is used. Two bounds turn them into ratios:
when envs and inference share the same cores, a step costs 1/env + 1/model seconds at
best, so serve can reach at most 1 / (1/env + 1/model); training adds 1/train_only, the
train-step cost per env step, so train can reach at most 1 / (1/env + 1/model + 1/train_only).
`--mode train_profile` (bench/train_profile.py) splits that train step by oneDNN primitive.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shlex
import sys
import tempfile
from pathlib import Path

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm
from seedfleet.bench.config import MODES, BenchConfig
from seedfleet.bench.phases import Setup, env_phase, model_phase, system_phase, train_only_phase
from seedfleet.bench.report import plot_sweep, print_table
from seedfleet.bench.train_profile import profile_rows, train_profile_phase
from seedfleet.errors import UsageError
from seedfleet.machine_cpu import machine
from seedfleet.server.assembly import LearnerConfig


def bound(*rates: float) -> float:
    """The best combined rate when each step pays 1/rate seconds in every stage, on shared cores."""
    return 1.0 / sum(1.0 / r for r in rates)


def bracketed(before: dict, after: dict) -> dict:
    """One phase measured before and after another: the mean of each figure, so a steady drift
    in the machine's speed (a shared VM's, over minutes) cancels out of the ratio; both kept."""
    mean = {key: round((value + after[key]) / 2, 2) for key, value in before.items()
            if isinstance(value, float) and isinstance(after.get(key), float)}
    return {**before, **mean, "before": before, "after": after}


def _setup(config: BenchConfig, actors: int, learner: LearnerConfig, algorithm: Algorithm, algo: AlgoConfig,
           network: NetworkConfig) -> Setup:
    """The phases' setup: the learner's configs as `seedfleet learner` would take them (its flags
    and the task's defaults), on a free loopback port and without progress lines."""
    learner = dataclasses.replace(learner, address="127.0.0.1:0", progress_interval_s=math.inf)
    return Setup(learner, algorithm, algo, network, actors, config.envs_per_actor, config.env_groups, config.seconds,
                 config.warmup_s, config.env_threads, config.actor_nice)


def measure(config: BenchConfig, setup: Setup, workdir: Path) -> dict:
    if config.mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {config.mode!r}")
    if config.mode == "train_only":
        return {"train_only": train_only_phase(setup)}
    if config.mode == "train_profile":
        return {"train_profile": train_profile_phase(setup)}
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


def sweep(config: BenchConfig, base: Setup, workdir: Path, counts: list[int]) -> list[dict]:
    rows = []
    for actors in counts:
        setup = _setup(config, actors, base.learner, base.algorithm, base.algo, base.network)
        rows.append({"actors": actors, "env": env_phase(setup), "serve": system_phase(setup, workdir, train=False)})
    return rows


def main(algorithm: Algorithm, config: BenchConfig, learner: LearnerConfig, algo: AlgoConfig,
         network: NetworkConfig) -> int:
    """`seedfleet bench`: measures, prints the table, writes --json and --plot. The learner's
    configs come from its own flags (`seedfleet bench --algo appo --torso impala_shallow ...`)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    setup = _setup(config, config.actors, learner, algorithm, algo, network)
    command = shlex.join(["seedfleet", *sys.argv[1:]])
    with tempfile.TemporaryDirectory(prefix="seedfleet-bench-") as tmp:
        results = {"config": {**dataclasses.asdict(config), "env": learner.env, "algo": learner.algo,
                              "agent": dataclasses.asdict(algo), "network": dataclasses.asdict(network)},
                   "command": command, "machine": machine(), **measure(config, setup, Path(tmp))}
        if config.sweep_actors:
            counts = [int(n) for n in config.sweep_actors.split(",")]
            results["sweep"] = sweep(config, setup, Path(tmp), counts)
    if "train_profile" in results:
        print("\n".join(profile_rows(results["train_profile"])))
    else:
        print_table(results)
    if config.json:
        Path(config.json).write_text(json.dumps(results, indent=2) + "\n")
    if config.plot and "sweep" in results:
        plot_sweep(results, Path(config.plot))
    return 0
