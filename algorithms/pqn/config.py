"""PQN's hyperparameters and the defaults it takes by env family (TensorFlow-free: the CLI reads them).

PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", 2024; code in
mttga/purejaxql and vwxyzjn/cleanrl's pqn_atari_envpool.py) is DQN without replay and without
a target network: many envs act epsilon-greedily, each batch of their unrolls gets Q(lambda)
targets from the Q values seen while acting, and is trained on in a few passes of minibatches
of single transitions, as PPO trains; layer normalisation in the network keeps the bootstrapped
targets from running away.
"""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.actions import DISCRETE
from seedfleet.settings import ANY_FAMILY, Presets, task_presets


@dataclass
class PQNConfig:
    discount: float = 0.99  # gamma
    q_lambda: float = 0.65  # lambda of the Q(lambda) targets (0: one-step Q-learning; 1: Monte Carlo)
    unroll_length: int = 32  # T: transitions per unroll (rows: T + 1, overlapping by one)
    batch_size: int = 64  # unrolls per learner step
    epochs: int = 2  # passes over each batch
    minibatches: int = 16  # each pass draws this many minibatches of single transitions, one step each
    optimizer: str = "radam"  # adam | radam | rmsprop (PQN's: RAdam)
    learning_rate: float = 2.5e-4  # the optimizer's step size
    optimizer_epsilon: float = 1e-8  # its epsilon (PyTorch's RAdam default)
    learning_rate_decay: bool = True  # the learning rate falls linearly to 0 at --max-frames
    learning_rate_decay_frames: int = 0  # ... or at this many frames instead (0: --max-frames)
    max_grad_norm: float = 10.0  # gradients are clipped to this global norm
    epsilon_start: float = 1.0  # the acting envs' exploration rate at the start
    epsilon_end: float = 0.01  # ... and once it has fallen, linearly, after exploration_frames
    exploration_frames: int = 2_000_000  # frames trained on while epsilon falls
    reward_clip: float = 1.0  # rewards are clipped to [-c, c] for training; 0 turns it off
    reward_scale: float = 1.0  # ... then multiplied by this
    life_loss_terminal: bool = False  # Atari: training ends the episode at a lost life; returns stay game scores


# Atari (ALE ids): purejaxql's pqn_atari.yaml and CleanRL's pqn_atari_envpool.py (Nature CNN with
# layer normalisation, Q(0.65), RAdam 2.5e-4, gradients clipped at 10, a lost life as terminal,
# rewards clipped to [-1, 1]) in our Atari geometry: 2 actors x 32 envs, unrolls of 32, so a batch
# of 2,048 transitions, 2 passes of 16 minibatches of 128 (purejaxql's minibatch and passes; one
# update per 64 transitions, as both references). Epsilon falls from 1 to 0.01 over the first 10% of
# the budget (both references), 2M of the 20M frames where the learning rate reaches 0.
PQN_ATARI = Presets(
    algorithm={"life_loss_terminal": True, "learning_rate_decay_frames": 20_000_000},
    network={"torso": "nature", "layer_norm": True},
    learner={"max_frames": 20_000_000, "queue_unrolls": 64, "sync_acting": True},
    launch={"envs_per_actor": 32},
)

# Other discrete envs (vector observations): purejaxql's pqn_cartpole.yaml (two layers of 256 with
# layer normalisation, lambda 0.95, Adam-family 1e-4 falling to 0, rewards x 0.1, 4 passes of 16
# minibatches; epsilon to 0.2 over 20% of the budget: 100,000 of its 500,000 steps).
PQN_VECTOR = Presets(
    algorithm={"q_lambda": 0.95, "learning_rate": 1e-4, "reward_scale": 0.1, "epochs": 4, "epsilon_end": 0.2,
               "exploration_frames": 100_000, "unroll_length": 64, "batch_size": 32},
    network={"mlp_sizes": (256, 256), "layer_norm": True},
    learner={"max_frames": 500_000, "queue_unrolls": 32},
)  # `seedfleet run`'s 2 actors x 16 envs: purejaxql's 32 envs

PQN_PRESETS = {("ale", DISCRETE): PQN_ATARI, (ANY_FAMILY, DISCRETE): PQN_VECTOR}  # (env family, kind of actions)


def pqn_presets(family: str, kind: str) -> Presets:
    """The Atari values on ALE, the vector values on any other family (discrete actions only)."""
    return task_presets(PQN_PRESETS, family, kind)
