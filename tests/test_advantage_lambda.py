"""`advantage_lambda`: the policy-gradient advantage read off a V-trace with its own, shorter
traces while the value targets keep `vtrace_lambda`, checked against NumPy loops from the
V-trace paper's sum and, on policy, against the TD errors' weights it should give."""

import numpy as np
import pytest

from seedfleet.algorithms.impala.loss import impala_loss
from seedfleet.algorithms.impala.transition_minibatches import unroll_targets
from seedfleet.errors import UsageError
from tests.test_fixed_targets import log_softmax, uncut_batch
from tests.test_impala import make_agent, make_batch, time_major
from tests.test_vtrace import reference_vtrace

GAMMA, VALUE_LAMBDA, ADVANTAGE_LAMBDA = 0.9, 0.95, 0.5


def split_agent(advantage_lambda: float = ADVANTAGE_LAMBDA):
    return make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=VALUE_LAMBDA, advantage_lambda=advantage_lambda,
                      reward_clip=0.0)


def numpy_inputs(agent, batch):
    """Time-major [T, B] log rhos, discounts, rewards, values and [B] bootstrap values of the
    agent's network on `batch`, and the real-transition mask, one transition at a time."""
    tm = time_major(batch)
    logits, values, _ = agent.net(tm.observation, tm.first, {})
    pi, mu = log_softmax(logits.numpy().astype(np.float64)), log_softmax(tm.extras["policy"].astype(np.float64))
    values = values.numpy().astype(np.float64)
    t_len, b_size = tm.action.shape[0] - 1, tm.action.shape[1]
    log_rhos, discounts, rewards, mask = (np.zeros((t_len, b_size)) for _ in range(4))
    for t in range(t_len):
        for b in range(b_size):
            real = not tm.first[t + 1, b]
            a = tm.action[t, b]
            log_rhos[t, b] = pi[t, b, a] - mu[t, b, a] if real else -np.inf
            discounts[t, b] = GAMMA * (not tm.terminated[t + 1, b]) * real
            rewards[t, b] = tm.reward[t + 1, b]
            mask[t, b] = real
    return log_rhos, discounts, rewards, values[:-1], values[-1], mask


def one_step(vs, rewards, discounts, values, bootstrap):
    """APPO's A_t = r_t + gamma_t v_{t+1} - V(x_t), v_T = V(x_T)."""
    return rewards + discounts * np.concatenate([vs[1:], bootstrap[None]], axis=0) - values


def test_the_advantage_reads_its_own_lambda_and_the_value_targets_keep_theirs():
    agent = split_agent()
    batch = make_batch(np.random.default_rng(21))  # off policy: the actors' logits are not the network's
    log_rhos, discounts, rewards, values, bootstrap, mask = numpy_inputs(agent, batch)
    value_targets, _ = reference_vtrace(log_rhos, discounts, rewards, values, bootstrap, 1.0, 1.0, VALUE_LAMBDA)
    short, _ = reference_vtrace(log_rhos, discounts, rewards, values, bootstrap, 1.0, 1.0, ADVANTAGE_LAMBDA)
    advantages = one_step(short, rewards, discounts, values, bootstrap)
    real = mask > 0

    _, metrics = impala_loss(agent.net, agent.config, time_major(batch))
    np.testing.assert_allclose(metrics["advantage/mean"].numpy(), advantages[real].mean(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["advantage/std"].numpy(), advantages[real].std(), rtol=1e-4)
    baseline = (mask * 0.5 * (value_targets - values) ** 2).sum() / mask.size
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4)

    same = split_agent(advantage_lambda=0.0)  # 0: the value targets' lambda, as before the option
    for mine, theirs in zip(same.net.trainable_variables, agent.net.trainable_variables, strict=True):
        mine.assign(theirs)
    _, unsplit = impala_loss(same.net, same.config, time_major(batch))
    long = one_step(value_targets, rewards, discounts, values, bootstrap)
    np.testing.assert_allclose(unsplit["advantage/std"].numpy(), long[real].std(), rtol=1e-4)
    assert abs(long[real].std() - advantages[real].std()) > 1e-3
    np.testing.assert_allclose(unsplit["loss/baseline"].numpy(), baseline, rtol=1e-4)


def test_on_policy_the_advantage_weighs_the_td_errors_gamma_to_the_k_times_lambda_to_the_k_minus_1():
    """With pi = mu and no cut, A_t = delta_t + sum_{k>=1} gamma^k lambda_A^(k-1) delta_{t+k}
    (delta_t = r_t + gamma V(x_{t+1}) - V(x_t)), summed term by term; the shuffled path's
    targets read the same advantages and the value targets' longer traces."""
    agent = make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=VALUE_LAMBDA, advantage_lambda=ADVANTAGE_LAMBDA,
                       reward_clip=0.0, shuffle_transitions=True)
    batch = uncut_batch(22)
    tm = time_major(batch)
    logits, _, _ = agent.net(tm.observation, tm.first, {})
    batch = batch._replace(extras={**batch.extras, "policy": np.swapaxes(logits.numpy(), 0, 1)})
    _, discounts, rewards, values, bootstrap, _ = numpy_inputs(agent, batch)
    v_ext = np.concatenate([values, bootstrap[None]], axis=0)
    deltas = rewards + discounts * v_ext[1:] - values
    t_len, b_size = deltas.shape
    expected = np.zeros((t_len, b_size))
    for b in range(b_size):
        for t in range(t_len):
            expected[t, b] = deltas[t, b] + sum(
                GAMMA ** k * ADVANTAGE_LAMBDA ** (k - 1) * deltas[t + k, b] for k in range(1, t_len - t))
    targets = unroll_targets(agent.net, agent.config, time_major(batch))
    np.testing.assert_allclose(targets["advantage"].numpy(), expected, rtol=1e-4, atol=1e-5)
    value_targets, _ = reference_vtrace(np.zeros_like(deltas), discounts, rewards, values, bootstrap, 1.0, 1.0,
                                        VALUE_LAMBDA)
    np.testing.assert_allclose(targets["target"].numpy(), value_targets, rtol=1e-4, atol=1e-5)


def test_an_advantage_lambda_outside_0_to_1_is_refused():
    with pytest.raises(UsageError, match="advantage-lambda"):
        split_agent(advantage_lambda=1.5)
