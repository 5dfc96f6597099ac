"""IMPALA's registry entry: its task defaults, agent and trainer."""

from __future__ import annotations

from algorithms.agent import AgentContext
from algorithms.impala.agent import ImpalaAgent
from algorithms.impala.config import ATARI_DEFAULTS, ImpalaConfig
from algorithms.networks import NetworkConfig
from algorithms.trainer import LearnerStepRecorder, OnPolicyTrainer, UnrollSource
from seedfleet.errors import UsageError

ATARI_MAX_FRAMES = 20_000_000  # the budget where the Atari preset's learning rate reaches 0
ATARI_ENVS_PER_ACTOR = 32  # `seedfleet run` on Atari: 2 actors x 32 envs keep the learner busy


def task_defaults(atari: bool, run: bool) -> dict:
    """Flag defaults that follow the task: the Atari preset (with its frame budget) on ALE ids."""
    if not atari:
        return {}
    launch = {"envs_per_actor": ATARI_ENVS_PER_ACTOR} if run else {}
    return {**ATARI_DEFAULTS, "max_frames": ATARI_MAX_FRAMES, **launch}


def make_agent(config: ImpalaConfig, network: NetworkConfig, context: AgentContext) -> ImpalaAgent:
    decay_steps = 0
    if config.learning_rate_decay:
        if not context.max_frames:
            raise UsageError("--learning-rate-decay falls to 0 at --max-frames: set --max-frames")
        decay_steps = context.max_frames // (context.frame_skip * config.batch_size * config.unroll_length)
    return ImpalaAgent(config, network, context, decay_steps=decay_steps)


def make_trainer(agent: ImpalaAgent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: ImpalaConfig, seed: int) -> OnPolicyTrainer:
    del config, seed  # each batch is trained on as it comes
    return OnPolicyTrainer(agent, queue, metrics, device)
