"""Adam with global-norm gradient clipping, as a `tf.Module` so it checkpoints with the net."""

from __future__ import annotations

import tensorflow as tf


class Adam(tf.Module):
    """Adam (Kingma & Ba, 2015): m <- b1 m + (1-b1) g, v <- b2 v + (1-b2) g^2,
    w <- w - lr * m_hat / (sqrt(v_hat) + eps), with bias-corrected m_hat, v_hat."""

    def __init__(self, variables, learning_rate: float, beta1=0.9, beta2=0.999, epsilon=1e-8):
        super().__init__()
        self.variables_ = list(variables)
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables_]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables_]

    def apply(self, grads: list[tf.Tensor], max_grad_norm: float | None = None) -> tf.Tensor:
        """Applies one update; returns the gradients' global norm before clipping."""
        norm = tf.linalg.global_norm(grads)
        if max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, max_grad_norm, use_norm=norm)
        self.step.assign_add(1)
        t = tf.cast(self.step, tf.float32)
        lr = self.learning_rate * tf.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)
        for var, g, m, v in zip(self.variables_, grads, self.m, self.v, strict=True):
            m.assign(self.beta1 * m + (1.0 - self.beta1) * g)
            v.assign(self.beta2 * v + (1.0 - self.beta2) * tf.square(g))
            var.assign_sub(lr * m / (tf.sqrt(v) + self.epsilon))
        return norm
