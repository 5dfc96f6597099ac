"""IMPALA's (and APPO's) agent and trainer, as the registry builds them (TensorFlow)."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.trainer import LearnerStepRecorder, OnPolicyTrainer, UnrollSource
from seedfleet.errors import UsageError
from seedfleet.stage_clock import StageClock


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
                 config: ImpalaConfig, seed: int, clock: StageClock) -> OnPolicyTrainer:
    del config, seed  # each batch is trained on as it comes
    return OnPolicyTrainer(agent, queue, metrics, device, clock)
