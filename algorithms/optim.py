"""Keras optimizers with a linear learning-rate decay and global-norm gradient clipping.

Keras' optimizers work on `tf.Variable`s and checkpoint with `tf.train.Checkpoint`, so
every agent uses them rather than an update rule of its own.

RMSProp here is Keras' (and TensorFlow 1's, as IMPALA used it): v <- rho v + (1 - rho) g^2,
w <- w - lr g / sqrt(v + eps), epsilon *inside* the square root, so IMPALA's eps = 0.01
bounds the step at lr * |g| / 0.1. Adam's epsilon is outside: w <- w - lr m_hat / (sqrt(v_hat) + eps).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from seedfleet.errors import UsageError

OPTIMIZERS = ("adam", "rmsprop")


def learning_rate_schedule(learning_rate: float, decay_steps: int):
    """`learning_rate`, falling linearly to 0 over `decay_steps` learner steps (0: constant)."""
    if decay_steps <= 0:
        return learning_rate
    return keras.optimizers.schedules.PolynomialDecay(learning_rate, decay_steps, end_learning_rate=0.0, power=1.0)


def make_optimizer(kind: str, learning_rate: float, epsilon: float, decay_steps: int = 0,
                   rmsprop_decay: float = 0.99) -> keras.optimizers.Optimizer:
    """Adam or RMSProp (no momentum) with the schedule above."""
    rate = learning_rate_schedule(learning_rate, decay_steps)
    if kind == "adam":
        return keras.optimizers.Adam(rate, epsilon=epsilon)
    if kind == "rmsprop":
        return keras.optimizers.RMSprop(rate, rho=rmsprop_decay, epsilon=epsilon)
    raise UsageError(f"unknown optimizer {kind!r}; choose from {', '.join(OPTIMIZERS)}")


def build(optimizer: keras.optimizers.Optimizer, variables: list[tf.Variable]) -> keras.optimizers.Optimizer:
    """Creates the optimizer's slots now, so a checkpoint restores into them before the first step."""
    optimizer.build(variables)
    return optimizer


def apply_clipped(optimizer: keras.optimizers.Optimizer, grads: list[tf.Tensor], variables: list[tf.Variable],
                  max_grad_norm: float | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """One update with the gradients clipped to `max_grad_norm` in global norm, made only
    if they are finite (a NaN or Inf loss leaves the variables, the optimizer's state and
    its step count as they were). Returns (their norm before clipping, whether applied)."""
    norm = tf.linalg.global_norm(grads)

    def update() -> tf.Tensor:
        clipped = tf.clip_by_global_norm(grads, max_grad_norm, use_norm=norm)[0] if max_grad_norm else grads
        optimizer.apply_gradients(zip(clipped, variables, strict=True))
        return tf.constant(True)

    return norm, tf.cond(tf.math.is_finite(norm), update, lambda: tf.constant(False))


def current_learning_rate(optimizer: keras.optimizers.Optimizer) -> tf.Tensor:
    """The step size the next update uses (after the schedule)."""
    rate = optimizer.learning_rate
    return tf.convert_to_tensor(rate, tf.float32)
