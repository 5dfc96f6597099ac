"""`normalize_values`: PopArt's normalised value head, checked against NumPy loops of its
equations (van Hasselt et al., 2016): the debiased moving statistics, the output-preserving
rescale of the head, and the value loss in normalised units on V-trace targets."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.algorithms.impala.loss import impala_loss
from seedfleet.errors import UsageError
from tests.test_fixed_targets import GAMMA, LAMBDA, RHO_BAR, numpy_targets
from tests.test_impala import make_agent, make_batch, time_major

RATE = 0.3


def normalizing_agent(**overrides):
    return make_agent(**{"clip_ratio": 0.1, "discount": GAMMA, "vtrace_lambda": LAMBDA, "clip_rho_threshold": RHO_BAR,
                         "clip_pg_rho_threshold": RHO_BAR, "reward_clip": 0.0, "normalize_values": True,
                         "value_normalization_rate": RATE, **overrides})


def values_of(agent, batch) -> np.ndarray:
    tm = time_major(batch)
    return agent.net(tm.observation, tm.first, {})[1].numpy()


def numpy_statistics(batches: list[tuple[float, float]], rate: float) -> tuple[float, float]:
    """mu and sigma after moving averages of mean(v) and mean(v^2) at `rate`, debiased by
    1 - (1 - rate)^k after k batches, one loop over the batches."""
    first = second = 0.0
    for k, (mean, mean_square) in enumerate(batches, start=1):
        first = (1 - rate) * first + rate * mean
        second = (1 - rate) * second + rate * mean_square
        mu = first / (1 - (1 - rate) ** k)
        sigma = np.sqrt(second / (1 - (1 - rate) ** k) - mu * mu)
    return mu, sigma


def test_the_statistics_follow_debiased_moving_averages_and_the_values_do_not_move_with_them():
    agent = normalizing_agent()
    batch = make_batch(np.random.default_rng(3))
    statistics = agent.net.value_statistics
    before = values_of(agent, batch)
    seen = []
    for mean, spread in [(5.0, 2.0), (-1.0, 0.5), (30.0, 10.0)]:
        seen.append((mean, spread ** 2 + mean ** 2))
        statistics.update(*seen[-1], agent.net.value)
        mu, sigma = numpy_statistics(seen, RATE)
        np.testing.assert_allclose(statistics.mean.numpy(), mu, rtol=1e-5)
        np.testing.assert_allclose(statistics.std.numpy(), sigma, rtol=1e-5)
        np.testing.assert_allclose(values_of(agent, batch), before, rtol=1e-4, atol=1e-4)  # PopArt's "Pop"
    np.testing.assert_allclose(seen[0][0], numpy_statistics(seen[:1], RATE)[0])  # the first batch sets mu exactly
    assert statistics.std.numpy() > 2.0  # the scale did move, so the head was rescaled


def test_a_non_finite_batch_moves_neither_the_statistics_nor_the_head():
    agent = normalizing_agent()
    statistics = agent.net.value_statistics
    statistics.update(2.0, 13.0, agent.net.value)
    kept = [v.numpy().copy() for v in (statistics.mean, statistics.std, agent.net.value.w, agent.net.value.b)]
    statistics.update(float("nan"), 1.0, agent.net.value)
    statistics.update(1.0, float("inf"), agent.net.value)
    for variable, value in zip((statistics.mean, statistics.std, agent.net.value.w, agent.net.value.b), kept,
                               strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_the_value_loss_is_in_normalised_units_on_targets_from_the_denormalised_values():
    """With mu = 2 and sigma = 3: the net returns V = mu + sigma n(x) (n the head's output, read off
    a twin without normalisation on the same weights), V-trace runs on V, and the baseline term is
    mean(mask 0.5 ((v - mu) / sigma - n)^2)."""
    agent = normalizing_agent(fixed_targets=True)
    agent.net.value_statistics.mean.assign(2.0)
    agent.net.value_statistics.std.assign(3.0)
    twin = make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0)
    for mine, theirs in zip(twin.net.trainable_variables, agent.net.trainable_variables, strict=True):
        mine.assign(theirs)
    batch = make_batch(np.random.default_rng(8))
    head = np.swapaxes(values_of(twin, batch), 0, 1)  # n(x), [B, T+1]
    start_logits, start_values = agent._step_start(batch)
    np.testing.assert_allclose(start_values, 2.0 + 3.0 * head, rtol=1e-5, atol=1e-5)
    batch = batch._replace(extras={**batch.extras, "proximal_policy": start_logits, "start_value": start_values})
    vs, _, mask = numpy_targets(batch, start_logits, 2.0 + 3.0 * head.astype(np.float64))

    _, metrics = impala_loss(agent.net, agent.config, time_major(batch))
    baseline = (mask * 0.5 * ((vs - 2.0) / 3.0 - head[:, :-1]) ** 2).sum() / mask.size
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4)
    np.testing.assert_allclose(metrics["value/target_sum_per_transition"].numpy(), (mask * vs).sum() / mask.size,
                               rtol=1e-4)
    np.testing.assert_allclose(metrics["value/target_square_sum_per_transition"].numpy(),
                               (mask * vs ** 2).sum() / mask.size, rtol=1e-4)
    np.testing.assert_allclose(metrics["value/real_share"].numpy(), mask.mean())


@pytest.mark.parametrize("cut", [{}, {"fixed_targets": True, "minibatches": 2}])
def test_a_learner_step_moves_the_statistics_to_its_batchs_targets(cut):
    """The first update of the statistics is the batch's own mean and spread of the V-trace targets
    over its real transitions, as the network stood when the step began: in one minibatch, or in
    two that hold different numbers of real transitions (the targets fixed at the step's start)."""
    agent = normalizing_agent(**cut)
    batch = make_batch(np.random.default_rng(9))
    batch.first[0, 2] = True  # rows 0, 1 and 2 hold one cut each: any two rows differ from the other two
    start_logits, start_values = agent._step_start(batch)
    vs, _, mask = numpy_targets(batch, start_logits, start_values)
    real = vs[mask > 0]
    metrics = agent.learn(batch)
    np.testing.assert_allclose(metrics["value/normalization_mean"], real.mean(), rtol=1e-4)
    np.testing.assert_allclose(metrics["value/normalization_std"], real.std(), rtol=1e-4)
    np.testing.assert_allclose(agent.net.value_statistics.std.numpy(), real.std(), rtol=1e-4)


def test_the_statistics_are_checkpointed_with_the_network(tmp_path):
    agent = normalizing_agent()
    batch = make_batch(np.random.default_rng(10))
    agent.learn(batch)
    path = tf.train.Checkpoint(**agent.checkpointed()).save(str(tmp_path / "ckpt"))
    restored = normalizing_agent()
    tf.train.Checkpoint(**restored.checkpointed()).restore(path).assert_existing_objects_matched()
    for name in ("mean", "std", "first_moment", "second_moment", "updates"):
        assert getattr(restored.net.value_statistics, name).numpy() == getattr(agent.net.value_statistics,
                                                                                name).numpy()
    np.testing.assert_allclose(values_of(restored, batch), values_of(agent, batch), rtol=1e-6)


def test_without_normalisation_the_net_holds_no_statistics():
    agent = make_agent()
    assert agent.net.value_statistics is None
    assert float(agent.net.value_scale()) == 1.0


@pytest.mark.parametrize("rate", [0.0, 1.5, -0.1])
def test_a_rate_outside_0_to_1_is_refused_in_one_line(rate):
    with pytest.raises(UsageError, match="--value-normalization-rate"):
        normalizing_agent(value_normalization_rate=rate)


def test_a_rate_without_normalisation_is_refused_not_ignored():
    with pytest.raises(UsageError, match="it needs --normalize-values"):
        make_agent(value_normalization_rate=0.05)
    assert make_agent(value_normalization_rate=0.01).net.value_statistics is None  # the default, said aloud
