"""Image inputs standardised pixel by pixel, as Sample Factory's `normalize_input` and PPO-DNA's
observation normalisation have it on Atari: each pixel p of a frame (each channel of it, for
[H, W, C] images) has a running mean mu_p and variance s2_p of its value x c over every frame
trained on (c = 1 / 255 for bytes, 1 for float images), and the torso reads

    x'_p = clip((x_p c - mu_p) / sqrt(s2_p + EPSILON), -CLIP, CLIP),

the same statistics for every frame of a stack. A pixel that barely moves (the score's
background, a border) would otherwise carry about nothing; standardised, it speaks as loudly as
the player's sprite, and EPSILON (Sample Factory's 1e-5, a spread of 0.003 or 0.8 grey levels)
bounds how loudly a change of a pixel that never moved before can speak.

The statistics move once per learner step, from the batch's frames, before its gradient steps
(Sample Factory's learner updates them with each training batch and acts with them frozen):
the batch's mean and variance merged into those of the frames before it
(seedfleet/running_moments.py), kept in TensorFlow variables so that acting, checkpoints, eval
and exported models all read them with the network. Before the first
update mu = 0 and s2 = 1 - EPSILON, so x' is x c, clipped at CLIP: the torso as it is without them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.running_moments import merge_moments

EPSILON = 1e-5  # under the square root (Sample Factory's _NORM_EPS)
CLIP = 5.0  # standardised pixels are clipped to [-CLIP, CLIP] (Sample Factory's and PPO-DNA's)


class PixelStatistics(tf.Module):
    """Running mean and variance of every pixel of a frame of `frame_shape`, scaled by `scale` (c)."""

    def __init__(self, frame_shape: tuple[int, ...], scale: float = 1.0 / 255):
        super().__init__()
        self.frame_shape, self.scale = tuple(frame_shape), scale
        self.mean = tf.Variable(np.zeros(frame_shape, np.float32), trainable=False, name="mean")
        self.variance = tf.Variable(np.full(frame_shape, 1.0 - EPSILON, np.float32), trainable=False,
                                    name="variance")
        self.count = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="count")  # frames merged so far

    def normalize(self, frames: tf.Tensor) -> tf.Tensor:
        """x' of frames [..., *frame_shape], in float32."""
        scaled = tf.cast(frames, tf.float32) * self.scale
        return tf.clip_by_value((scaled - self.mean) * tf.math.rsqrt(self.variance + EPSILON), -CLIP, CLIP)

    def update(self, frames: np.ndarray) -> None:
        """Merges frames [..., *frame_shape] (every leading axis a sample) into the statistics."""
        samples = np.asarray(frames).reshape(-1, *self.frame_shape)
        n = len(samples)
        if not n:
            return
        batch_mean = samples.mean(axis=0, dtype=np.float64) * self.scale
        batch_variance = samples.var(axis=0, dtype=np.float64) * self.scale**2
        mean, variance, count = merge_moments(self.mean.numpy().astype(np.float64),
                                              self.variance.numpy().astype(np.float64), float(self.count.numpy()),
                                              batch_mean, batch_variance, n)
        self.mean.assign(mean.astype(np.float32))
        self.variance.assign(variance.astype(np.float32))
        self.count.assign(count)
