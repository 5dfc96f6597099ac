"""Value targets on one scale for every task: PopArt's adaptive normalisation of the value
(van Hasselt et al., 2016, "Learning values across many orders of magnitude", arXiv 1602.07714;
Hessel et al., 2019, "Multi-task deep reinforcement learning with PopArt", arXiv 1809.04474).

The value head's output n(x) is a standardised value; the value the targets and advantages
use is its denormalisation

    V(x) = mu + sigma * n(x),

with mu and sigma running estimates of the mean and spread of the value targets v. The value
loss is taken in the normalised units,

    0.5 * ((v - mu) / sigma - n(x))^2 = 0.5 * (v - V(x))^2 / sigma^2,

so its gradient has the same size on a game that pays a point every few hundred steps as on
one that pays every few, while the policy's normalised advantages already have one scale:
the value's pull on a shared torso no longer depends on how densely the game rewards.

The statistics move once per learner step, from the batch's targets, as exponential moving
averages of v and v^2 at rate beta, debiased as Adam's moments are (so the first batch sets
them exactly):

    m <- (1 - beta) m + beta mean(v),   q <- (1 - beta) q + beta mean(v^2),
    mu = m / (1 - (1 - beta)^k),   sigma = sqrt(q / (1 - (1 - beta)^k) - mu^2)   (k updates),

sigma held in [SIGMA_MIN, SIGMA_MAX]. "Preserving outputs precisely" (the Pop of PopArt):
as mu, sigma become mu', sigma', the head's last layer w, b is rescaled so that V(x) is the
same function before and after,

    w' = w sigma / sigma',   b' = (sigma b + mu - mu') / sigma'.
"""

from __future__ import annotations

import math

import tensorflow as tf

from seedfleet.algorithms.layers import Linear
from seedfleet.errors import UsageError

SIGMA_MIN = 1e-4  # PopArt's lower clip on the scale (van Hasselt et al.'s experiments)
SIGMA_MAX = 1e6  # ... and its upper one


class ValueStatistics(tf.Module):
    """mu and sigma of the value targets, and PopArt's output-preserving update of a value head."""

    def __init__(self, rate: float):
        """`rate`: beta, the weight of each learner step's batch in the moving averages."""
        super().__init__()
        if not 0.0 < rate <= 1.0:
            raise UsageError(f"--value-normalization-rate is a moving average's weight in (0, 1], got {rate}")
        self.rate = rate
        self.mean = tf.Variable(0.0, trainable=False, name="mean")  # mu
        self.std = tf.Variable(1.0, trainable=False, name="std")  # sigma
        self.first_moment = tf.Variable(0.0, trainable=False, name="first_moment")  # m, not debiased
        self.second_moment = tf.Variable(0.0, trainable=False, name="second_moment")  # q, not debiased
        self.updates = tf.Variable(0, trainable=False, dtype=tf.int64, name="updates")  # k

    def denormalize(self, normalized: tf.Tensor) -> tf.Tensor:
        """V = mu + sigma * n, in the dtype of n."""
        return tf.cast(self.mean, normalized.dtype) + tf.cast(self.std, normalized.dtype) * normalized

    def update(self, target_mean: float, target_mean_square: float, head: Linear) -> None:
        """Moves mu and sigma towards a batch's mean(v) and mean(v^2), rescaling `head` (the layer
        whose output is n) so that V(x) does not change. A non-finite batch moves nothing."""
        if not (math.isfinite(target_mean) and math.isfinite(target_mean_square)):
            return
        keep = 1.0 - self.rate
        first = keep * float(self.first_moment.numpy()) + self.rate * target_mean
        second = keep * float(self.second_moment.numpy()) + self.rate * target_mean_square
        updates = int(self.updates.numpy()) + 1
        debias = 1.0 - keep ** updates
        mean = first / debias
        std = min(max(math.sqrt(max(second / debias - mean * mean, 0.0)), SIGMA_MIN), SIGMA_MAX)
        old_mean, old_std = float(self.mean.numpy()), float(self.std.numpy())
        head.w.assign(head.w * (old_std / std))
        head.b.assign((old_std * head.b + old_mean - mean) / std)
        self.first_moment.assign(first)
        self.second_moment.assign(second)
        self.updates.assign(updates)
        self.mean.assign(mean)
        self.std.assign(std)
