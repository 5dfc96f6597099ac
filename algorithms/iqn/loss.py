"""IQN's n-step targets and quantile regression loss.

Rows of a stored sequence (algorithms/agent.py): row t holds x_t, the reward and termination
flags of the transition into x_t, `first` where x_t opens an episode, and the action a_t. For the
transition t -> t+1, sampled from rows t .. t+n of one sequence:

  real: not first[t+1] (a transition into a reset is not real: it is masked out);
  the n-step return sums r_{t+k} = clip(reward[t+k+1]) for k = 0 .. m-1, discounted by gamma^k,
  where m <= n stops at the first row t+m that ends its episode: terminated (or a lost life
  with `life_loss_terminal`), truncated, or followed by an episode start;
  the bootstrap discount is gamma^m, or 0 if row t+m is terminal, and the target reads x_{t+m}.

The target's quantiles are T_j = R + d Z'_{tau'_j}(x_{t+m}, a*), j = 1..N', with a* the greedy
action of the target network's Q (the mean over K fractions), and the loss (Dabney et al.,
2018, eq. 3) on the trained quantiles theta_i = Z_{tau_i}(x_t, a_t), i = 1..N, is

  delta_ij = T_j - theta_i,
  rho_ij = |tau_i - 1{delta_ij < 0}| L_kappa(delta_ij) / kappa,
  L_kappa(d) = d^2 / 2 if |d| <= kappa else kappa (|d| - kappa / 2),
  loss = mean over transitions of  sum_i  mean_j  rho_ij.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.impala.loss import masked_mean


class NStepTargets(NamedTuple):
    """What each sampled transition's target needs, each [B]."""

    returns: np.ndarray  # sum_{k<m} gamma^k r_{t+k}
    discounts: np.ndarray  # gamma^m, or 0 where x_{t+m} is terminal
    bootstrap_rows: np.ndarray  # m: the row, after t, the target reads
    mask: np.ndarray  # 1 for real transitions, 0 for a transition into a reset


def n_step_targets(window: dict[str, np.ndarray], n: int, discount: float, reward_clip: float,
                   life_loss_terminal: bool) -> NStepTargets:
    """The n-step targets of transitions t -> t+1 from `window`'s rows t .. t+n, each field
    [B, n+1] (reward, terminated, truncated, life_lost, first), row 0 being x_t."""
    rewards = np.asarray(window["reward"], np.float32)
    if reward_clip > 0:
        rewards = np.clip(rewards, -reward_clip, reward_clip)
    terminal = np.asarray(window["terminated"], bool)
    if life_loss_terminal:
        terminal = terminal | np.asarray(window["life_lost"], bool)
    first = np.asarray(window["first"], bool)
    ends = terminal | np.asarray(window["truncated"], bool)
    ends[:, :-1] |= first[:, 1:]  # a row followed by an episode start ends its episode
    size = len(rewards)
    returns = np.zeros(size, np.float32)
    scale = np.ones(size, np.float32)  # gamma^k while the return runs, then frozen
    rows = np.zeros(size, np.int64)
    running = ~first[:, 1]
    for k in range(1, n + 1):
        returns += np.where(running, scale * rewards[:, k], 0.0).astype(np.float32)
        scale = np.where(running, scale * discount, scale).astype(np.float32)
        rows = np.where(running, k, rows)
        running = running & ~ends[:, k]
    bootstrap_terminal = terminal[np.arange(size), rows]
    discounts = np.where(bootstrap_terminal, 0.0, scale).astype(np.float32)
    return NStepTargets(returns, discounts, rows, (~first[:, 1]).astype(np.float32))


def quantile_huber_loss(quantiles: tf.Tensor, taus: tf.Tensor, targets: tf.Tensor, mask: tf.Tensor,
                        kappa: float) -> tuple[tf.Tensor, dict]:
    """The loss above for [B, N] trained quantiles at fractions [B, N] and [B, N'] target
    quantiles (held fixed), over the transitions where `mask` ([B]) is 1; and its metrics."""
    delta = tf.stop_gradient(targets)[:, None, :] - quantiles[:, :, None]  # [B, N, N']
    abs_delta = tf.abs(delta)
    huber = tf.where(abs_delta <= kappa, 0.5 * tf.square(delta), kappa * (abs_delta - 0.5 * kappa))
    weight = tf.abs(taus[:, :, None] - tf.cast(delta < 0, tf.float32))
    per_transition = tf.reduce_sum(tf.reduce_mean(weight * huber / kappa, axis=2), axis=1)
    loss = masked_mean(per_transition, mask)
    return loss, {"loss/total": loss, "q/mean": masked_mean(tf.reduce_mean(quantiles, axis=1), mask),
                  "q/target_mean": masked_mean(tf.reduce_mean(targets, axis=1), mask)}
