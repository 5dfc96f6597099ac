"""Every algorithm, by the name `--algo` takes. Adding one is one folder and one line here.

An entry gives the algorithm's config class (its flags), its task defaults by env family
(seedfleet/envs), and the module that builds its agent and trainer. This file and the
configs it names are TensorFlow-free: the CLI reads them to answer `--help` or refuse a
mistake at once, and the builder module (which loads TensorFlow) is imported only when a
learner builds an agent. The CLI resolves the entry once and hands it down; nothing outside
this file picks an algorithm by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seedfleet.actions import BOX, DISCRETE, ActionSpec
from seedfleet.algorithms.appo.config import appo_presets
from seedfleet.algorithms.impala.config import ImpalaConfig, vtrace_presets
from seedfleet.algorithms.iqn.config import IQNConfig, iqn_presets
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.pqn.config import PQNConfig, pqn_presets
from seedfleet.algorithms.qrdqn.config import QRDQNConfig, qrdqn_presets
from seedfleet.algorithms.r2d2.config import R2D2Config, r2d2_presets
from seedfleet.algorithms.sac.config import SACConfig, sac_presets
from seedfleet.errors import UsageError
from seedfleet.settings import ANY_FAMILY, Presets

if TYPE_CHECKING:
    from seedfleet.algorithms.agent import Agent, AgentContext
    from seedfleet.algorithms.trainer import LearnerStepRecorder, TrainerThread, UnrollSource
    from seedfleet.stage_clock import StageClock

AlgoConfig = ImpalaConfig | IQNConfig | PQNConfig | QRDQNConfig | R2D2Config | SACConfig


@dataclass(frozen=True)
class Algorithm:
    name: str
    config_class: type
    presets: Callable[[str, str], Presets]  # (env family, kind of actions) -> flag defaults, a part per config
    builder: str  # the module with make_agent and make_trainer (TensorFlow), imported when they are called
    learn_calls_per_sequence: Callable[[Any], float]  # `learn` calls that train on each sequence (replay ratio)
    action_kinds: tuple[str, ...] = (DISCRETE,)  # the kinds of actions it acts in (seedfleet/actions.py)

    def check_actions(self, env_id: str, actions: ActionSpec) -> None:
        """UsageError unless this algorithm acts in `env_id`'s kind of actions."""
        if actions.kind not in self.action_kinds:
            raise UsageError(f"--algo {self.name} acts in {' or '.join(self.action_kinds)} actions; {env_id} has "
                             f"{actions.kind} ones, {actions.describe()}")

    def make_agent(self, config: AlgoConfig, network: NetworkConfig, context: AgentContext) -> Agent:
        return importlib.import_module(self.builder).make_agent(config, network, context)

    def make_trainer(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                     config: AlgoConfig, seed: int, clock: StageClock) -> TrainerThread:
        return importlib.import_module(self.builder).make_trainer(agent, queue, metrics, device, config, seed, clock)


IMPALA_BUILDER = "seedfleet.algorithms.impala.builder"

ALGORITHMS: dict[str, Algorithm] = {
    "vtrace": Algorithm("vtrace", ImpalaConfig, vtrace_presets, IMPALA_BUILDER, lambda _: 1.0, (DISCRETE, BOX)),
    "appo": Algorithm("appo", ImpalaConfig, appo_presets, IMPALA_BUILDER, lambda _: 1.0, (DISCRETE, BOX)),
    "r2d2": Algorithm("r2d2", R2D2Config, r2d2_presets, "seedfleet.algorithms.r2d2.builder",
                      lambda config: config.replay_ratio),
    "iqn": Algorithm("iqn", IQNConfig, iqn_presets, "seedfleet.algorithms.iqn.builder",
                     lambda config: config.replay_ratio * config.unroll_length),
    "qrdqn": Algorithm("qrdqn", QRDQNConfig, qrdqn_presets, "seedfleet.algorithms.qrdqn.builder",
                       lambda config: config.replay_ratio * config.unroll_length),
    "pqn": Algorithm("pqn", PQNConfig, pqn_presets, "seedfleet.algorithms.pqn.builder", lambda _: 1.0),
    "sac": Algorithm("sac", SACConfig, sac_presets, "seedfleet.algorithms.sac.builder",
                     lambda config: config.replay_ratio * config.batch_size, (BOX,)),
}


def algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise UsageError(f"unknown --algo {name!r}; choose from {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


# `--algo` when none is given, by env family (seedfleet/envs) and kind of actions: APPO on ALE
# (the Atari defaults, chosen by the learning curves in BENCHMARKS.md) and on every Box env
# (PPO's schedule is what the continuous-control references run), IMPALA's V-trace on any other.
DEFAULT_ALGORITHM = {("ale", DISCRETE): "appo", (ANY_FAMILY, BOX): "appo"}
FALLBACK_ALGORITHM = "vtrace"


def default_algorithm(family: str, kind: str) -> str:
    return DEFAULT_ALGORITHM.get((family, kind)) or DEFAULT_ALGORITHM.get((ANY_FAMILY, kind)) or FALLBACK_ALGORITHM
