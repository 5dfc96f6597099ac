"""Every algorithm, by the name `--algo` takes. Adding one is one folder and one line here.

An entry gives the algorithm's config class (its flags), its task defaults (flag values
that follow the env's family, seedfleet/envs, and `seedfleet run`'s launch), `make_agent`
and `make_trainer`. Nothing outside this file picks an algorithm by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seedfleet.algorithms.agent import Agent, AgentContext
from seedfleet.algorithms.appo import builder as appo
from seedfleet.algorithms.impala import builder as impala
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.networks import NetworkConfig
from seedfleet.algorithms.r2d2 import builder as r2d2
from seedfleet.algorithms.r2d2.config import R2D2Config
from seedfleet.algorithms.trainer import LearnerStepRecorder, TrainerThread, UnrollSource
from seedfleet.envs import family_for
from seedfleet.errors import UsageError


@dataclass(frozen=True)
class Algorithm:
    config_class: type
    task_defaults: Callable[[str, bool], dict]  # (env family, run) -> flag defaults
    make_agent: Callable[[Any, NetworkConfig, AgentContext], Agent]
    make_trainer: Callable[[Agent, UnrollSource, LearnerStepRecorder, str, Any, int], TrainerThread]
    learn_calls_per_sequence: Callable[[Any], float]  # `learn` calls that train on each sequence (replay ratio)


ALGORITHMS: dict[str, Algorithm] = {
    "vtrace": Algorithm(ImpalaConfig, impala.task_defaults, impala.make_agent, impala.make_trainer, lambda _: 1.0),
    "appo": Algorithm(ImpalaConfig, appo.task_defaults, impala.make_agent, impala.make_trainer, lambda _: 1.0),
    "r2d2": Algorithm(R2D2Config, r2d2.task_defaults, r2d2.make_agent, r2d2.make_trainer,
                      lambda config: config.replay_ratio),
}

AlgoConfig = ImpalaConfig | R2D2Config


def algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise UsageError(f"unknown algo {name!r}; choose from {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


# `--algo` when none is given, by env family: APPO on ALE (the Atari defaults, chosen by the
# learning curves in BENCHMARKS.md), IMPALA's V-trace on any other.
DEFAULT_ALGORITHM = {"ale": "appo"}
FALLBACK_ALGORITHM = "vtrace"


def default_algorithm(env: str) -> str:
    return DEFAULT_ALGORITHM.get(family_for(env).name, FALLBACK_ALGORITHM)


def task_defaults(algo: str, env: str, run: bool = False) -> dict:
    """Flag defaults that follow the task: `algo`'s for the env's family, and for `seedfleet
    run`'s launch. Any flag given still wins."""
    return algorithm(algo).task_defaults(family_for(env).name, run)
