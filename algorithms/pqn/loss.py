"""PQN's targets and loss.

Rows of an unroll (algorithms/agent.py): row t holds x_t, the reward and termination flags of the
transition into x_t, `first` where x_t opens an episode, the action a_t and, kept from acting,
V_t = max_a Q(x_t, a) of the network that acted. For the transition t -> t+1 (t < T):

  r_t   reward[t+1], clipped to [-c, c], times the reward scale;
  real_t = not first[t+1] (a transition into a reset is not real: its target and loss are masked);
  d_t   = gamma (1 - terminal[t+1]) real_t, terminal: terminated, or a lost life with
          `life_loss_terminal`; a truncation keeps gamma, so the target bootstraps.

The Q(lambda) target (Peng's, as PQN's, without cutting traces at exploratory actions) is

  G_t = r_t + d_t [ (1 - lambda_{t+1}) V_{t+1} + lambda_{t+1} G_{t+1} ],
  lambda_{t+1} = lambda real_{t+1} for t + 1 < T, and lambda_T = 0,

so G_{T-1} = r + d V_T bootstraps from the unroll's last row, and where transition t+1 is not
real (x_{t+1} ends a truncated episode) G_t bootstraps from V_{t+1} alone. lambda = 0 gives
one-step Q-learning's r_t + d_t V_{t+1}; lambda = 1 the discounted return to the unroll's end.
The targets use the acting network's values, so they stay fixed through every pass over the
batch, as in CleanRL's and purejaxql's PQN. The loss is mean (G_t - Q(x_t, a_t))^2 over the real
transitions of a minibatch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.impala.loss import explained_variance, masked_mean
from seedfleet.algorithms.pqn.config import PQNConfig

Array = Any


def q_lambda_targets(batch, config: PQNConfig) -> tuple[np.ndarray, np.ndarray]:
    """The Q(lambda) targets G_t and the real-transition mask, each [B, T] float32, for a batch-major
    batch of unrolls ([B, T+1, ...] rows, `extras["value"]` V_t)."""
    rewards = np.asarray(batch.reward[:, 1:], np.float32)
    if config.reward_clip > 0:
        rewards = np.clip(rewards, -config.reward_clip, config.reward_clip)
    rewards = rewards * config.reward_scale
    real = ~np.asarray(batch.first[:, 1:], bool)
    terminal = np.asarray(batch.terminated[:, 1:], bool)
    if config.life_loss_terminal:
        terminal = terminal | np.asarray(batch.life_lost[:, 1:], bool)
    discounts = config.discount * (~terminal & real)
    values = np.asarray(batch.extras["value"], np.float32)
    steps = rewards.shape[1]
    targets = np.empty_like(rewards)
    following = values[:, steps]  # G_T stands for V_T (lambda_T = 0)
    for t in reversed(range(steps)):
        trace = config.q_lambda * real[:, t + 1] if t + 1 < steps else 0.0
        following = rewards[:, t] + discounts[:, t] * ((1 - trace) * values[:, t + 1] + trace * following)
        targets[:, t] = following
    return targets, real.astype(np.float32)


def q_of_actions(q: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """Q(x, a) of [N, A] values at [N] actions."""
    return tf.gather(q, tf.cast(actions, tf.int32), batch_dims=1)


def pqn_loss(q: tf.Tensor, actions: Array, targets: Array, mask: Array) -> tuple[tf.Tensor, dict]:
    """mean (G_t - Q(x_t, a_t))^2 over real transitions of [N, A] values, and its metrics: the
    mean Q(x_t, a_t), and how much of the targets' variance Q(x_t, a_t) explains."""
    q_taken = q_of_actions(q, actions)
    targets, mask = tf.cast(targets, tf.float32), tf.cast(mask, tf.float32)
    loss = masked_mean(tf.square(targets - q_taken), mask)
    return loss, {"loss/total": loss, "q/mean": masked_mean(q_taken, mask),
                  "value/explained_variance": explained_variance(targets, q_taken, mask)}
