"""The dense layer and its initialisations: orthogonal with a gain per layer (every network's
default), PyTorch's nn.Linear default (`fan_in_uniform`), which CleanRL's and stable-baselines3's
SAC start from (and, for convolutions too, CleanRL's DQN-family agents), or Dopamine's
(`variance_scaling`); and layer normalisation."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def orthogonal(shape: tuple[int, ...], gain: float, rng: np.random.Generator) -> np.ndarray:
    flat = (int(np.prod(shape[:-1])), shape[-1])
    a = rng.standard_normal(flat)
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    q = u if u.shape == flat else vt
    return (gain * q).reshape(shape).astype(np.float32)


def orthogonal_zero_bias(n_in: int, n_out: int, gain: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Weights orthogonal times `gain`, biases zero: every network's default."""
    return orthogonal((n_in, n_out), gain, rng), np.zeros(n_out, np.float32)


def fan_in_uniform(n_in: int, n_out: int, gain: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Weights and biases drawn from U(-1/sqrt(n_in), 1/sqrt(n_in)): torch.nn.Linear's reset_parameters
    (kaiming_uniform with a = sqrt(5) gives the same bound for the weights). The gain is not used."""
    del gain
    bound = 1.0 / np.sqrt(n_in)
    w = rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32)
    return w, rng.uniform(-bound, bound, n_out).astype(np.float32)


def variance_scaling(n_in: int, n_out: int, gain: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Weights from U(-sqrt(3 s / n_in), sqrt(3 s / n_in)) with s = 1/sqrt(3), biases zero: the
    variance_scaling(1/sqrt(3), "fan_in", "uniform") that Dopamine's IQN, QR-DQN and Rainbow
    networks start every layer with. The weights' std is sqrt(s / n_in), about 0.76 / sqrt(n_in),
    between PyTorch's default (0.58 / sqrt(n_in)) and He's (1.41 / sqrt(n_in)). The gain is not used."""
    del gain
    bound = np.sqrt(3.0 / np.sqrt(3.0) / n_in)
    return rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32), np.zeros(n_out, np.float32)


DENSE_INITS = {"orthogonal": orthogonal_zero_bias, "fan_in_uniform": fan_in_uniform,
               "variance_scaling": variance_scaling}  # --dense-init's choices


def conv_weights(shape: tuple[int, int, int, int], init: str,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A [k, k, c_in, c_out] kernel and its biases, as DENSE_INITS[init] starts a dense layer of
    fan-in k * k * c_in (orthogonal with gain sqrt(2), for the ReLU after it)."""
    w, b = DENSE_INITS[init](int(np.prod(shape[:-1])), shape[-1], np.sqrt(2), rng)
    return w.reshape(shape), b


class Linear(tf.Module):
    """x @ w + b, started by DENSE_INITS[init] (the callers check `init`: MLPTorso names the flag)."""

    def __init__(self, n_in: int, n_out: int, gain: float, rng: np.random.Generator, name=None,
                 init: str = "orthogonal"):
        super().__init__(name=name)
        w, b = DENSE_INITS[init](n_in, n_out, gain, rng)
        self.w = tf.Variable(w, name="w")
        self.b = tf.Variable(b, name="b")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """x [..., n_in] -> [..., n_out]; leading axes flattened into one matrix product (a batched
        product over [T, B, n_in] broadcasts w and its gradient sums T products)."""
        w, b = tf.cast(self.w, x.dtype), tf.cast(self.b, x.dtype)
        if len(x.shape) == 2:
            return tf.matmul(x, w) + b
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), w) + b
        return tf.reshape(y, tf.concat([tf.shape(x)[:-1], [w.shape[1]]], axis=0))


class LayerNorm(tf.Module):
    """Layer normalisation over the last axis (Ba, Kiros and Hinton, 2016):

        y = (x - mean(x)) / sqrt(var(x) + epsilon) * scale + offset,

    mean and (biased) variance over the features of each row; scale starts at 1, offset at 0,
    epsilon is PyTorch's nn.LayerNorm default. The normalised row has norm at most sqrt(n), so the
    output's norm is at most sqrt(n) max|scale| + ||offset|| whatever the input's size, which is
    why critics normalised this way cannot extrapolate without bound to inputs far outside their
    data."""

    EPSILON = 1e-5
    AXES = (-1,)  # the axes each mean and variance is taken over

    def __init__(self, size: int, name=None):
        super().__init__(name=name)
        self.scale = tf.Variable(np.ones(size, np.float32), name="scale")
        self.offset = tf.Variable(np.zeros(size, np.float32), name="offset")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        mean, variance = tf.nn.moments(x, axes=list(self.AXES), keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + self.EPSILON) * self.scale + self.offset


class MapNorm(LayerNorm):
    """Layer normalisation of a conv's whole output, [N, H, W, C] (Ba, Kiros and Hinton's layer
    norm of a conv layer): the mean and (biased) variance over each sample's H x W x C values, then
    a scale and an offset per channel. Unlike `LayerNorm` over each pixel's channels, it keeps how
    much stronger one pixel's features are than another's."""

    AXES = (1, 2, 3)


def copy_variables(sources: list[tf.Variable], targets: list[tf.Variable]) -> None:
    """Sets each target variable to its source, in order (target networks' hard copies)."""
    for target, source in zip(targets, sources, strict=True):
        target.assign(source)
