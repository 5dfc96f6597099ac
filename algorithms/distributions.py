"""The policy's action distributions, each read from one flat parameter vector per step.

The policy head outputs `params` [..., P]; unrolls keep the behaviour policy's params
beside each action, so the loss recomputes the behaviour log-probability exactly and can
measure any divergence between the behaviour policy mu and the learner's pi.

  Categorical (discrete actions, P = A): params are logits z,
      log pi(a) = z_a - logsumexp(z),   H = -sum_a pi(a) log pi(a),
      KL(p || q) = sum_a p(a) (log p(a) - log q(a)).
  DiagGaussian (Box actions of D dims, P = 2D): params are [mu, log sigma],
      log pi(a) = sum_i -(a_i - mu_i)^2 / (2 sigma_i^2) - log sigma_i - log(2 pi) / 2,
      H = sum_i log sigma_i + (1 + log(2 pi)) / 2,
      KL(p || q) = sum_i log(sigma_q,i / sigma_p,i) + (sigma_p,i^2 + (mu_p,i - mu_q,i)^2) / (2 sigma_q,i^2) - 1/2.

The Gaussian's sample is unbounded: the learner sends it as drawn, the actor clips it to the
env's bounds, and the unroll keeps the unclipped action, whose log-probability is the one the
ratios need (clipping happens in the env, after the policy's choice).
"""

from __future__ import annotations

import math
from typing import Protocol

import tensorflow as tf

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Distribution(Protocol):
    """One action distribution per leading index of `params`."""

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor: ...

    def entropy(self) -> tf.Tensor: ...

    def largest_entropy(self) -> float | None: ...

    def kl(self, other: Distribution) -> tf.Tensor: ...

    def sample(self) -> tf.Tensor: ...

    def mode(self) -> tf.Tensor: ...

    def diagnostics(self, mask: tf.Tensor, mean_entropy: tf.Tensor) -> dict[str, tf.Tensor]:
        """What this kind of policy shows beyond its entropy, over the steps where mask is 1."""
        ...


def _masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """The mean over every step where mask is 1 of x [..., D] (steps [T, B] or [N]), [D]."""
    x = tf.reshape(x, [-1, tf.shape(x)[-1]])
    mask = tf.reshape(tf.cast(mask, x.dtype), [-1, 1])
    return tf.reduce_sum(mask * x, axis=0) / tf.maximum(tf.reduce_sum(mask), 1.0)


class Categorical:
    """pi(a) = softmax(logits)_a over `num_actions` actions; actions are int32 indices."""

    def __init__(self, params: tf.Tensor):
        self.logits = tf.cast(params, tf.float32)

    @staticmethod
    def params_size(action_size: int) -> int:
        return action_size

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(actions, tf.int32), logits=self.logits)

    def probs(self) -> tf.Tensor:
        return tf.nn.softmax(self.logits)

    def entropy(self) -> tf.Tensor:
        return -tf.reduce_sum(self.probs() * tf.nn.log_softmax(self.logits), axis=-1)

    def largest_entropy(self) -> float | None:
        """log |A|, the entropy of the uniform policy."""
        return math.log(self.logits.shape[-1])

    def kl(self, other: Categorical) -> tf.Tensor:
        log_p, log_q = tf.nn.log_softmax(self.logits), tf.nn.log_softmax(other.logits)
        return tf.reduce_sum(tf.exp(log_p) * (log_p - log_q), axis=-1)

    def sample(self) -> tf.Tensor:
        flat = tf.reshape(self.logits, [-1, tf.shape(self.logits)[-1]])
        return tf.reshape(tf.random.categorical(flat, 1, dtype=tf.int32), tf.shape(self.logits)[:-1])

    def mode(self) -> tf.Tensor:
        return tf.argmax(self.logits, axis=-1, output_type=tf.int32)

    def diagnostics(self, mask: tf.Tensor, mean_entropy: tf.Tensor) -> dict[str, tf.Tensor]:
        """The state information I(state; action) over [T, B] steps, H(mean pi) - mean H(pi):
        0 for a policy that ignores its input, whatever its own entropy (a dead torso shows here first)."""
        mean_probs = _masked_mean(self.probs(), mask)
        return {"policy/state_information": -tf.reduce_sum(mean_probs * tf.math.log(mean_probs + 1e-12)) - mean_entropy}


class DiagGaussian:
    """A Gaussian with a diagonal covariance over D action dims; params = [mean, log_std]."""

    def __init__(self, params: tf.Tensor):
        params = tf.cast(params, tf.float32)
        self.mean, self.log_std = tf.split(params, 2, axis=-1)

    @staticmethod
    def params_size(action_size: int) -> int:
        return 2 * action_size

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        z = (tf.cast(actions, tf.float32) - self.mean) * tf.exp(-self.log_std)
        return tf.reduce_sum(-0.5 * tf.square(z) - self.log_std - HALF_LOG_2PI, axis=-1)

    def entropy(self) -> tf.Tensor:
        return tf.reduce_sum(self.log_std + 0.5 + HALF_LOG_2PI, axis=-1)

    def largest_entropy(self) -> float | None:
        """None: a Gaussian's entropy has no largest value."""
        return None

    def kl(self, other: DiagGaussian) -> tf.Tensor:
        variance_ratio = tf.exp(2.0 * (self.log_std - other.log_std))
        mean_term = tf.square((self.mean - other.mean) * tf.exp(-other.log_std))
        return tf.reduce_sum(other.log_std - self.log_std + 0.5 * (variance_ratio + mean_term) - 0.5, axis=-1)

    def sample(self) -> tf.Tensor:
        return self.mean + tf.exp(self.log_std) * tf.random.normal(tf.shape(self.mean))

    def mode(self) -> tf.Tensor:
        return self.mean

    def diagnostics(self, mask: tf.Tensor, mean_entropy: tf.Tensor) -> dict[str, tf.Tensor]:
        """The action std, averaged over dims and [T, B] steps. (The state information is a
        measure for discrete actions only.)"""
        return {"policy/action_std": tf.reduce_mean(_masked_mean(tf.exp(self.log_std), mask))}
