"""The dense layer and the orthogonal initialisation every network here uses."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def orthogonal(shape: tuple[int, ...], gain: float, rng: np.random.Generator) -> np.ndarray:
    flat = (int(np.prod(shape[:-1])), shape[-1])
    a = rng.standard_normal(flat)
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    q = u if u.shape == flat else vt
    return (gain * q).reshape(shape).astype(np.float32)


class Linear(tf.Module):
    def __init__(self, n_in: int, n_out: int, gain: float, rng: np.random.Generator, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(orthogonal((n_in, n_out), gain, rng), name="w")
        self.b = tf.Variable(tf.zeros([n_out]), name="b")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.matmul(x, tf.cast(self.w, x.dtype)) + tf.cast(self.b, x.dtype)
