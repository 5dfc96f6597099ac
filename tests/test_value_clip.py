"""`value_clip`: PPO's clipped value loss against the value as the learner step began, checked
against a NumPy loop of CleanRL's ppo_atari.py equations, on whole unrolls and on shuffled
single transitions."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import impala_loss
from seedfleet.algorithms.impala.transition_minibatches import flatten, transition_loss
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError
from tests.test_fixed_targets import GAMMA, LAMBDA, numpy_targets
from tests.test_impala import make_agent, make_batch, time_major

CLIP = 0.1


def numpy_clipped_baseline(targets, values, start_values, mask):
    """mean over every transition of mask * 0.5 * max((v - V)^2, (v - V_clip)^2), with
    V_clip = V_0 + clip(V - V_0, -c, c); and the share of real transitions whose clipped error is
    the larger. One loop over the transitions."""
    total, clipped, real = 0.0, 0, 0
    for v, value, start, m in zip(targets.ravel(), values.ravel(), start_values.ravel(), mask.ravel(), strict=True):
        moved = min(max(value - start, -CLIP), CLIP)
        plain, at_clip = (v - value) ** 2, (v - (start + moved)) ** 2
        total += m * 0.5 * max(plain, at_clip)
        clipped += m * (at_clip > plain)
        real += m
    return total / mask.size, clipped / real


def moved_away(agent: ImpalaAgent, seed: int) -> None:
    """Moves the network as earlier minibatches would."""
    rng = np.random.default_rng(seed)
    for variable in agent.net.trainable_variables:
        variable.assign_add(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))


def now_values(agent: ImpalaAgent, batch) -> np.ndarray:
    _, values, _ = agent.net(time_major(batch).observation, time_major(batch).first, {})
    return np.swapaxes(values.numpy()[:-1], 0, 1)


def test_the_value_loss_takes_the_larger_error_of_the_value_and_its_clip_around_the_step_start():
    agent = make_agent(clip_ratio=0.1, fixed_targets=True, value_clip=CLIP, discount=GAMMA, vtrace_lambda=LAMBDA,
                       reward_clip=0.0)
    batch = make_batch(np.random.default_rng(31))
    start_logits, start_values = agent._step_start(batch)
    batch = batch._replace(extras={**batch.extras, "proximal_policy": start_logits, "start_value": start_values})
    vs, _, mask = numpy_targets(batch, start_logits, start_values)

    _, unmoved = impala_loss(agent.net, agent.config, time_major(batch))  # V = V_0: nothing to clip
    np.testing.assert_allclose(unmoved["loss/baseline"].numpy(), (mask * 0.5 * (vs - start_values[:, :-1]) ** 2).sum()
                               / mask.size, rtol=1e-4)
    assert unmoved["value/clip_fraction"].numpy() == 0.0

    moved_away(agent, 32)
    values = now_values(agent, batch)
    baseline, share = numpy_clipped_baseline(vs, values, start_values[:, :-1], mask)
    _, metrics = impala_loss(agent.net, agent.config, time_major(batch))
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4)
    np.testing.assert_allclose(metrics["value/clip_fraction"].numpy(), share, rtol=1e-5)
    assert 0.0 < share < 1.0
    assert baseline > (mask * 0.5 * (vs - values) ** 2).sum() / mask.size * 1.01  # the clip changed the loss


def test_a_clipped_transition_gives_the_value_no_gradient():
    """Every value has moved from V_0 further than the clip, towards its target (V_0 set 1 behind the
    network's value, which alone makes the targets here): the clipped error is the larger and the
    baseline's gradient is zero."""
    agent = make_agent(clip_ratio=0.1, value_clip=CLIP, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0)
    batch = make_batch(np.random.default_rng(33))
    start_logits, start_values = agent._step_start(batch)
    vs, _, _ = numpy_targets(batch, start_logits, start_values)
    values = np.swapaxes(start_values, 0, 1)
    far = np.where(np.swapaxes(vs, 0, 1) > values[:-1], values[:-1] - 1.0, values[:-1] + 1.0)
    shifted = np.concatenate([far, values[-1:]]).swapaxes(0, 1)
    batch = batch._replace(extras={**batch.extras, "start_value": shifted})
    with tf.GradientTape() as tape:
        _, metrics = impala_loss(agent.net, agent.config, time_major(batch))
        baseline = metrics["loss/baseline"]
    assert metrics["value/clip_fraction"].numpy() == 1.0
    gradients = tape.gradient(baseline, agent.net.trainable_variables)
    assert all(g is None or not np.any(g.numpy()) for g in gradients)


def test_shuffled_transitions_clip_each_value_around_its_own_step_start_value():
    agent = make_agent(clip_ratio=0.1, shuffle_transitions=True, value_clip=CLIP, discount=GAMMA,
                       vtrace_lambda=LAMBDA, reward_clip=0.0)
    batch = make_batch(np.random.default_rng(34))
    data = flatten(batch, agent._by_minibatch(agent._targets, batch))
    _, start_values = agent._step_start(batch)
    np.testing.assert_allclose(data.start_value, start_values[:, :-1].reshape(-1), rtol=1e-5, atol=1e-6)
    moved_away(agent, 35)
    values = now_values(agent, batch).reshape(-1)
    order = np.random.default_rng(36).permutation(data.size)
    shuffled = tf.nest.map_structure(lambda v: v[order], data)
    _, metrics = transition_loss(agent.net, agent.config, shuffled)
    baseline, share = numpy_clipped_baseline(data.target[order], values[order], data.start_value[order],
                                             data.mask[order])
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4)
    np.testing.assert_allclose(metrics["value/clip_fraction"].numpy(), share, rtol=1e-5)


def test_a_negative_value_clip_is_refused_in_one_line():
    with pytest.raises(UsageError, match="--value-clip"):
        ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, clip_ratio=0.1, value_clip=-0.1), NetworkConfig(),
                    AgentContext((3,), np.dtype(np.float32), ActionSpec.discrete(2)))
