"""QR-DQN's agent and replay trainer, as the registry builds them (TensorFlow): IQN's trainer."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.iqn.builder import make_trainer
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.qrdqn.agent import QRDQNAgent
from seedfleet.algorithms.qrdqn.config import QRDQNConfig

__all__ = ["make_agent", "make_trainer"]


def make_agent(config: QRDQNConfig, network: NetworkConfig, context: AgentContext) -> QRDQNAgent:
    return QRDQNAgent(config, network, context)
