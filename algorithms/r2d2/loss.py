"""R2D2 (Kapturowski et al., 2019): recurrent replay distributed DQN.

Sequences of burn_in + unroll_length + 1 rows come from replay with the recurrent state
stored at their start. The first burn_in rows only warm the LSTM up from that state
(no gradient); the loss covers the unroll_length transitions after them, with n-step
double-Q targets in value-rescaled space:

  y_t = h( sum_{k<n} (prod_{j<k} d_{t+j}) r_{t+k+1} + (prod_{j<n} d_{t+j}) h^-1(Q_target(x', argmax_a Q(x', a))) )

where x' is the state n steps on and the online net picks the action the target net
evaluates. Sequences are weighted by their importance weights, and their new
priority is eta * max_t |td_t| + (1 - eta) * mean_t |td_t|.
"""

from __future__ import annotations

import tensorflow as tf

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.networks import DuelingQNet
from seedfleet.algorithms.r2d2.config import R2D2Config


def value_rescale(x, eps: float = 1e-3) -> tf.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x  (Pohlen et al., 2018).

    It squashes large returns so one network can fit games whose scores differ by
    orders of magnitude, without clipping rewards.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    return tf.sign(x) * (tf.sqrt(tf.abs(x) + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x, eps: float = 1e-3) -> tf.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), exactly.

    Solving y = sqrt(u + 1) - 1 + eps u for u = |x| >= 0 gives a quadratic in
    s = sqrt(u + 1): eps s^2 + s - (y + 1 + eps) = 0, whose positive root is the
    expression above; then u = s^2 - 1.
    """
    x = tf.convert_to_tensor(x, tf.float32)
    s = (tf.sqrt(1.0 + 4.0 * eps * (tf.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return tf.sign(x) * (tf.square(s) - 1.0)


def n_step_returns(rewards, discounts, bootstrap_values, n: int) -> tf.Tensor:
    """n-step bootstrapped returns, time-major [T, B], truncated at the sequence end.

      G_t = sum_{k<m} (prod_{j<k} d_{t+j}) r_{t+k} + (prod_{j<m} d_{t+j}) V_{t+m-1},
      m = min(n, T - t),

    where d_t = gamma (1 - terminated_t) is the discount of step t and V_t the value of
    the state reached after step t. A termination inside the window zeroes every later
    reward and the bootstrap; near the end of the sequence the window shrinks and
    bootstraps from the last value available.
    """
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    discounts = tf.convert_to_tensor(discounts, tf.float32)
    bootstrap_values = tf.convert_to_tensor(bootstrap_values, tf.float32)
    t_len = rewards.shape[0]
    returns = tf.zeros_like(rewards)
    scale = tf.ones_like(rewards)
    for k in range(min(n, t_len)):
        # rows t with t + k < T take step t + k; the others have stopped already
        pad = [[0, k], [0, 0]]
        returns += scale * tf.pad(rewards[k:], pad)
        scale *= tf.pad(discounts[k:], pad, constant_values=1.0)
    last = tf.minimum(tf.range(t_len) + n - 1, t_len - 1)
    return returns + scale * tf.gather(bootstrap_values, last)


def q_of_actions(q: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    return tf.gather(q, tf.cast(actions, tf.int32), batch_dims=2)


def r2d2_loss(online: DuelingQNet, target: DuelingQNet, config: R2D2Config, batch: Unroll, weights):
    """Loss, new priorities [B] and metrics for a time-major batch of sequences.

    batch: rows of shape [L, B, ...] with L = burn_in + unroll_length + 1, and its state,
    the agent state before row 0 (the network's state plus "prev_action", the action
    taken before row 0).
    """
    state = dict(batch.state)
    prev_action = tf.concat([tf.cast(state.pop("prev_action"), tf.int32)[None],
                             tf.cast(batch.action[:-1], tf.int32)], axis=0)
    b = config.burn_in

    def run(net, start, stop, net_state):
        return net(batch.observation[start:stop], batch.first[start:stop],
                   prev_action[start:stop], batch.reward[start:stop], net_state)

    online_state, target_state = state, state
    if b > 0:
        _, online_state = run(online, 0, b, state)
        _, target_state = run(target, 0, b, state)
        online_state = tf.nest.map_structure(tf.stop_gradient, online_state)
    q, _ = run(online, b, None, online_state)  # [T+1, B, A]
    q_target, _ = run(target, b, None, target_state)
    q_target = tf.stop_gradient(q_target)

    actions = batch.action[b:]
    q_taken = q_of_actions(q[:-1], actions[:-1])
    best_next = tf.argmax(q[1:], axis=-1, output_type=tf.int32)
    td, mask = sequence_td(q_taken, q_of_actions(q_target[1:], best_next), batch, config)
    count = tf.maximum(tf.reduce_sum(mask, axis=0), 1.0)
    per_sequence = 0.5 * tf.reduce_sum(tf.square(td), axis=0) / count
    loss = tf.reduce_mean(tf.cast(weights, tf.float32) * per_sequence)
    metrics = {"loss/total": loss, "q/mean": tf.reduce_mean(q_taken), "td/mean_abs": tf.reduce_mean(tf.abs(td))}
    return loss, sequence_priorities(td, mask, config.priority_eta), metrics


def sequence_td(q_taken, next_q, batch: Unroll, config: R2D2Config) -> tuple[tf.Tensor, tf.Tensor]:
    """TD errors h(G_t) - Q(x_t, a_t) and the real-transition mask, [T, B], after burn-in.

    q_taken: Q(x_t, a_t) for the T transitions; next_q: the rescaled value of x_{t+1}.
    """
    b = config.burn_in
    bootstrap = inverse_value_rescale(next_q, config.value_rescale_eps)
    real = tf.logical_not(batch.first[b + 1 :])  # a transition into a reset is not real
    mask = tf.cast(real, tf.float32)
    discounts = config.discount * (1.0 - tf.cast(batch.terminated[b + 1 :], tf.float32)) * mask
    returns = n_step_returns(batch.reward[b + 1 :], discounts, bootstrap, config.n_step)
    targets = tf.stop_gradient(value_rescale(returns, config.value_rescale_eps))
    return (targets - q_taken) * mask, mask


def sequence_priorities(td: tf.Tensor, mask: tf.Tensor, eta: float) -> tf.Tensor:
    """eta * max_t |td_t| + (1 - eta) * mean_t |td_t| over each sequence's real transitions."""
    abs_td = tf.abs(td)
    count = tf.maximum(tf.reduce_sum(mask, axis=0), 1.0)
    return tf.stop_gradient(eta * tf.reduce_max(abs_td, axis=0) + (1 - eta) * tf.reduce_sum(abs_td, axis=0) / count)
