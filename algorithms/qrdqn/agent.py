"""QR-DQN's agent: IQN's (algorithms/iqn/agent.py: replay windows, n-step targets, the quantile
Huber loss, the target network, epsilon-greedy acting) on QR-DQN's network, whose trained and
target quantiles both sit at the N fixed midpoints."""

from __future__ import annotations

from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.iqn.agent import IQNAgent
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.qrdqn.network import AtomNet


class QRDQNAgent(IQNAgent):
    HEAD_MINIMUMS = {"num_atoms": 1}

    def make_network(self, network: NetworkConfig, env: AgentContext) -> AtomNet:
        return AtomNet(network, env.obs_shape, env.actions.num_actions, self.config.num_atoms, env.seed,
                       env.obs_dtype)
