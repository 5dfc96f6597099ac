"""IQN's agent and replay trainer (QR-DQN's trainer too), as the registry builds them (TensorFlow)."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.iqn.agent import IQNAgent
from seedfleet.algorithms.iqn.config import IQNConfig, QuantileReplayConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.replay_trainer import ReplaySettings, ReplayTrainer
from seedfleet.algorithms.trainer import LearnerStepRecorder, UnrollSource
from seedfleet.stage_clock import StageClock


def make_agent(config: IQNConfig, network: NetworkConfig, context: AgentContext) -> IQNAgent:
    return IQNAgent(config, network, context)


def make_trainer(agent: IQNAgent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: QuantileReplayConfig, seed: int, clock: StageClock) -> ReplayTrainer:
    return ReplayTrainer(agent, queue, metrics, device, replay_settings(config), seed, clock)


def replay_settings(config: QuantileReplayConfig) -> ReplaySettings:
    """Sequences in uniform replay, each bringing unroll_length - n_step + 1 new env steps; the
    replay ratio, counted in transitions, becomes sequences drawn (one window each) per sequence
    inserted, and training is owed only from the end of the warm-up."""
    new_steps = config.unroll_length - config.n_step + 1
    warm = -(-config.min_replay_size // new_steps)
    return ReplaySettings(capacity=max(config.replay_capacity // new_steps, 1), min_size=warm,
                          ratio=config.replay_ratio * new_steps, checkpoint=config.checkpoint_replay,
                          steps_per_item=new_steps, owed_from=warm, capacity_flag="--replay-capacity")
