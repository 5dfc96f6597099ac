"""QR-DQN's hyperparameters and the defaults it takes by env family (TensorFlow-free: the CLI reads them).

QR-DQN (Dabney, Rowland, Bellemare and Munos, "Distributional Reinforcement Learning with
Quantile Regression", AAAI 2018) learns, for each action, N quantiles of the return at the
fixed fractions tau_i = (2i + 1) / 2N, one linear output each. It is IQN (algorithms/iqn) with
the fractions fixed: the same n-step targets, replay, quantile Huber loss and acting. Its values
are Dopamine's Atari settings (google/dopamine `dopamine/jax/agents/quantile/configs/quantile.gin`),
the agent `bench/atari_references.py` could draw as "Quantile (JAX)": 200 quantiles, 3-step
targets, Adam 5e-5, 32 transitions trained every 4 env steps, a target copy every 8,000 env
steps, epsilon from 1 to 0.01 over 250,000 env steps once replay is warm. One departure: that
gin samples replay by priority (sqrt of each transition's loss); here replay is uniform, as in
the paper and in Dopamine's IQN.
"""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.actions import DISCRETE
from seedfleet.algorithms.impala.config import ATARI_BUDGET
from seedfleet.algorithms.iqn.config import REPLAY_VECTOR, QuantileReplayConfig
from seedfleet.settings import ANY_FAMILY, Presets, task_presets


@dataclass
class QRDQNConfig(QuantileReplayConfig):
    num_atoms: int = 200  # N: quantiles per action, at the fractions (2i + 1) / 2N


# Atari (ALE ids): Dopamine's network as well, the Nature CNN (32-64-64 convs, 512 units) with
# one linear output per action and quantile, in float32. Unlike IQN's, this head costs no more
# than DQN's, so the preset keeps Dopamine's torso.
QRDQN_ATARI = ATARI_BUDGET | Presets(network={"torso": "nature", "compute_dtype": "float32"})

QRDQN_VECTOR = REPLAY_VECTOR | Presets(algorithm={"num_atoms": 32})

QRDQN_PRESETS = {("ale", DISCRETE): QRDQN_ATARI, (ANY_FAMILY, DISCRETE): QRDQN_VECTOR}  # (env family, kind of actions)


def qrdqn_presets(family: str, kind: str) -> Presets:
    """Dopamine's values on ALE, the vector values on any other family (discrete actions only)."""
    return task_presets(QRDQN_PRESETS, family, kind)
