"""Idle microbenchmarks: the old and new input pipeline pieces and Adam, one process, interleaved."""
import time, numpy as np, tensorflow as tf
from seedfleet.algorithms.networks import stack_frames
from seedfleet.algorithms.image_torsos import image_blocks
from seedfleet.algorithms import optim
T, B, k = 33, 4, 4
rng = np.random.default_rng(0)
frames = tf.constant(rng.integers(0, 256, (T, B, 84, 84), dtype=np.uint8))
first = tf.constant(rng.random((T, B)) < 0.05)
hist = tf.constant(rng.integers(0, 256, (B, k - 1, 84, 84), dtype=np.uint8))
def stack_old(frames, first, history):  # 56407d8's stack_frames
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
def blocks_old(x, s, rows, cols):  # 56407d8's image_blocks, grey frames
    x = x[..., None]
    k, c = x.shape[1], x.shape[4]
    n = tf.shape(x)[0]
    x = tf.reshape(x[:, :, :rows, :cols], [n, k, rows // s, s, cols // s, s, c])
    x = tf.transpose(x, [0, 2, 4, 3, 5, 1, 6])
    return tf.reshape(x, [n, rows // s, cols // s, s * s * k * c])
assert np.array_equal(stack_old(frames, first, hist).numpy(), stack_frames(frames, first, hist)[0].numpy())
xs = tf.reshape(stack_frames(frames, first, hist)[0], [T * B, k, 84, 84])
shapes = [(8, 8, 4, 16), (16,), (4, 4, 16, 32), (32,), (2592, 256), (256,), (256, 6), (6,), (256, 1), (1,)]
grads = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
def adam(fused):
    vs = [tf.Variable(np.zeros(s, np.float32)) for s in shapes]
    o = optim.Optimizer("adam", vs, 2.5e-4, 1e-5, 1000)
    o._fused_adam = fused
    return tf.function(lambda g: o.apply_clipped(g, 0.5), autograph=False)
cases = {
    "frame stacks, 4 unrolls x 33 (masks and stack)": tf.function(lambda: stack_old(frames, first, hist)),
    "frame stacks, 4 unrolls x 33 (one gather)": tf.function(lambda: stack_frames(frames, first, hist)[0]),
    "image blocks, 132 stacks (byte transpose)": tf.function(lambda: blocks_old(xs, 4, 84, 84)),
    "image blocks, 132 stacks (int32 runs)": tf.function(lambda: image_blocks(xs, 4, 84, 84)),
    "Adam + clip, shallow torso's variables (per-op)": (lambda f: lambda: f(grads))(adam(False)),
    "Adam + clip, shallow torso's variables (fused)": (lambda f: lambda: f(grads))(adam(True)),
}
for f in cases.values(): f(); f()
res = {n: [] for n in cases}
for r in range(9):
    for n, f in cases.items():
        t = time.perf_counter()
        for _ in range(20): f()
        res[n].append((time.perf_counter() - t) / 20 * 1000)
for n, v in res.items(): print(f"| {n} | {sorted(v)[4]:.3f} | {min(v):.3f} |")
