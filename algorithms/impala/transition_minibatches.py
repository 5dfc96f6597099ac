"""Minibatches of single transitions drawn across all of a batch's unrolls (`shuffle_transitions`).

By default each pass cuts a batch into minibatches of whole unrolls: with 64 unrolls of 32 steps
in 16 minibatches, every gradient step sees 4 envs' 32 consecutive steps, strongly correlated
samples whose advantages are normalised among themselves. PPO's references shuffle single
transitions instead (CleanRL's ppo_atari.py draws each minibatch of 256 from all 8 envs x 128
steps; Andrychowicz et al. 2020, arXiv 2006.05990, section 3.5, compare both). V-trace needs whole
unrolls, so with this option the learner step first runs the network as the step begins over
every unroll (a minibatch of unrolls at a time) and keeps, for each transition t -> t+1:

  v_t  the V-trace target, from V_0 and rho_t = min(rho_bar, pi_0 / mu), as `fixed_targets`;
  V_0(x_t)  the value itself (the start of `value_clip`'s clip);
  A_t  = r_t + gamma_t v_{t+1} - V_0(x_t), APPO's advantage (v_T = V_0(x_T));
  the agent state before x_t (the frames its stack adds to x_t: `PolicyValueNet.row_states`),

so that each transition can then be trained alone: the network on x_t with that state gives what
step t of the unroll gives. Every pass then draws its minibatches from the B x T transitions at
random, and the loss is APPO's clipped surrogate, value loss and entropy on them (advantages
normalised over each minibatch, as CleanRL normalises them). Feed-forward networks only: an
LSTM's state before x_t would be that of the weights the step began with.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import (
    actor_critic_loss,
    clipped_surrogate_loss,
    masked_mean,
    masked_moments,
    normalized,
    one_step_advantages,
    policy_shift,
    transitions,
    value_and_advantage_vtrace,
)
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet
from seedfleet.errors import UsageError

Array = Any  # a NumPy array or a tf.Tensor


class Transitions(NamedTuple):
    """N single transitions t -> t+1, each row on its own, with the targets of its unroll."""

    observation: Array  # [N, *obs] x_t
    first: Array  # [N] x_t opens an episode
    state: dict[str, Array]  # the agent state before x_t, [N, ...]
    action: Array  # [N] a_t
    behaviour: Array  # [N, P] the acting policy mu's params at x_t
    policy_version: Array  # [N] the optimizer's update count when mu acted
    target: Array  # [N] v_t
    start_value: Array  # [N] V_0(x_t), the value as the learner step began (`value_clip`)
    advantage: Array  # [N] A_t, not normalised
    mask: Array  # [N] 1 for a real transition, 0 for one cut at an env's reset

    @property
    def size(self) -> int:
        return len(self.action)


def check_transition_minibatches(config: ImpalaConfig, network: NetworkConfig) -> None:
    """The settings single-transition minibatches need, each refused in one line."""
    if network.lstm_size:
        raise UsageError("--shuffle-transitions trains each transition alone: it needs a network without --lstm-size")
    if config.clip_ratio <= 0:
        raise UsageError("--shuffle-transitions trains PPO's clipped surrogate: it needs --clip-ratio above 0")
    if config.proximal_clip:
        raise UsageError("--shuffle-transitions clips against the actors' policy: drop --proximal-clip")


def unroll_targets(net: PolicyValueNet, config: ImpalaConfig, batch: Unroll) -> dict:
    """On a time-major batch of unrolls ([T+1, B, ...]), with the network as it is now: the
    targets v_t, advantages A_t, the real-transition mask and the state before each row, all
    [T, B, ...]."""
    params, values, _ = net(batch.observation, batch.first, batch.state)
    actions = batch.action[:-1]
    rewards, discounts, real = transitions(batch, config)
    start_logp = net.distribution(tf.cast(params[:-1], tf.float32)).log_prob(actions)
    behaviour_logp = net.distribution(batch.extras["policy"][:-1]).log_prob(actions)
    log_rhos = tf.where(real, start_logp - behaviour_logp, -np.inf)
    targets, behind_advantages = value_and_advantage_vtrace(config, log_rhos, discounts, rewards, values[:-1],
                                                            values[-1])
    states = net.row_states(batch.observation, batch.first, batch.state)
    return {
        "target": targets.vs,
        "start_value": values[:-1],
        "advantage": one_step_advantages(rewards, discounts, behind_advantages.vs, values[:-1], values[-1]),
        "mask": tf.cast(real, tf.float32),
        "state": {name: value[:-1] for name, value in states.items()},
    }


def flatten(batch: Unroll, targets: dict) -> Transitions:
    """A batch-major batch of unrolls ([B, T+1, ...]) and its batch-major targets ([B, T, ...])
    as B x T transitions, unroll by unroll."""

    def rows(value: np.ndarray) -> np.ndarray:
        value = np.asarray(value)
        return value.reshape(-1, *value.shape[2:])

    return Transitions(
        observation=rows(batch.observation[:, :-1]),
        first=rows(batch.first[:, :-1]),
        state={name: rows(value) for name, value in targets["state"].items()},
        action=rows(batch.action[:, :-1]),
        behaviour=rows(batch.extras["policy"][:, :-1]),
        policy_version=rows(batch.extras["policy_version"][:, :-1]),
        target=rows(targets["target"]),
        start_value=rows(targets["start_value"]),
        advantage=rows(targets["advantage"]),
        mask=rows(targets["mask"]),
    )


def transition_loss(net: PolicyValueNet, config: ImpalaConfig, minibatch: Transitions) -> tuple[tf.Tensor, dict]:
    """APPO's loss on single transitions: the clipped surrogate on pi / mu with the minibatch's
    advantages normalised over its real transitions, 0.5 (v_t - V(x_t))^2, and the entropy; on
    the same targets it equals `impala_loss` with `fixed_targets` over the same transitions."""
    params, values, _ = net(minibatch.observation[None], minibatch.first[None], minibatch.state)
    pi, values = net.distribution(params[0]), values[0]
    mask = tf.cast(minibatch.mask, tf.float32)
    log_ratio = pi.log_prob(minibatch.action) - net.distribution(minibatch.behaviour).log_prob(minibatch.action)
    advantages = tf.cast(minibatch.advantage, tf.float32)
    advantage_mean, advantage_variance = masked_moments(advantages, mask)
    if config.normalize_advantages:
        advantages = normalized(advantages, mask)
    pg_loss = clipped_surrogate_loss(log_ratio, advantages, mask, config.clip_ratio)
    return actor_critic_loss(config, pi, pg_loss, values, tf.cast(minibatch.target, tf.float32), mask, {
        "policy/mean_rho": masked_mean(tf.exp(tf.minimum(log_ratio, 10.0)), mask),
        **policy_shift(log_ratio, mask, config.clip_ratio, config.clip_rho_threshold),
        "advantage/mean": advantage_mean,
        "advantage/std": tf.sqrt(advantage_variance),
    }, tf.cast(minibatch.start_value, tf.float32), net.value_scale())
