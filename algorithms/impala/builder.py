"""IMPALA's (and APPO's) agent and trainer, as the registry builds them (TensorFlow)."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.optim import decay_learner_steps
from seedfleet.algorithms.trainer import LearnerStepRecorder, OnPolicyTrainer, UnrollSource
from seedfleet.stage_clock import StageClock


def make_agent(config: ImpalaConfig, network: NetworkConfig, context: AgentContext) -> ImpalaAgent:
    decay_steps = decay_learner_steps(config.learning_rate_decay, config.learning_rate_decay_frames,
                                      context.max_frames, context.frame_skip * config.batch_size * config.unroll_length)
    return ImpalaAgent(config, network, context, decay_steps=decay_steps)


def make_trainer(agent: ImpalaAgent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: ImpalaConfig, seed: int, clock: StageClock) -> OnPolicyTrainer:
    del config, seed  # each batch is trained on as it comes
    return OnPolicyTrainer(agent, queue, metrics, device, clock)
