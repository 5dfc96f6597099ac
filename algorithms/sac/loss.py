"""Soft actor-critic's equations (Haarnoja et al., 2018, "Soft Actor-Critic Algorithms and
Applications": twin critics, a tanh-squashed Gaussian actor, a temperature tuned to a
target entropy), each as one function on a batch of replayed sequences.

The actor. With u ~ N(mean(x), std(x)^2) and the env's bounds [low, high] per dimension,
centre c = (high + low) / 2 and half-range s = (high - low) / 2,

    a = c + s tanh(u).

The density of a follows by the change of variables, dimension by dimension
(da_d / du_d = s_d (1 - tanh(u_d)^2)):

    log pi(a|x) = sum_d [ log N(u_d; mean_d, std_d) - log s_d - log(1 - tanh(u_d)^2) ],

with log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which stays finite where
tanh(u) rounds to +-1 in float32 (SAC's reference code adds 1e-6 inside the log instead).

The targets, from a replayed sequence x_0, a_0, r_1, x_1, ..., r_n, x_n (row k holds r_k,
the reward of the step into x_k). Step k counts while x_1..x_k are all in x_0's episode
(alive_k: none of them a reset observation; a termination or truncation at x_j makes x_{j+1}
one); m = sum_k alive_k steps count, and with m = 0 (the step into a reset observation) the
sequence carries no loss. Then

    G = sum_{k=1..m} gamma^(k-1) r_k,   gamma_t = gamma^m, or 0 where x_m is terminal,
    y = G + gamma_t ( min(Q'_1, Q'_2)(x_m, a') - alpha log pi(a'|x_m) ),   a' ~ pi(.|x_m),

so a time-limit truncation bootstraps from the last real observation. n = 1 is SAC's own
one-step target, y = r_1 + gamma_t (...)(x_1). With n > 1 (n-step returns) the rewards of the
steps between come from the behaviour policy, uncorrected, and only the last state's entropy
enters, as in SAC's n-step variants (e.g. Acme's).

Q'_i the target critics. The losses, means over the batch (cut transitions weigh 0):

    critic       sum_i (Q_i(x, a) - y)^2
    actor        alpha log pi(a~|x) - min(Q_1, Q_2)(x, a~),   a~ ~ pi(.|x) reparameterised
    temperature  -alpha (log pi(a~|x) + H_target),  log pi held constant, H_target = -dim(A)

The actor's loss is taken against the critics before their step of the same update, or as
that step left them (`actor_after_critics`: CleanRL's, jaxrl's and stable-baselines3's order),
the temperature's on the same a~, and last the target critics move by Polyak averaging,
theta' <- tau theta + (1 - tau) theta'.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # the actor's log std, as SAC's reference implementations bound it
LOG_2PI = float(np.log(2.0 * np.pi))


def bounded_log_std(raw: tf.Tensor) -> tf.Tensor:
    """The actor head's raw output squashed into [LOG_STD_MIN, LOG_STD_MAX] by a tanh."""
    return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (tf.tanh(raw) + 1.0)


def log_one_minus_tanh_squared(u: tf.Tensor) -> tf.Tensor:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): exact, and finite for any u."""
    return 2.0 * (np.log(2.0) - u - tf.nn.softplus(-2.0 * u))


def squashed_sample(mean: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor, center: tf.Tensor,
                    half_range: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(a, log pi(a|x)) for u = mean + std * noise (noise ~ N(0, 1), so gradients reach mean
    and std: the reparameterisation), a = c + s tanh(u); [B, D] in, ([B, D], [B]) out."""
    u = mean + tf.exp(log_std) * noise
    gaussian = -0.5 * tf.square(noise) - log_std - 0.5 * LOG_2PI  # log N(u; mean, std), as (u - mean) / std = noise
    log_prob = tf.reduce_sum(gaussian - tf.math.log(half_range) - log_one_minus_tanh_squared(u), axis=-1)
    return center + half_range * tf.tanh(u), log_prob


def masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """sum(mask x) / N over the batch's N transitions, cut ones weighing 0: a fixed divisor, so
    the mean of equal shards' values is the whole batch's (algorithms/distribute.py)."""
    return tf.reduce_sum(mask * x) / tf.cast(tf.size(x), x.dtype)


def n_step_returns(rewards: tf.Tensor, first: tf.Tensor, terminated: tf.Tensor, discount: float
                   ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """(G, gamma_t, m, mask) of the module docstring from rows 1..n of the rewards and
    `first`, [B, n] each, and rows 0..n of `terminated`, [B, n + 1]; m is an int32 index of
    the row to bootstrap from, and mask = alive_1 (1.0 or 0.0)."""
    n = rewards.shape[1]
    alive = tf.math.cumprod(1.0 - tf.cast(first, rewards.dtype), axis=1)
    powers = tf.pow(tf.constant(discount, rewards.dtype), tf.range(n, dtype=rewards.dtype))
    returns = tf.reduce_sum(alive * powers * rewards, axis=1)
    last = tf.cast(tf.reduce_sum(alive, axis=1), tf.int32)
    ended = tf.cast(tf.gather(terminated, last, batch_dims=1), rewards.dtype)
    discounts = tf.pow(tf.constant(discount, rewards.dtype), tf.cast(last, rewards.dtype)) * (1.0 - ended)
    return returns, discounts, last, alive[:, 0]


def critic_targets(rewards: tf.Tensor, discounts: tf.Tensor, next_q1: tf.Tensor, next_q2: tf.Tensor,
                   next_log_prob: tf.Tensor, alpha: tf.Tensor) -> tf.Tensor:
    """y = G + gamma_t (min(Q'_1, Q'_2)(x_m, a') - alpha log pi(a'|x_m)), held constant."""
    soft_value = tf.minimum(next_q1, next_q2) - alpha * next_log_prob
    return tf.stop_gradient(rewards + discounts * soft_value)


def critic_loss(q1: tf.Tensor, q2: tf.Tensor, targets: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """sum_i mean((Q_i(x, a) - y)^2) over real transitions."""
    return masked_mean(tf.square(q1 - targets), mask) + masked_mean(tf.square(q2 - targets), mask)


def actor_loss(log_prob: tf.Tensor, q1: tf.Tensor, q2: tf.Tensor, alpha: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """mean(alpha log pi(a~|x) - min(Q_1, Q_2)(x, a~)); alpha held constant."""
    return masked_mean(tf.stop_gradient(alpha) * log_prob - tf.minimum(q1, q2), mask)


def temperature_loss(log_alpha: tf.Variable, log_prob: tf.Tensor, target_entropy: float,
                     mask: tf.Tensor) -> tf.Tensor:
    """mean(-alpha (log pi + H_target)), log pi held constant: alpha rises while the policy's
    entropy -log pi is below the target and falls while it is above."""
    return masked_mean(-tf.exp(log_alpha) * tf.stop_gradient(log_prob + target_entropy), mask)


def polyak_update(targets: list[tf.Variable], online: list[tf.Variable], tau: float) -> None:
    """theta' <- tau theta + (1 - tau) theta', variable by variable."""
    for target, source in zip(targets, online, strict=True):
        target.assign(tau * source + (1.0 - tau) * target)
