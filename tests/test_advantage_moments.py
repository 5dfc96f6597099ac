"""`advantage_moments`: normalised advantages scaled by each minibatch's own moments or by
moving averages over about one pass of minibatches, checked against NumPy loops from the
definitions (a debiased exponential moving average, the clipped surrogate at ratio 1)."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.algorithms.impala.loss import impala_loss, running_moments
from seedfleet.errors import UsageError
from tests.test_advantage_lambda import numpy_inputs, one_step
from tests.test_fixed_targets import uncut_batch
from tests.test_impala import make_agent, time_major
from tests.test_vtrace import reference_vtrace

GAMMA, LAMBDA = 0.9, 0.95


def reference_running(means, variances, rate):
    """The debiased moving averages of a sequence of minibatch moments, step by step, and the
    last (s1, s2, w)."""
    s1 = s2 = w = 0.0
    out = []
    for mean, variance in zip(means, variances, strict=True):
        s1 = (1 - rate) * s1 + rate * mean
        s2 = (1 - rate) * s2 + rate * (variance + mean ** 2)
        w = (1 - rate) * w + rate
        out.append((s1 / w, s2 / w - (s1 / w) ** 2))
    return out, (s1, s2, w)


def test_running_moments_are_debiased_moving_averages_and_the_first_is_the_minibatchs_own():
    rng = np.random.default_rng(3)
    means, variances = rng.normal(0, 2, 9), rng.uniform(0.01, 5, 9)
    state = tf.zeros(3)
    for k, (expected_mean, expected_variance) in enumerate(reference_running(means, variances, 0.25)[0]):
        mean, variance, state = running_moments(state, tf.constant(means[k], tf.float32),
                                                tf.constant(variances[k], tf.float32), 0.25)
        np.testing.assert_allclose([mean.numpy(), variance.numpy()], [expected_mean, expected_variance], rtol=1e-4)
        if k == 0:
            np.testing.assert_allclose([mean.numpy(), variance.numpy()], [means[0], variances[0]], rtol=1e-5)
    np.testing.assert_allclose(state.numpy()[2], 1 - 0.75 ** 9, rtol=1e-5)


def on_policy(agent, seed):
    """An uncut batch acted by the agent's own network: every ratio pi / mu is 1."""
    batch = uncut_batch(seed)
    tm = time_major(batch)
    logits, _, _ = agent.net(tm.observation, tm.first, {})
    return batch._replace(extras={**batch.extras, "policy": np.swapaxes(logits.numpy(), 0, 1)})


def agent(moments: str, **overrides):
    return make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0,
                      normalize_advantages=True, advantage_moments=moments, minibatches=2, **overrides)


def test_running_moments_scale_the_policy_loss_and_a_quiet_minibatch_stays_small():
    running, own = agent("running"), agent("minibatch")
    batch = on_policy(running, 31)
    log_rhos, discounts, rewards, values, bootstrap, mask = numpy_inputs(running, batch)
    vs, _ = reference_vtrace(log_rhos, discounts, rewards, values, bootstrap, 1.0, 1.0, LAMBDA)
    advantages = one_step(vs, rewards, discounts, values, bootstrap)[mask > 0]

    # from (0, 0, 0) the first minibatch takes its own moments: the two settings agree
    _, first = impala_loss(running.net, running.config, time_major(batch), tf.zeros(3))
    _, theirs = impala_loss(own.net, own.config, time_major(batch), tf.zeros(3))
    np.testing.assert_allclose(first["loss/policy"].numpy(), theirs["loss/policy"].numpy(), rtol=1e-5, atol=1e-7)
    assert abs(first["loss/policy"].numpy()) < 1e-5  # on policy: -mean((A - mean A) / std A) = 0

    # after loud minibatches (mean 0.5, std 20 times this one's), the running moments take over:
    # at ratio 1 the surrogate is A_norm, so the loss is -sum((A - m) / s) / N with m, s the running ones
    loud_mean, loud_variance = 0.5, 400 * advantages.var()
    _, state = reference_running([loud_mean] * 2, [loud_variance] * 2, 0.5)
    history, _ = reference_running([loud_mean] * 2 + [advantages.mean()], [loud_variance] * 2 + [advantages.var()], 0.5)
    mean, variance = history[-1]
    _, loud = impala_loss(running.net, running.config, time_major(batch), tf.constant(state, tf.float32))
    expected = -np.sum((advantages - mean) / (np.sqrt(variance) + 1e-8)) / mask.size
    np.testing.assert_allclose(loud["loss/policy"].numpy(), expected, rtol=1e-4)
    assert loud["advantage/quiet"].numpy() == 1.0 and first["advantage/quiet"].numpy() == 0.0
    _, own_after_loud = impala_loss(own.net, own.config, time_major(batch), tf.constant(state, tf.float32))
    assert abs(own_after_loud["loss/policy"].numpy()) < 1e-5  # its own moments, whatever came before


def test_learn_carries_the_running_moments_from_step_to_step():
    learner = agent("running", epochs=2)
    assert learner._advantage_state[2] == 0.0
    metrics = learner.learn(on_policy(learner, 32))
    # 2 passes of 2 minibatches at rate 1/2: w = 1 - (1/2)^4
    np.testing.assert_allclose(learner._advantage_state[2], 1 - 0.5 ** 4, rtol=1e-6)
    assert 0.0 <= metrics["advantage/quiet"] <= 1.0
    assert not any(name.startswith("advantage/running") for name in metrics)


@pytest.mark.parametrize("overrides, match", [
    ({"advantage_moments": "batch"}, "minibatch or running"),
    ({"advantage_moments": "running"}, "normalize-advantages"),
    ({"advantage_moments": "running", "normalize_advantages": True, "shuffle_transitions": True}, "shuffle"),
])
def test_running_moments_without_normalised_unroll_minibatches_are_refused(overrides, match):
    with pytest.raises(UsageError, match=match):
        make_agent(clip_ratio=0.1, **overrides)
