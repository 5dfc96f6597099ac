"""Every algorithm, by the name `--algo` takes. Adding one is one folder and one line here.

An entry gives the algorithm's config class (its flags), its task defaults (flag values
that follow the env: Atari or not, and `seedfleet run`'s launch), `make_agent` and
`make_trainer`. Nothing outside this file picks an algorithm by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from algorithms.agent import Agent, AgentContext
from algorithms.appo import builder as appo
from algorithms.impala import builder as impala
from algorithms.impala.config import ImpalaConfig
from algorithms.networks import NetworkConfig
from algorithms.r2d2 import builder as r2d2
from algorithms.r2d2.config import R2D2Config
from algorithms.trainer import LearnerStepRecorder, TrainerThread, UnrollSource
from seedfleet.envs import atari_settings
from seedfleet.errors import UsageError


@dataclass(frozen=True)
class Algorithm:
    config_class: type
    task_defaults: Callable[[bool, bool], dict]  # (atari, run) -> flag defaults
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


def default_algorithm(env: str) -> str:
    """`--algo` when none is given: APPO on ALE ids (the Atari defaults, chosen by the learning
    curves in BENCHMARKS.md), IMPALA's V-trace elsewhere."""
    return "appo" if atari_settings(env) is not None else "vtrace"


def task_defaults(algo: str, env: str, run: bool = False) -> dict:
    """Flag defaults that follow the task: `algo`'s for an Atari env or another, and for
    `seedfleet run`'s launch. Any flag given still wins."""
    return algorithm(algo).task_defaults(atari_settings(env) is not None, run)
