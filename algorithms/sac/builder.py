"""SAC's agent and replay trainer, as the registry builds them (TensorFlow)."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.replay_trainer import ReplaySettings, ReplayTrainer
from seedfleet.algorithms.sac.agent import SACAgent
from seedfleet.algorithms.sac.config import SACConfig
from seedfleet.algorithms.trainer import LearnerStepRecorder, UnrollSource
from seedfleet.stage_clock import StageClock


def make_agent(config: SACConfig, network: NetworkConfig, context: AgentContext) -> SACAgent:
    return SACAgent(config, network, context)


def replay_settings(config: SACConfig) -> ReplaySettings:
    """Single transitions in uniform replay; `replay_ratio` updates of `batch_size` transitions
    per env step is replay_ratio x batch_size transitions trained per transition inserted.
    Training starts once `learning_starts` transitions are in (the random phase's), and is owed
    for the transitions after them only, as in the references."""
    start = max(config.learning_starts, config.batch_size)
    return ReplaySettings(config.buffer_size, start, config.replay_ratio * config.batch_size,
                          checkpoint=config.checkpoint_replay, owed_from=start, capacity_flag="--buffer-size")


def make_trainer(agent: SACAgent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: SACConfig, seed: int, clock: StageClock) -> ReplayTrainer:
    return ReplayTrainer(agent, queue, metrics, device, replay_settings(config), seed, clock)
