"""`entropy_floor`: a hinge under the policy's mean entropy at a share of log |A|, checked against a
NumPy loop over the batch's transitions, with its gradient, and refused where it means nothing."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import impala_loss
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError
from tests.test_impala import make_batch, time_major

ACTIONS = 5
FLOOR, FLOOR_COST = 0.4, 0.03
FIVE_ACTIONS = ActionSpec.discrete(ACTIONS)


def agent_with(actions: ActionSpec = FIVE_ACTIONS, **overrides) -> ImpalaAgent:
    config = ImpalaConfig(unroll_length=6, batch_size=4, **overrides)
    return ImpalaAgent(config, NetworkConfig(), AgentContext((3,), np.dtype(np.float32), actions, seed=0))


def numpy_mean_entropy(agent: ImpalaAgent, batch) -> float:
    """The mean over real transitions (those not into a reset) of -sum_a p_a log p_a, one loop."""
    logits, _, _ = agent.net(batch.observation, batch.first, {})
    logits = logits.numpy()[:-1]
    total, count = 0.0, 0
    for t in range(logits.shape[0]):
        for b in range(logits.shape[1]):
            if batch.first[t + 1, b]:
                continue
            z = logits[t, b] - logits[t, b].max()
            p = np.exp(z) / np.exp(z).sum()
            total += -sum(p[a] * np.log(p[a]) for a in range(ACTIONS))
            count += 1
    return total / count


def sharpened(agent: ImpalaAgent, scale: float) -> ImpalaAgent:
    """The policy head's weights drawn at `scale` (0: the uniform policy)."""
    w = agent.net.policy.w
    w.assign(np.random.default_rng(42).normal(0.0, scale, w.shape).astype(np.float32))
    return agent


def loss_and_gradients(agent: ImpalaAgent, batch):
    with tf.GradientTape() as tape:
        loss, metrics = impala_loss(agent.net, agent.config, batch)
    return loss.numpy(), tape.gradient(loss, agent.net.trainable_variables), metrics


@pytest.mark.parametrize("scale, below", [(10.0, True), (0.0, False)])
def test_the_floor_adds_its_cost_times_the_entropy_shortfall_under_a_share_of_log_actions(scale, below):
    batch = time_major(make_batch(np.random.default_rng(41), num_actions=ACTIONS))
    plain = sharpened(agent_with(), scale)
    floored = sharpened(agent_with(entropy_floor=FLOOR, entropy_floor_cost=FLOOR_COST), scale)
    mean_entropy = numpy_mean_entropy(plain, batch)
    shortfall = max(0.0, FLOOR * np.log(ACTIONS) - mean_entropy)
    assert (shortfall > 0.05) == below  # the sharp policy sits under the floor, the uniform one on log |A|

    plain_loss, plain_grads, _ = loss_and_gradients(plain, batch)
    floored_loss, floored_grads, metrics = loss_and_gradients(floored, batch)
    np.testing.assert_allclose(floored_loss - plain_loss, FLOOR_COST * shortfall, rtol=1e-4, atol=1e-6)
    assert metrics["policy/entropy_below_floor"].numpy() == float(below)

    # below the floor the gradient gains floor_cost times that of -mean H; above it, nothing
    with tf.GradientTape() as tape:
        logits, _, _ = floored.net(batch.observation, batch.first, {})
        mask = tf.cast(~batch.first[1:], tf.float32)
        entropy = floored.net.distribution(logits[:-1]).entropy()
        minus_mean_entropy = -tf.reduce_sum(mask * entropy) / tf.reduce_sum(mask)
    entropy_grads = tape.gradient(minus_mean_entropy, floored.net.trainable_variables)
    for plain_g, floored_g, entropy_g in zip(plain_grads, floored_grads, entropy_grads, strict=True):
        pull = 0.0 if entropy_g is None or not below else FLOOR_COST * entropy_g.numpy()  # None: the value head
        expected = plain_g.numpy() + pull
        np.testing.assert_allclose(floored_g.numpy(), expected, rtol=1e-4, atol=1e-7)
    if below:
        assert max(np.abs(g.numpy()).max() for g in entropy_grads if g is not None) > 1e-4


def test_off_by_default_and_refused_outside_its_range_or_for_gaussian_actions():
    assert ImpalaConfig().entropy_floor == 0.0
    with pytest.raises(UsageError, match="entropy-floor"):
        agent_with(entropy_floor=1.0)
    with pytest.raises(UsageError, match="entropy-floor-cost"):
        agent_with(entropy_floor=0.3, entropy_floor_cost=-0.01)
    with pytest.raises(UsageError, match="largest entropy"):
        agent_with(ActionSpec.box((2,), [-1.0] * 2, [1.0] * 2), entropy_floor=0.3)
