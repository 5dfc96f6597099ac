"""Adam, RAdam and RMSProp with a linear learning-rate decay and global-norm gradient clipping.

Plain TensorFlow, so that no process of ours imports Keras (server/native_logs.py keeps
TensorFlow's own eager import of it out, a quarter of TensorFlow's import time). The checkpoint
layout is Keras 3's, so the checkpoints of the Keras optimizers used before restore:
`_iterations`, `_learning_rate` (a constant rate only) and
`_variables` = [iterations, learning rate if constant, slots of variable 0, of variable 1, ...].
RAdam's and RMSProp's updates are Keras 3's op for op. Adam's runs as TensorFlow's fused kernel
(`ResourceApplyAdam`: the same three lines below in one pass over each variable, where a dozen
element-wise ops each made their own; on the Atari torso's 660,000-weight dense layer that was
most of a gradient step's update), except on mirrored variables, where the update is computed
once and written to every copy so that the copies stay equal. The kernel takes 1 - b1 in float32
(0.100000024 against 0.1 rounded), so its steps differ from Keras's in the last bits.

Adam (Kingma & Ba 2015, Algorithm 1, with the bias corrections folded into the step size), at
update t = iterations + 1:

    m <- m + (1 - b1) (g - m)            v <- v + (1 - b2) (g^2 - v)
    alpha_t = lr sqrt(1 - b2^t) / (1 - b1^t)
    w <- w - alpha_t m / (sqrt(v) + eps)

so eps sits outside the square root and is not bias-corrected (the paper's epsilon-hat).

Adam-Rel (Ellis et al. 2024, arXiv 2412.17113, Algorithm 1) counts t from each new objective, here
each learner step's batch (`start_objective`), and keeps m and v: t = 1, 2, ... within the step.
With m and v already near their steady values, the step is alpha_t m / sqrt(v) where
sqrt(1 - b2^t) / (1 - b1^t) is 0.32 at t = 1, 0.15 at t = 10 and 0.25 at t = 64 (plain Adam's is 1
after its first thousands of updates): smaller steps, with the learning rate to match. What it
buys is a bound: when a new objective's gradient g jumps far above sqrt(v), each Adam-Rel step
is at most about lr per weight (at t = 1, m_1 / (1 - b1) = g + 9 m_0 over
sqrt(v_1 / (1 - b2)) = sqrt(g^2 + 999 v_0)), where plain Adam's n-th step after such a jump is
lr (1 - b1^n) / sqrt(1 - b2^n) per weight: 3.2 lr at n = 1 and 6.5 lr at n = 10.

RAdam (Liu et al. 2020, Algorithm 2; PyTorch's optim.RAdam, which PQN trains with) is Adam
whose adaptive step is scaled by a rectification r_t that makes up for the variance of v in
the first updates, and which takes plain momentum steps while that variance is undefined:

    rho_inf = 2 / (1 - b2) - 1        rho_t = rho_inf - 2 t b2^t / (1 - b2^t)
    rho_t > 5:  r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
                w <- w - lr r_t sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)
    else:       w <- w - lr m / (1 - b1^t)

With b2 = 0.999 the first 5 updates are momentum steps, and r_t grows to 0.22 by update 100,
0.65 by update 1,000 and 0.92 by update 3,000: a warm-up of the step size with no schedule of its own.

RMSProp (TensorFlow 1's, as IMPALA used it), no momentum:

    v <- rho v + (1 - rho) g^2           w <- w - lr g / sqrt(v + eps)

with eps *inside* the square root, so IMPALA's eps = 0.01 bounds the step at lr |g| / 0.1.

The learning rate falls linearly from `learning_rate` at update 0 to 0 at update
`decay_steps` and stays there: lr_t = lr (1 - min(t, D) / D).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from seedfleet.errors import UsageError

OPTIMIZERS = ("adam", "radam", "rmsprop")
ADAM_BETA_1 = 0.9  # Adam's first-moment decay (the paper's and Keras' default)
ADAM_BETA_2 = 0.999  # Adam's second-moment decay


class Optimizer(tf.Module):
    """Adam, RAdam or RMSProp over a fixed list of variables, its slots created now (so a checkpoint
    restores into them before the first step). Under a `tf.distribute` strategy, create it in
    the strategy's scope and apply it in cross-replica context: each update is computed once
    and written to every device's copy."""

    def __init__(self, kind: str, variables: Sequence[tf.Variable], learning_rate: float, epsilon: float,
                 decay_steps: int = 0, rmsprop_decay: float = 0.99, relative_steps: bool = False):
        super().__init__(name=kind)
        if kind not in OPTIMIZERS:
            raise UsageError(f"unknown optimizer {kind!r}; choose from {', '.join(OPTIMIZERS)}")
        if relative_steps and kind != "adam":
            raise UsageError(f"relative steps (Adam-Rel) count Adam's bias corrections; {kind} has none to count")
        self.kind = kind
        self.epsilon = epsilon
        self.rho = rmsprop_decay
        self.initial_learning_rate = learning_rate
        self.decay_steps = decay_steps
        self._trainable_variables = list(variables)
        self._iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iteration")
        self._variables = [self._iterations]
        if decay_steps <= 0:
            self._learning_rate = tf.Variable(learning_rate, dtype=tf.float32, trainable=False, name="learning_rate")
            self._variables.append(self._learning_rate)
        names = ("velocity",) if kind == "rmsprop" else ("momentum", "velocity")
        self._slots = [[tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"{v.name.split(':')[0]}_{n}")
                        for n in names] for v in self._trainable_variables]
        self._variables.extend(slot for slots in self._slots for slot in slots)
        # Adam-Rel's t - 1, set to 0 by each new objective (checkpointed, though each learner step sets it afresh)
        self._relative_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="relative_step") \
            if relative_steps else None
        self._fused_adam = kind == "adam" and not any(
            isinstance(v, tf.distribute.DistributedValues) for v in self._trainable_variables)

    @property
    def iterations(self) -> tf.Variable:
        """Updates applied so far."""
        return self._iterations

    @property
    def variables(self) -> list[tf.Variable]:
        """The optimizer's own state, in checkpoint order."""
        return list(self._variables)

    def start_objective(self) -> None:
        """A new objective begins (a learner step's new batch): Adam-Rel counts t from 1 again."""
        if self._relative_step is not None:
            self._relative_step.assign(0)

    def learning_rate(self) -> tf.Tensor:
        """The step size the next update uses (after the schedule)."""
        if self.decay_steps <= 0:
            return tf.convert_to_tensor(self._learning_rate)
        decay = tf.constant(float(self.decay_steps))
        done = tf.minimum(tf.cast(self._iterations, tf.float32), decay) / decay
        return tf.constant(self.initial_learning_rate, tf.float32) * (1 - done)

    def apply_clipped(self, grads: Sequence[tf.Tensor], max_grad_norm: float | None = None
                      ) -> tuple[tf.Tensor, tf.Tensor]:
        """One update with the gradients clipped to `max_grad_norm` in global norm, made only
        if they are finite (a NaN or Inf loss leaves the variables, the optimizer's state and
        its step count as they were). Returns (their norm before clipping, whether applied)."""
        norm = tf.linalg.global_norm(grads)

        def update() -> tf.Tensor:
            clipped = tf.clip_by_global_norm(grads, max_grad_norm, use_norm=norm)[0] if max_grad_norm else grads
            self._apply(clipped)
            return tf.constant(True)

        return norm, tf.cond(tf.math.is_finite(norm), update, lambda: tf.constant(False))

    def _apply(self, grads: Sequence[tf.Tensor]) -> None:
        rate = self.learning_rate()
        if self.kind == "adam":  # the bias corrections of update t, once for every variable
            counted = self._iterations if self._relative_step is None else self._relative_step
            step = tf.cast(counted + 1, tf.float32)
            beta_1_power = tf.pow(tf.constant(ADAM_BETA_1), step)
            beta_2_power = tf.pow(tf.constant(ADAM_BETA_2), step)
            if self._fused_adam:
                self._fused_adam_steps(grads, rate, beta_1_power, beta_2_power)
                return
            rule, scale = self._adam, rate * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        elif self.kind == "radam":
            rule, scale = self._radam, self._radam_scales(rate)
        else:
            rule, scale = self._rmsprop, rate
        for grad, variable, slots in zip(grads, self._trainable_variables, self._slots, strict=True):
            rule(variable, grad, scale, *slots)  # mirrored: one value, written to every copy
        self._count_update()

    def _count_update(self) -> None:
        self._iterations.assign_add(1)
        if self._relative_step is not None:
            self._relative_step.assign_add(1)

    def _fused_adam_steps(self, grads: Sequence[tf.Tensor], rate: tf.Tensor, beta_1_power: tf.Tensor,
                          beta_2_power: tf.Tensor) -> None:
        """Adam's update of every variable, each in one fused kernel (alpha_t from the powers b^t)."""
        beta_1, beta_2 = tf.constant(ADAM_BETA_1), tf.constant(ADAM_BETA_2)
        epsilon = tf.constant(self.epsilon, tf.float32)
        for grad, variable, (m, v) in zip(grads, self._trainable_variables, self._slots, strict=True):
            tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=m.handle, v=v.handle, beta1_power=beta_1_power,
                                         beta2_power=beta_2_power, lr=rate, beta1=beta_1, beta2=beta_2,
                                         epsilon=epsilon, grad=grad)
        self._count_update()

    def _radam_scales(self, rate: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """RAdam's step sizes of update t: (that of m / (sqrt(v) + eps), that of m alone), one of them 0."""
        # in float64: rho_t is a small difference of numbers near rho_inf (1,999) in the first updates
        step = tf.cast(self._iterations + 1, tf.float64)
        beta_1_power = tf.pow(tf.constant(ADAM_BETA_1, tf.float64), step)
        beta_2_power = tf.pow(tf.constant(ADAM_BETA_2, tf.float64), step)
        rho_inf = 2 / (1 - ADAM_BETA_2) - 1
        rho = rho_inf - 2 * step * beta_2_power / (1 - beta_2_power)
        rectified = rho > 5
        safe_rho = tf.maximum(rho, 5.0)
        r = tf.sqrt((safe_rho - 4) * (safe_rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe_rho))
        adaptive = tf.cast(r * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power), tf.float32) * rate
        plain = tf.cast(1 / (1 - beta_1_power), tf.float32) * rate
        return tf.where(rectified, adaptive, 0.0), tf.where(rectified, 0.0, plain)

    @staticmethod
    def _moments(grad: tf.Tensor, m: tf.Variable, v: tf.Variable) -> None:
        """Adam's (and RAdam's) running first and second moments of the gradient."""
        m.assign_add((grad - m) * (1 - ADAM_BETA_1))
        v.assign_add((tf.square(grad) - v) * (1 - ADAM_BETA_2))

    def _adam(self, variable: tf.Variable, grad: tf.Tensor, alpha: tf.Tensor, m: tf.Variable, v: tf.Variable) -> None:
        self._moments(grad, m, v)
        variable.assign_sub((m * alpha) / (tf.sqrt(v) + self.epsilon))

    def _radam(self, variable: tf.Variable, grad: tf.Tensor, scales: tuple[tf.Tensor, tf.Tensor], m: tf.Variable,
               v: tf.Variable) -> None:
        """RAdam's update with the pair of step sizes `_radam_scales` gives (one of them 0)."""
        adaptive, plain = scales
        self._moments(grad, m, v)
        variable.assign_sub((m * adaptive) / (tf.sqrt(v) + self.epsilon) + m * plain)

    def _rmsprop(self, variable: tf.Variable, grad: tf.Tensor, rate: tf.Tensor, v: tf.Variable) -> None:
        v.assign(self.rho * v + (1 - self.rho) * tf.square(grad))
        variable.assign_sub((rate * grad) / tf.sqrt(v + self.epsilon))


def decay_learner_steps(decay: bool, decay_frames: int, max_frames: int, frames_per_step: int) -> int:
    """Learner steps over which the learning rate falls to 0 (0: it stays constant): to
    `decay_frames`, or to `max_frames` without them, at `frames_per_step` frames per learner step."""
    if not decay:
        return 0
    horizon = decay_frames or max_frames
    if not horizon:
        raise UsageError("--learning-rate-decay falls to 0 at --max-frames: set --max-frames "
                         "(or --learning-rate-decay-frames)")
    return horizon // frames_per_step
