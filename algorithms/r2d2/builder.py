"""R2D2's agent and replay trainer, as the registry builds them (TensorFlow)."""

from __future__ import annotations

import dataclasses

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import is_image
from seedfleet.algorithms.r2d2.agent import R2D2Agent
from seedfleet.algorithms.r2d2.config import R2D2Config, ape_x_epsilons
from seedfleet.algorithms.replay_trainer import ReplaySettings, ReplayTrainer
from seedfleet.algorithms.trainer import LearnerStepRecorder, UnrollSource
from seedfleet.stage_clock import StageClock


def make_agent(config: R2D2Config, network: NetworkConfig, context: AgentContext) -> R2D2Agent:
    if not network.lstm_size:  # R2D2 is recurrent: 512 for Atari-sized frames, 128 for small boards
        shape = context.obs_shape
        size = (512 if min(shape[:2]) >= 36 else 128) if is_image(shape) else 64
        network = dataclasses.replace(network, lstm_size=size)
    agent = R2D2Agent(config, network, context)
    agent.set_epsilons(ape_x_epsilons(config.exploration_envs or context.launched_envs or context.max_envs))
    return agent


def make_trainer(agent: R2D2Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: R2D2Config, seed: int, clock: StageClock) -> ReplayTrainer:
    return ReplayTrainer(agent, queue, metrics, device, replay_settings(config), seed, clock)


def replay_settings(config: R2D2Config) -> ReplaySettings:
    """R2D2's sequences in prioritized replay: each brings unroll_length new env steps."""
    return ReplaySettings(config.replay_capacity, config.min_replay_size, config.replay_ratio,
                          config.priority_exponent, config.importance_sampling_exponent, config.checkpoint_replay,
                          config.unroll_length)
