"""PPO-DNA's distillation phase (Aitchison and Sweetser, NeurIPS 2022, arXiv 2206.10027).

With a value torso of its own (`--no-shared-torso`) the policy's torso learns nothing from
the value loss: the clipped surrogate alone shapes its features. On a shared torso the value
loss shapes them too, and moves the policy as it does, which the surrogate's clip does not
hold back. Distillation keeps the first and gives back the second: after a learner step's
passes, `distill_epochs` more passes over the same batch train an auxiliary value head on the
policy's torso towards the value torso's values, while a KL term holds the policy where the
passes left it:

    L_distill = 0.5 * mean_t (V_aux(x_t) - V(x_t))^2 + beta * mean_t KL(pi_old(.|x_t) || pi(.|x_t))

V(x_t) and pi_old(.|x_t) are the network's value and policy on each observation as the
distillation begins, held for all its passes (targets, not functions of the weights being
trained). Only the policy's side moves: its torso, its policy head and the auxiliary head
(`PolicyValueNet.policy_variables`), under an optimizer of their own, as the reference keeps
one per phase; the value torso gets no gradient. Nothing else reads the auxiliary head:
acting, targets and losses use the value torso's value.

Each unroll's T + 1 rows overlap the next unroll's by one, so the loss reads rows 0..T-1 and
every observation counts once.
"""

from __future__ import annotations

import tensorflow as tf

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.networks import PolicyValueNet

OLD_POLICY = "distill_policy"  # the batch's extras: pi_old's params [T+1, B, P] (time-major in the loss)
VALUE_TARGET = "distill_value"  # ... and V(x_t) [T+1, B]


def distillation_loss(net: PolicyValueNet, beta: float, batch: Unroll) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """L_distill on a time-major minibatch whose extras hold `OLD_POLICY` and `VALUE_TARGET`;
    returns (loss, metrics): the value term, the KL term, and the auxiliary head's explained
    variance of its targets."""
    params, aux_values = net.policy_side(batch.observation, batch.first, batch.state)
    targets = tf.cast(batch.extras[VALUE_TARGET][:-1], tf.float32)
    value_loss = 0.5 * tf.reduce_mean(tf.square(aux_values[:-1] - targets))
    old = net.distribution(tf.cast(batch.extras[OLD_POLICY][:-1], tf.float32))
    kl = tf.reduce_mean(old.kl(net.distribution(params[:-1])))
    variance = tf.math.reduce_variance(targets)
    explained = 1.0 - tf.math.reduce_variance(targets - aux_values[:-1]) / tf.maximum(variance, 1e-8)
    return value_loss + beta * kl, {"distill/value_loss": value_loss, "distill/kl": kl,
                                    "distill/explained_variance": explained}
