"""R2D2 (Kapturowski et al., 2019): recurrent replay distributed DQN.

This module holds the target math: value rescaling and n-step returns.
"""

from __future__ import annotations

import tensorflow as tf


def value_rescale(x, eps: float = 1e-3) -> tf.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x  (Pohlen et al., 2018).

    It squashes large returns so one network can fit games whose scores differ by
    orders of magnitude, without clipping rewards.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    return tf.sign(x) * (tf.sqrt(tf.abs(x) + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x, eps: float = 1e-3) -> tf.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), exactly.

    Solving y = sqrt(u + 1) - 1 + eps u for u = |x| >= 0 gives a quadratic in
    s = sqrt(u + 1): eps s^2 + s - (y + 1 + eps) = 0, whose positive root is the
    expression above; then u = s^2 - 1.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    s = (tf.sqrt(1.0 + 4.0 * eps * (tf.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return tf.sign(x) * (tf.square(s) - 1.0)


def n_step_returns(rewards, discounts, bootstrap_values, n: int) -> tf.Tensor:
    """n-step bootstrapped returns, time-major [T, B], truncated at the sequence end.

      G_t = sum_{k<m} (prod_{j<k} d_{t+j}) r_{t+k} + (prod_{j<m} d_{t+j}) V_{t+m-1},
      m = min(n, T - t),

    where d_t = gamma (1 - terminated_t) is the discount of step t and V_t the value of
    the state reached after step t. A termination inside the window zeroes every later
    reward and the bootstrap; near the end of the sequence the window shrinks and
    bootstraps from the last value available.
    """
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    discounts = tf.convert_to_tensor(discounts, tf.float32)
    bootstrap_values = tf.convert_to_tensor(bootstrap_values, tf.float32)
    t_len = rewards.shape[0]
    returns = tf.zeros_like(rewards)
    scale = tf.ones_like(rewards)
    for k in range(min(n, t_len)):
        # rows t with t + k < T take step t + k; the others have stopped already
        pad = [[0, k], [0, 0]]
        returns += scale * tf.pad(rewards[k:], pad)
        scale *= tf.pad(discounts[k:], pad, constant_values=1.0)
    last = tf.minimum(tf.range(t_len) + n - 1, t_len - 1)
    return returns + scale * tf.gather(bootstrap_values, last)
