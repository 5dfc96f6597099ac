"""IMPALA's registry entry: its task defaults, agent and trainer."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ATARI_DEFAULTS, ImpalaConfig
from seedfleet.algorithms.networks import NetworkConfig
from seedfleet.algorithms.trainer import LearnerStepRecorder, OnPolicyTrainer, UnrollSource
from seedfleet.errors import UsageError

ATARI_MAX_FRAMES = 20_000_000  # the budget where the Atari preset's learning rate reaches 0
ATARI_ENVS_PER_ACTOR = 32  # `seedfleet run` on Atari: 2 actors x 32 envs keep the learner busy


FAMILY_DEFAULTS = {"ale": {**ATARI_DEFAULTS, "max_frames": ATARI_MAX_FRAMES}}  # by env family (seedfleet/envs)
FAMILY_LAUNCH = {"ale": {"envs_per_actor": ATARI_ENVS_PER_ACTOR}}  # `seedfleet run`'s, by env family


def task_defaults(family: str, run: bool) -> dict:
    """Flag defaults by env family: the Atari preset (with its frame budget) on ALE, none elsewhere."""
    return {**FAMILY_DEFAULTS.get(family, {}), **(FAMILY_LAUNCH.get(family, {}) if run else {})}


def make_agent(config: ImpalaConfig, network: NetworkConfig, context: AgentContext) -> ImpalaAgent:
    decay_steps = 0
    if config.learning_rate_decay:
        horizon = config.learning_rate_decay_frames or context.max_frames
        if not horizon:
            raise UsageError("--learning-rate-decay falls to 0 at --max-frames: set --max-frames "
                             "(or --learning-rate-decay-frames)")
        decay_steps = horizon // (context.frame_skip * config.batch_size * config.unroll_length)
    return ImpalaAgent(config, network, context, decay_steps=decay_steps)


def make_trainer(agent: ImpalaAgent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: ImpalaConfig, seed: int) -> OnPolicyTrainer:
    del config, seed  # each batch is trained on as it comes
    return OnPolicyTrainer(agent, queue, metrics, device)
