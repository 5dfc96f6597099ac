"""IQN's hyperparameters and the defaults it takes by env family (TensorFlow-free: the CLI reads them).

IQN (Dabney, Ostrovski, Silver and Munos, "Implicit Quantile Networks for Distributional
Reinforcement Learning", ICML 2018) learns the quantile function of the return: the network
reads a state and a fraction tau in [0, 1] and gives, for each action, the tau-quantile of the
discounted return. Its values are Dopamine's Atari settings (google/dopamine
`dopamine/agents/implicit_quantile/configs/implicit_quantile.gin`), the agent whose curves
`bench/atari_references.py` draws as "IQN": n-step targets from a target network, uniform
replay of a million transitions, 32 transitions trained on every 4 env steps, epsilon falling
from 1 to 0.01 over 250,000 env steps once replay is warm.
"""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.actions import DISCRETE
from seedfleet.algorithms.impala.config import ATARI_BUDGET
from seedfleet.settings import ANY_FAMILY, Presets, task_presets


@dataclass
class QuantileReplayConfig:
    """What IQN and QR-DQN (algorithms/qrdqn) share: n-step quantile targets from a target
    network over uniform replay, the quantile Huber loss, epsilon-greedy acting."""

    discount: float = 0.99  # gamma
    n_step: int = 3  # rewards summed before the target bootstraps (Dopamine's update_horizon)
    batch_size: int = 32  # transitions per learner step
    learning_rate: float = 5e-5  # Adam step size (Dopamine's IQN; its Rainbow takes 6.25e-5)
    adam_epsilon: float = 3.125e-4  # Adam epsilon (Dopamine's IQN; its Rainbow takes 1.5e-4)
    max_grad_norm: float = 0.0  # gradients are clipped to this global norm (0: not clipped, as Dopamine)
    kappa: float = 1.0  # the Huber loss's threshold in the quantile regression loss
    replay_capacity: int = 1_000_000  # transitions kept in replay
    min_replay_size: int = 20_000  # transitions in replay before training starts
    replay_ratio: float = 8.0  # transitions trained on per env step (Dopamine: 32 every 4 steps)
    target_update_period: int = 2_000  # learner steps between target-network copies (8,000 env steps at ratio 8)
    unroll_length: int = 32  # transitions per stored sequence; consecutive ones share n_step rows
    epsilon_start: float = 1.0  # the acting envs' exploration rate until replay is warm
    epsilon_end: float = 0.01  # ... and once it has fallen, linearly, over exploration_steps
    exploration_steps: int = 250_000  # env steps (all training envs) over which epsilon falls
    reward_clip: float = 1.0  # rewards are clipped to [-c, c] for training; 0 turns it off
    life_loss_terminal: bool = False  # Atari: training ends the episode at a lost life; returns stay game scores
    checkpoint_replay: bool = False  # checkpoints hold the replay too (Atari: about 8.5 GB once full)


@dataclass
class IQNConfig(QuantileReplayConfig):
    num_tau_samples: int = 64  # N: fractions drawn for the trained quantiles of each transition
    num_tau_prime_samples: int = 64  # N': fractions drawn for the target's quantiles
    num_quantile_samples: int = 32  # K: fractions averaged into Q when acting and picking the target's action
    quantile_embedding: int = 64  # cosines cos(pi i tau), i = 0..n-1, embedding each fraction
    quantile_hidden: int = 0  # units of a ReLU layer after the product, run per fraction (Dopamine: 512); 0: none


# Atari (ALE ids): Dopamine's IQN (no lost life as terminal, rewards clipped to [-1, 1]) with the
# Atari budget and 2 actors x 32 envs (ATARI_BUDGET). Replay's warm-up, epsilon and the target
# copies count the env steps of all 64 envs, as Dopamine's count its one env's: the same per
# frame. The torso is the shallow IMPALA one, not Dopamine's Nature CNN, for its cost on CPUs
# (a learner step 26 ms against 46 ms on 2 AVX-512 cores), and it runs in float32: Q's action
# gaps are small beside bfloat16's rounding of the features, and XLA makes float32 as fast here.
IQN_ATARI = ATARI_BUDGET | Presets(network={"torso": "impala_shallow", "compute_dtype": "float32"})

# Other discrete envs (vector observations): small replay, quick warm-up, frequent target copies
# (QR-DQN's too).
REPLAY_VECTOR = Presets(
    algorithm={"learning_rate": 1e-3, "adam_epsilon": 1e-8, "max_grad_norm": 10.0, "replay_capacity": 50_000,
               "min_replay_size": 1_000, "target_update_period": 100, "exploration_steps": 10_000, "unroll_length": 16},
    network={"mlp_sizes": (128, 128)},
    learner={"max_frames": 200_000},
)
IQN_VECTOR = REPLAY_VECTOR | Presets(
    algorithm={"num_tau_samples": 16, "num_tau_prime_samples": 16, "num_quantile_samples": 16})

IQN_PRESETS = {("ale", DISCRETE): IQN_ATARI, (ANY_FAMILY, DISCRETE): IQN_VECTOR}  # (env family, kind of actions)


def iqn_presets(family: str, kind: str) -> Presets:
    """Dopamine's values on ALE, the vector values on any other family (discrete actions only)."""
    return task_presets(IQN_PRESETS, family, kind)
