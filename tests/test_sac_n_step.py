"""SAC's n-step targets (`n_step`, algorithms/sac/loss.py) against plain NumPy loops: the
return of the steps still in x_0's episode, the bootstrap from the last of them, no bootstrap
after a termination, and the step into a reset observation carrying no loss."""

import numpy as np
import pytest
import tensorflow as tf
from test_sac import QueuedNoise, sac_agent

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.sac.loss import n_step_returns
from seedfleet.errors import UsageError

GAMMA = 0.9


def episodes_of(rng: np.random.Generator, count: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, terminated, truncated), [count, rows] each, as an env writes them: a row after a
    termination or truncation is a reset observation, and sequences may start anywhere."""
    first, terminated, truncated = (np.zeros((count, rows), bool) for _ in range(3))
    first[:, 0] = rng.random(count) < 0.3
    for i in range(count):
        for t in range(rows):
            if t and (terminated[i, t - 1] or truncated[i, t - 1]):
                first[i, t] = True
            elif rng.random() < 0.25:
                (terminated if rng.random() < 0.5 else truncated)[i, t] = True
    return first, terminated, truncated


def reference(rewards, first, terminated, n: int) -> tuple[list, list, list, list]:
    """G, gamma_t, m and the mask of each sequence, step by step."""
    out = ([], [], [], [])
    for i in range(len(rewards)):
        total, m = 0.0, 0
        for k in range(1, n + 1):
            if first[i, k]:
                break
            total += GAMMA ** (k - 1) * rewards[i, k]
            m = k
        for values, value in zip(out, (total, 0.0 if terminated[i, m] else GAMMA ** m, m, float(m > 0)), strict=True):
            values.append(value)
    return out


@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_returns_match_a_loop_over_each_sequence(n):
    rng = np.random.default_rng(n)
    first, terminated, _ = episodes_of(rng, 64, n + 1)
    rewards = rng.normal(size=(64, n + 1))
    got = n_step_returns(tf.constant(rewards[:, 1:]), tf.constant(first[:, 1:]), tf.constant(terminated), GAMMA)
    for value, expected in zip(got, reference(rewards, first, terminated, n), strict=True):
        np.testing.assert_allclose(value.numpy(), expected, rtol=1e-12)


def test_a_learner_step_trains_the_critics_on_n_step_targets_from_the_last_real_observation():
    """The critics' loss and mean target the learner reports equal a NumPy loop's, computed
    from the agent's own networks before the step: G from the rewards, a' and Q' at x_m."""
    n, count = 3, 32
    agent = sac_agent(batch_size=count, n_step=n, discount=GAMMA)
    assert (agent.layout.rows, agent.layout.new_steps) == (n + 1, 1)
    rng = np.random.default_rng(7)
    first, terminated, truncated = episodes_of(rng, count, n + 1)
    batch = Unroll(observation=rng.normal(size=(count, n + 1, 3)).astype(np.float32), first=first,
                   reward=rng.normal(size=(count, n + 1)).astype(np.float32), terminated=terminated,
                   truncated=truncated, life_lost=np.zeros((count, n + 1), bool),
                   action=rng.uniform(-2, 2, (count, n + 1, 1)).astype(np.float32), extras={}, state={})
    noise = rng.standard_normal((count, 1, 2, 1))
    agent._rng = QueuedNoise([noise])
    returns, discounts, last, mask = (np.array(v) for v in reference(batch.reward, first, terminated, n))
    alpha = float(tf.exp(agent.log_alpha))
    targets, losses = [], []
    for i in range(count):
        x_m = batch.observation[i, last[i]][None]
        mean, log_std = (v.numpy()[0, 0] for v in agent.actor(x_m))
        u = mean + np.exp(log_std) * noise[i, 0, 0, 0]
        log_prob = (-0.5 * noise[i, 0, 0, 0] ** 2 - log_std - 0.5 * np.log(2 * np.pi) - np.log(2.0)
                    - np.log(1 - np.tanh(u) ** 2))
        scaled = np.array([[np.tanh(u)]], np.float32)  # a' in [-1, 1], as the critics read actions
        q_next = min(float(target(x_m, scaled)[0]) for target in agent.targets)
        y = returns[i] + discounts[i] * (q_next - alpha * log_prob)
        a = batch.action[i, 0][None] / 2.0
        q = [float(critic(batch.observation[i, 0][None], a)[0]) for critic in agent.critics]
        targets.append(mask[i] * y)
        losses.append(mask[i] * ((q[0] - y) ** 2 + (q[1] - y) ** 2))
    assert 0 < mask.sum() < count and (discounts == 0).any() and (last < n).any() and (last == n).any()
    out = agent.learn(batch)
    np.testing.assert_allclose(float(out["sac/target"]), np.sum(targets) / count, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(float(out["loss/critic"]), np.sum(losses) / count, rtol=2e-4, atol=1e-5)


def test_an_n_step_below_one_is_one_clear_line():
    with pytest.raises(UsageError, match="--n-step must be at least 1"):
        sac_agent(n_step=0)
