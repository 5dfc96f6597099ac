"""Adam, RAdam and RMSProp (algorithms/optim.py) against plain NumPy loops of their equations."""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.errors import UsageError

GRADS = [np.array([[0.5, -1.0], [2.0, 0.1]]), np.array([[-0.3, 0.7], [0.25, -0.6]]),
         np.array([[1.5, 0.2], [-0.4, -2.0]])]


def numpy_adam(w, grads, lr, decay_steps, eps, b1=0.9, b2=0.999):
    """Kingma & Ba (2015), Algorithm 1, with eps outside the square root of the raw v:
    w -= lr_t sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        rate = lr * (1 - min(t - 1, decay_steps) / decay_steps) if decay_steps else lr
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - rate * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    return w


def numpy_rmsprop(w, grads, lr, decay_steps, eps, rho):
    """v = rho v + (1 - rho) g^2; w -= lr_t g / sqrt(v + eps)."""
    v = np.zeros_like(w)
    for t, g in enumerate(grads):
        rate = lr * (1 - min(t, decay_steps) / decay_steps) if decay_steps else lr
        v = rho * v + (1 - rho) * g * g
        w = w - rate * g / np.sqrt(v + eps)
    return w


def numpy_radam(w, grads, lr, decay_steps, eps, b1=0.9, b2=0.999):
    """Liu et al. (2020), Algorithm 2: momentum steps while rho_t <= 5, then Adam's step times
    the rectification r_t (eps outside the square root, as PyTorch's RAdam)."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, start=1):
        rate = lr * (1 - min(t - 1, decay_steps) / decay_steps) if decay_steps else lr
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho > 5:
            r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            w = w - rate * r * m_hat * np.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            w = w - rate * m_hat
    return w


@pytest.mark.parametrize("decay_steps", [0, 6])
def test_radam_takes_momentum_steps_then_rectified_adam_steps(decay_steps):
    """Eight updates: the first five are plain momentum steps (rho_t <= 5), the rest rectified."""
    grads = [np.random.default_rng(t).normal(size=(2, 2)) for t in range(8)]
    start = np.array([[1.0, -2.0], [0.5, 3.0]])
    variable = tf.Variable(start, dtype=tf.float32)
    opt = optim.Optimizer("radam", [variable], learning_rate=0.1, epsilon=0.01, decay_steps=decay_steps)
    for t, g in enumerate(grads, start=1):
        opt.apply_clipped([tf.constant(g, tf.float32)])
        np.testing.assert_allclose(variable.numpy(), numpy_radam(start, grads[:t], 0.1, decay_steps, 0.01),
                                   rtol=1e-5, atol=1e-6, err_msg=f"update {t}")
    assert not np.allclose(numpy_radam(start, grads, 0.1, decay_steps, 0.01),
                           numpy_adam(start, grads, 0.1, decay_steps, 0.01))


@pytest.mark.parametrize("kind,decay_steps", [("adam", 0), ("adam", 2), ("rmsprop", 0), ("rmsprop", 4)])
def test_updates_follow_the_equations_and_the_rate_falls_linearly_to_zero(kind, decay_steps):
    start = np.array([[1.0, -2.0], [0.5, 3.0]])
    variable = tf.Variable(start, dtype=tf.float32)
    opt = optim.Optimizer(kind, [variable], learning_rate=0.1, epsilon=0.01, decay_steps=decay_steps,
                          rmsprop_decay=0.9)
    for g in GRADS:
        norm, applied = opt.apply_clipped([tf.constant(g, tf.float32)])
        assert bool(applied) and float(norm) == pytest.approx(np.linalg.norm(g), rel=1e-6)
    expected = (numpy_adam(start, GRADS, 0.1, decay_steps, 0.01) if kind == "adam"
                else numpy_rmsprop(start, GRADS, 0.1, decay_steps, 0.01, 0.9))
    np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert int(opt.iterations) == 3
    assert float(opt.learning_rate()) == pytest.approx(0.1 * max(0.0, 1 - 3 / decay_steps) if decay_steps else 0.1)
    slots = len(opt.variables) - 1 - (0 if decay_steps else 1)  # less the step count and a constant rate
    assert slots == (2 if kind == "adam" else 1)


def test_clipping_scales_to_the_global_norm_and_a_non_finite_gradient_changes_nothing():
    variable = tf.Variable([0.0, 0.0])
    opt = optim.Optimizer("rmsprop", [variable], learning_rate=1.0, epsilon=0.0, rmsprop_decay=0.0)
    norm, applied = opt.apply_clipped([tf.constant([3.0, 4.0])], max_grad_norm=1.0)
    assert float(norm) == pytest.approx(5.0) and bool(applied)
    # rho 0, eps 0: the step is g / |g| per element, whatever the clip's scale
    np.testing.assert_allclose(variable.numpy(), [-1.0, -1.0], rtol=1e-6)
    before = [v.numpy().copy() for v in opt.variables]
    _, applied = opt.apply_clipped([tf.constant([np.nan, 1.0])])
    assert not bool(applied) and np.array_equal(variable.numpy(), [-1.0, -1.0])
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(before, opt.variables, strict=True))


def test_an_unknown_optimizer_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown optimizer 'sgd'; choose from adam, radam, rmsprop"):
        optim.Optimizer("sgd", [tf.Variable(1.0)], 0.1, 1e-8)



def numpy_adam_rel(w, objectives, lr, eps, b1=0.9, b2=0.999):
    """Ellis et al. (2024), Algorithm 1: Adam (eps as in numpy_adam) whose t restarts at 1 with
    each objective's first update, while m and v carry over from the objective before."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for grads in objectives:
        for t, g in enumerate(grads, start=1):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            w = w - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    return w


@pytest.mark.parametrize("mirrored", [False, True])
def test_adam_rel_counts_t_from_each_objective_and_keeps_the_moments(mirrored):
    """Three objectives of 3, 2 and 4 updates (mirrored: the unfused update, written to every copy)."""
    rng = np.random.default_rng(7)
    objectives = [[rng.normal(size=(2, 2)) * scale for _ in range(n)] for n, scale in ((3, 1.0), (2, 5.0), (4, 0.2))]
    start = np.array([[1.0, -2.0], [0.5, 3.0]])
    scope = tf.distribute.MirroredStrategy(["/cpu:0"]).scope() if mirrored else contextlib.nullcontext()
    with scope:
        variable = tf.Variable(start, dtype=tf.float32)
        opt = optim.Optimizer("adam", [variable], learning_rate=0.1, epsilon=0.01, relative_steps=True)
    for n, grads in enumerate(objectives, start=1):
        opt.start_objective()
        for g in grads:
            opt.apply_clipped([tf.constant(g, tf.float32)])
        np.testing.assert_allclose(variable.numpy(), numpy_adam_rel(start, objectives[:n], 0.1, 0.01),
                                   rtol=1e-5, atol=1e-6, err_msg=f"objective {n}")
    flat = [g for grads in objectives for g in grads]
    assert not np.allclose(variable.numpy(), numpy_adam(start, flat, 0.1, 0, 0.01), atol=1e-3)
    assert int(opt.iterations.numpy()) == 9
    assert len(opt.variables) == 1 + 1 + 2  # Keras's layout holds plain Adam's state


def test_relative_steps_are_adam_s_alone():
    with pytest.raises(UsageError, match="relative steps \\(Adam-Rel\\) count Adam's bias corrections"):
        optim.Optimizer("rmsprop", [tf.Variable(1.0)], 0.1, 1e-8, relative_steps=True)
