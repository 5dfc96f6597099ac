"""Idle microbenchmarks of the learner step's pieces before and after 8772ac6/9dd3d55, in one process,
interleaved: `python bench/results/throughput/learner-step/micro.py` from the repository root. The
old pieces are written out as 56407d8 has them. The figures in the log were taken with bare
tf.function; graph_function (no AutoGraph) traces the same graphs for these straight-line functions."""
import time

import numpy as np
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.algorithms.graph import graph_function
from seedfleet.algorithms.image_torsos import image_blocks
from seedfleet.algorithms.networks import stack_frames

T, B, K = 33, 4, 4
rng = np.random.default_rng(0)
frames = tf.constant(rng.integers(0, 256, (T, B, 84, 84), dtype=np.uint8))
first = tf.constant(rng.random((T, B)) < 0.05)
history = tf.constant(rng.integers(0, 256, (B, K - 1, 84, 84), dtype=np.uint8))


def stack_old(frames, first, history):
    """56407d8's stack_frames (grey frames): each older window masked, then stacked."""
    k = history.shape[1] + 1
    t_len = tf.shape(frames)[0]
    seq = tf.concat([tf.transpose(history, [1, 0, 2, 3]), frames], axis=0)
    first_padded = tf.concat([tf.zeros([k - 1, tf.shape(first)[1]], tf.bool), first], axis=0)
    valid = tf.ones_like(first)
    channels = [None] * k
    channels[k - 1] = frames
    for j in range(1, k):
        valid = tf.logical_and(valid, tf.logical_not(first_padded[k - j : k - j + t_len]))
        keep = tf.reshape(valid, tf.concat([tf.shape(valid), [1, 1]], axis=0))
        window = seq[k - 1 - j : k - 1 - j + t_len]
        channels[k - 1 - j] = tf.where(keep, window, tf.zeros_like(window))
    return tf.stack(channels, axis=2)


def blocks_old(x, s, rows, cols):
    """56407d8's image_blocks (grey frames): one transpose of single bytes."""
    x = x[..., None]
    k, c = x.shape[1], x.shape[4]
    n = tf.shape(x)[0]
    x = tf.reshape(x[:, :, :rows, :cols], [n, k, rows // s, s, cols // s, s, c])
    x = tf.transpose(x, [0, 2, 4, 3, 5, 1, 6])
    return tf.reshape(x, [n, rows // s, cols // s, s * s * k * c])


def adam_step(fused: bool):
    """Clip and Adam over the shallow torso's variables (6 actions), per-op or fused."""
    shapes = [(8, 8, 4, 16), (16,), (4, 4, 16, 32), (32,), (2592, 256), (256,), (256, 6), (6,), (256, 1), (1,)]
    variables = [tf.Variable(np.zeros(s, np.float32)) for s in shapes]
    grads = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
    opt = optim.Optimizer("adam", variables, 2.5e-4, 1e-5, 1000)
    opt._fused_adam = fused  # the two paths of one optimizer, for this comparison only
    step = graph_function(lambda g: opt.apply_clipped(g, 0.5))
    return lambda: step(grads)


assert np.array_equal(stack_old(frames, first, history).numpy(), stack_frames(frames, first, history)[0].numpy())
stacks = tf.reshape(stack_frames(frames, first, history)[0], [T * B, K, 84, 84])
cases = {
    "frame stacks, 4 unrolls x 33 (masks and stack)": graph_function(lambda: stack_old(frames, first, history)),
    "frame stacks, 4 unrolls x 33 (one gather)": graph_function(lambda: stack_frames(frames, first, history)[0]),
    "image blocks, 132 stacks (byte transpose)": graph_function(lambda: blocks_old(stacks, 4, 84, 84)),
    "image blocks, 132 stacks (int32 runs)": graph_function(lambda: image_blocks(stacks, 4, 84, 84)),
    "Adam + clip, shallow torso's variables (per-op)": adam_step(False),
    "Adam + clip, shallow torso's variables (fused)": adam_step(True),
}
for call in cases.values():
    call()
    call()
times = {name: [] for name in cases}
for _ in range(9):
    for name, call in cases.items():
        start = time.perf_counter()
        for _ in range(20):
            call()
        times[name].append((time.perf_counter() - start) / 20 * 1000)
for name, ms in times.items():
    print(f"| {name} | {sorted(ms)[4]:.3f} | {min(ms):.3f} |")
