"""Torsos for images: the conv torsos (Nature, the IMPALA shallow one, MinAtar's), each conv
run on blocks of its input, and the near-free pool torso. Input: [N, k, H, W] or
[N, k, H, W, C] frame-major stacks (algorithms/networks.py stacks them)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.layers import LayerNorm, Linear, MapNorm, conv_weights
from seedfleet.algorithms.pixel_normalization import PixelStatistics
from seedfleet.errors import UsageError

PADDINGS = ("valid", "same")  # --conv-padding's choices


class Conv2D(tf.Module):
    """A convolution of stride s whose k x k kernel is m whole strides (k = m * s), run as
    a stride-1 convolution of m x m taps over its input cut into s x s blocks.

    VALID reads only whole windows: (n - k) // s + 1 outputs a side. SAME (TensorFlow's, flax's
    default, Dopamine's networks) gives ceil(n / s) outputs a side and pads the input with
    max((out - 1) * s + k - n, 0) zeros, the smaller half before: `pads`, which the caller puts
    around the input before cutting it into blocks.

    Block (u, v) of a feature map (`feature_blocks`) holds pixel (u * s + dy, v * s + dx) in
    its depth at (dy * s + dx) * C + c. Output (i, j) reads the k x k window at (i * s, j * s),
    which is exactly blocks (i..i+m-1, j..j+m-1); so with the kernel regrouped,

        w_blocks[a, b, (dy * s + dx) * C + c, o] = w[a * s + dy, b * s + dx, c, o],

    the stride-1 convolution of the blocks gives the same outputs. A block of a stack of F
    frames of C' channels each (`image_blocks`, c = f * C' + c') holds them at
    ((dy * F + f) * s + dx) * C' + c', and the kernel is regrouped to match. The blocks have
    s * s times the input channels, which is what TensorFlow's CPU kernels run well: with the
    Atari torso's 4 and 16 input channels the strided convolutions' gradients took most of a
    learner step (BENCHMARKS.md, "The Atari learner step on blocks")."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, in_size: tuple[int, int], rng, name=None,
                 init: str = "orthogonal", padding: str = "valid"):
        super().__init__(name=name)
        if kernel % stride:
            raise ValueError(f"a {kernel}x{kernel} kernel is not a whole number of strides of {stride}")
        if padding not in PADDINGS:
            raise UsageError(f"--conv-padding {padding!r}: choose from {', '.join(PADDINGS)}")
        w, b = conv_weights((kernel, kernel, c_in, c_out), init, rng)
        self.w = tf.Variable(w, name="w")
        self.b = tf.Variable(b, name="b")
        self.stride, self.taps = stride, kernel // stride  # s, m
        if padding == "same":
            self.out_size = tuple(-(-n // stride) for n in in_size)
            totals = [max((out - 1) * stride + kernel - n, 0) for out, n in zip(self.out_size, in_size, strict=True)]
        else:
            self.out_size = tuple((n - kernel) // stride + 1 for n in in_size)
            totals = [0, 0]
        self.pads = tuple((total // 2, total - total // 2) for total in totals)  # (before, after) for rows, columns
        self.reads = tuple((n - 1) * stride + kernel for n in self.out_size)  # rows and columns the conv reads

    def pad(self, x: tf.Tensor, row_axis: int) -> tf.Tensor:
        """`x` with this conv's zeros around its rows (axis `row_axis`) and the columns after them."""
        if not any(before or after for before, after in self.pads):
            return x
        spec = [[0, 0]] * len(x.shape)
        spec[row_axis], spec[row_axis + 1] = list(self.pads[0]), list(self.pads[1])
        return tf.pad(x, spec)

    def on_blocks(self, blocks: tf.Tensor, input_scale: float = 1.0, frames: int = 0) -> tf.Tensor:
        """[N, rows / s, cols / s, s * s * C] blocks -> [N, out_h, out_w, C_out], of the blocks
        times `input_scale`: the kernel is scaled instead, a few thousand numbers against the
        input's millions (conv(x * a, w) = conv(x, a * w)). `frames`: the blocks are
        `image_blocks` of a stack of that many frames (0: `feature_blocks` of a feature map)."""
        _, _, c, o = self.w.shape
        s, m = self.stride, self.taps
        if frames:  # kernel rows (a, dy), columns (b, dx), channels (f, c') -> (a, b, dy, f, dx, c')
            w = tf.transpose(tf.reshape(self.w, [m, s, m, s, frames, c // frames, o]), [0, 2, 1, 4, 3, 5, 6])
        else:
            w = tf.transpose(tf.reshape(self.w, [m, s, m, s, c, o]), [0, 2, 1, 3, 4, 5])
        w = tf.reshape(w, [m, m, s * s * c, o])
        if input_scale != 1.0:
            w = w * input_scale
        return tf.nn.conv2d(blocks, tf.cast(w, blocks.dtype), 1, "VALID") + tf.cast(self.b, blocks.dtype)


CONV_NORMS = {"pixel": LayerNorm, "map": MapNorm}  # --conv-norm: what --layer-norm normalises a conv's output over


class ConvTorso(tf.Module):
    """Nature DQN torso (Mnih et al., 2015), the IMPALA paper's shallow torso, or MinAtar's
    (Young & Tian, 2019: one 3x3 conv of 16 channels, 128 hidden units) for small images.
    `dense_units` sets the width of the dense layer after the convs in place of the kind's own.

    Input: [N, k, H, W] or [N, k, H, W, C] frame-major stacks of k frames; uint8 is
    scaled to [0, 1] here so frames travel as bytes, other dtypes (bool planes, floats)
    are taken as they are. Stacks are built frame-major because that only moves whole
    contiguous frames; one transpose here cuts them into the first conv's blocks (interleaving
    bytes in any earlier op measured several times slower). Every conv runs on blocks of its
    input (`Conv2D`): each kernel of these torsos is whole strides.

    With `layer_norm` (PQN's network, Gallici et al. 2024) every layer's output is normalised
    before its ReLU: a conv's over its channels at each pixel (as purejaxql's flax LayerNorm
    over the last axis), the dense layer's over its units; in float32 whatever `dtype` is.
    With `conv_norm` "map" a conv's output is normalised over all its values instead (`MapNorm`).
    With `feature_norm` only the dense layer's output is (the penultimate normalisation of
    Bjorck, Gomes and Weinberger, 2022, "Is High Variance Unavoidable in RL?", proposed there
    against runs that fall far behind the others); the convs stay plain.
    """

    SPECS = {
        "nature": (((32, 8, 4), (64, 4, 2), (64, 3, 1)), 512),
        "nature_half": (((16, 8, 4), (32, 4, 2), (32, 3, 1)), 256),  # Nature's layers, half the width
        "impala_shallow": (((16, 8, 4), (32, 4, 2)), 256),
        "minatar": (((16, 3, 1),), 128),
    }

    def __init__(self, kind: str, image_shape: tuple[int, int, int], rng, dtype: tf.DType = tf.float32,
                 scale: float = 1.0 / 255, layer_norm: bool = False, init: str = "orthogonal",
                 padding: str = "valid", feature_norm: bool = False, conv_norm: str = "pixel", dense_units: int = 0,
                 pixel_statistics: PixelStatistics | None = None):
        """`pixel_statistics`: each pixel standardised by them (in float32) in place of `scale`."""
        super().__init__()
        self.pixel_statistics = pixel_statistics
        self.dtype, self.scale = dtype, 1.0 if pixel_statistics is not None else scale
        convs, hidden = self.SPECS[kind]
        if dense_units < 0:
            raise UsageError(f"--dense-units {dense_units}: give a positive width, or 0 for the {kind} "
                             f"torso's {hidden}")
        hidden = dense_units or hidden
        h, w, c = image_shape
        self.convs = []
        for c_out, k, s in convs:
            if min(h, w) < k:
                raise UsageError(f"images of {image_shape[:2]} are too small for the {kind} torso")
            self.convs.append(Conv2D(c, c_out, k, s, (h, w), rng, init=init, padding=padding))
            (h, w), c = self.convs[-1].out_size, c_out
        self.fc = Linear(h * w * c, hidden, np.sqrt(2), rng, init=init)
        self.out_size = hidden
        # None, not an empty list, without them: checkpoints of torsos without them keep their layout
        if conv_norm not in CONV_NORMS:
            raise UsageError(f"--conv-norm {conv_norm!r}: choose from {', '.join(CONV_NORMS)}")
        norm = CONV_NORMS[conv_norm]
        self.norms = [norm(c_out) for c_out, _, _ in convs] + [LayerNorm(hidden)] if layer_norm else None
        self.feature_norm = LayerNorm(hidden) if feature_norm and not layer_norm else None

    def _activation(self, x: tf.Tensor, layer: int) -> tf.Tensor:
        """ReLU of layer `layer`'s output, after its layer normalisation if the torso has them."""
        norm = self.norms[layer] if self.norms else self.feature_norm if layer == len(self.convs) else None
        if norm is not None:
            x = tf.cast(norm(tf.cast(x, tf.float32)), x.dtype)
        return tf.nn.relu(x)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        first, *rest = self.convs
        frames = x.shape[1]
        if self.pixel_statistics is not None:
            x = self.pixel_statistics.normalize(x)
        x = first.pad(x, row_axis=2)  # frame-major stacks: [N, k, H, W(, C)]
        x = tf.cast(image_blocks(x, first.stride, *first.reads), self.dtype)  # bytes are exact in bfloat16
        x = self._activation(first.on_blocks(x, self.scale, frames=frames), 0)
        for layer, conv in enumerate(rest, start=1):
            x = self._activation(conv.on_blocks(feature_blocks(conv.pad(x, row_axis=1), conv.stride, *conv.reads)),
                                 layer)
        return tf.cast(self._activation(self.fc(tf.reshape(x, [tf.shape(x)[0], -1])), len(self.convs)), tf.float32)


def feature_blocks(x: tf.Tensor, s: int, rows: int, cols: int) -> tf.Tensor:
    """[N, H, W, C] -> [N, rows / s, cols / s, s * s * C]: the first `rows` x `cols` cut into
    s x s blocks, as `image_blocks` cuts frames."""
    if (rows, cols) != tuple(x.shape[1:3]):  # a crop that keeps everything still costs its gradient a copy
        x = x[:, :rows, :cols]
    return tf.nn.space_to_depth(x, s) if s > 1 else x


def image_blocks(x: tf.Tensor, s: int, rows: int, cols: int) -> tf.Tensor:
    """[N, F, H, W] or [N, F, H, W, C] frame-major stacks -> [N, rows/s, cols/s, s * F * s * C]:
    the first `rows` x `cols` pixels cut into s x s blocks, each block's depth ordered (dy,
    frame, dx, channel), ((dy * F + f) * s + dx) * C + c (`Conv2D.on_blocks` with `frames`).

    In that order each run of s * C values of one block row of one frame stays whole, so the
    move is one transpose of runs, not of single values: for bytes, each 4-byte run moves as one
    int32 (a 4 x 4 grey block row), a quarter of the elements: 0.82 ms against 2.11 for the
    blocks of 4 unrolls of 33 Atari stacks (BENCHMARKS.md, "The learner step's small ops")."""
    if len(x.shape) == 4:
        x = x[..., None]
    frames, run = x.shape[1], s * x.shape[4]
    n = tf.shape(x)[0]
    if (rows, cols) != tuple(x.shape[2:4]):
        x = x[:, :, :rows, :cols]
    x = tf.reshape(x, [n, frames, rows // s, s, cols // s, run])
    packed = x.dtype == tf.uint8 and run % 4 == 0
    if packed:
        x = tf.bitcast(tf.reshape(x, [n, frames, rows // s, s, cols // s, run // 4, 4]), tf.int32)
    x = tf.transpose(x, [0, 2, 4, 3, 1, 5])  # N, rows/s, cols/s, dy, frame, run
    if packed:
        x = tf.bitcast(x, tf.uint8)
    return tf.reshape(x, [n, rows // s, cols // s, s * frames * run])


def channels_last(x: tf.Tensor) -> tf.Tensor:
    """[N, k, H, W] or [N, k, H, W, C] frame-major stacks -> [N, H, W, k * C] (the pool torso's layout)."""
    if len(x.shape) == 5:
        x = tf.transpose(x, [0, 2, 3, 1, 4])
        return tf.reshape(x, tf.concat([tf.shape(x)[:3], [x.shape[3] * x.shape[4]]], axis=0))
    return tf.transpose(x, [0, 2, 3, 1])


class PoolTorso(tf.Module):
    """A torso that costs next to nothing: the image stack average-pooled to at most 7 x 7
    cells per channel, then one linear layer of 16 units (about 3,000 multiply-adds for an
    84x84x4 stack, against some 20 million in the Nature torso). It learns only what such
    coarse cells show; it is there to run the learner's whole path (stacking, per-env state,
    unrolls, training) with a model whose cost does not hide that path's own (bench.load)."""

    CELLS, HIDDEN = 7, 16

    def __init__(self, image_shape: tuple[int, int, int], rng, scale: float = 1.0 / 255):
        super().__init__()
        h, w, c = image_shape
        self.window = (max(h // self.CELLS, 1), max(w // self.CELLS, 1))
        self.scale = scale
        self.fc = Linear((h // self.window[0]) * (w // self.window[1]) * c, self.HIDDEN, np.sqrt(2), rng)
        self.out_size = self.HIDDEN

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(channels_last(x), tf.float32) * self.scale
        x = tf.nn.avg_pool2d(x, self.window, self.window, "VALID")
        return tf.nn.relu(self.fc(tf.reshape(x, [tf.shape(x)[0], -1])))
