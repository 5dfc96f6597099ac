"""PPO-DNA's distillation phase (algorithms/impala/distillation.py) against its equations."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.distillation import OLD_POLICY, VALUE_TARGET, distillation_loss
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError
from tests.test_impala import make_batch, time_major

THREE_ACTIONS = ActionSpec.discrete(3)
SEPARATE = NetworkConfig(shared_torso=False)


def make_agent(network=SEPARATE, **overrides) -> ImpalaAgent:
    config = ImpalaConfig(unroll_length=6, batch_size=4, minibatches=2, epochs=2, clip_ratio=0.1,
                          learning_rate=3e-3, **overrides)
    return ImpalaAgent(config, network, AgentContext((3,), np.dtype(np.float32), THREE_ACTIONS, seed=0))


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def test_the_loss_matches_a_numpy_loop_from_its_equations():
    """0.5 * mean_t (V_aux - V)^2 + beta * mean_t sum_a pi_old(a) (log pi_old(a) - log pi(a)) over
    rows 0..T-1 of every unroll."""
    agent = make_agent(distill_epochs=1)
    rng = np.random.default_rng(3)
    batch = make_batch(rng, num_actions=3)
    B, rows = batch.action.shape
    old = rng.normal(size=(B, rows, 3)).astype(np.float32)
    target = rng.normal(size=(B, rows)).astype(np.float32)
    batch = batch._replace(extras={**batch.extras, OLD_POLICY: old, VALUE_TARGET: target})
    beta = 0.7
    loss, metrics = distillation_loss(agent.net, beta, time_major(batch))
    params, aux = agent.net.policy_side(*(np.swapaxes(v, 0, 1) for v in (batch.observation, batch.first)), {})
    params, aux = np.swapaxes(params.numpy(), 0, 1), np.swapaxes(aux.numpy(), 0, 1)
    squares, kls = [], []
    for b in range(B):
        for t in range(rows - 1):
            squares.append((aux[b, t] - target[b, t]) ** 2)
            log_p, log_q = log_softmax(old[b, t]), log_softmax(params[b, t])
            kls.append(sum(np.exp(log_p[a]) * (log_p[a] - log_q[a]) for a in range(3)))
    np.testing.assert_allclose(metrics["distill/value_loss"].numpy(), 0.5 * np.mean(squares), rtol=1e-5)
    np.testing.assert_allclose(metrics["distill/kl"].numpy(), np.mean(kls), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(loss.numpy(), 0.5 * np.mean(squares) + beta * np.mean(kls), rtol=1e-5)


def test_only_the_policys_side_gets_a_gradient():
    agent = make_agent(distill_epochs=1)
    rng = np.random.default_rng(4)
    batch = make_batch(rng, num_actions=3)
    extras = {OLD_POLICY: rng.normal(size=(*batch.action.shape, 3)).astype(np.float32),
              VALUE_TARGET: rng.normal(size=batch.action.shape).astype(np.float32)}
    batch = batch._replace(extras={**batch.extras, **extras})
    with tf.GradientTape() as tape:
        loss, _ = distillation_loss(agent.net, 1.0, time_major(batch))
    value_side = [*agent.net.value_torso.trainable_variables, *agent.net.value.trainable_variables]
    policy_side = agent.net.policy_variables
    grads = tape.gradient(loss, value_side + policy_side)
    assert all(g is None for g in grads[:len(value_side)])
    assert all(g is not None and np.any(g.numpy() != 0) for g in grads[len(value_side):])


def _auxiliary_and_values(agent: ImpalaAgent, batch) -> tuple[np.ndarray, np.ndarray]:
    """The auxiliary head's values and the value torso's on every row, time-major."""
    obs, first = (np.swapaxes(v, 0, 1) for v in (batch.observation, batch.first))
    _, aux = agent.net.policy_side(obs, first, {})
    _, values, _ = agent.net(obs, first, {})
    return aux.numpy(), values.numpy()


def test_distillation_moves_the_auxiliary_head_towards_the_value_torso_and_leaves_that_torso_alone():
    batch = make_batch(np.random.default_rng(5), num_actions=3)
    agent = make_agent(distill_epochs=4)
    agent.learn(batch)  # the passes: the value torso has learnt something to distill
    aux, values = _auxiliary_and_values(agent, batch)
    metrics = agent._distill(batch)
    aux_after, values_after = _auxiliary_and_values(agent, batch)
    np.testing.assert_array_equal(values_after, values)
    assert np.mean((aux_after - values) ** 2) < 0.5 * np.mean((aux - values) ** 2)
    assert metrics["distill/value_loss"] > 0 and metrics["distill/kl"] >= 0


def test_a_learner_step_runs_its_passes_then_distillation_on_an_optimizer_of_its_own():
    batch = make_batch(np.random.default_rng(5), num_actions=3)
    agent = make_agent(distill_epochs=3)
    metrics = agent.learn(batch)
    assert int(agent.optimizer.iterations.numpy()) == 2 * 2  # epochs x minibatches
    assert int(agent.distill_optimizer.iterations.numpy()) == 3 * 2  # distill_epochs x minibatches
    assert {"distill/value_loss", "distill/kl", "distill/last_epoch_kl", "distill/grad_norm"} <= set(metrics)


def _policy_move_under_distillation(beta: float) -> float:
    """Mean KL(pi before || pi after) over a batch's rows for one distillation phase."""
    batch = make_batch(np.random.default_rng(6), num_actions=3)
    agent = make_agent(distill_epochs=6, distill_beta=beta)
    agent.net.policy.w.assign(agent.net.policy.w * 100.0)  # logits of order 1, as after some training
    old, _ = agent._step_start(batch)
    agent._distill(batch)
    new, _ = agent._step_start(batch)
    log_p, log_q = tf.nn.log_softmax(old), tf.nn.log_softmax(new)
    return float(tf.reduce_mean(tf.reduce_sum(tf.exp(log_p) * (log_p - log_q), -1)))


def test_the_kl_term_holds_the_policy_while_the_value_is_distilled():
    assert _policy_move_under_distillation(10.0) < 0.5 * _policy_move_under_distillation(0.0)


def test_distillation_without_a_value_torso_of_its_own_or_below_zero_is_refused():
    with pytest.raises(UsageError, match="--no-shared-torso"):
        make_agent(NetworkConfig(), distill_epochs=2)
    with pytest.raises(UsageError, match="at least 0"):
        make_agent(distill_epochs=-1)
    with pytest.raises(UsageError, match="at least 0"):
        make_agent(distill_epochs=1, distill_beta=-0.5)


def test_checkpoints_carry_the_distillation_optimizer_only_when_it_runs():
    assert set(make_agent().checkpointed()) == {"net", "optimizer"}
    agent = make_agent(distill_epochs=1)
    assert set(agent.checkpointed()) == {"net", "optimizer", "distill_optimizer"}
    assert agent.net.auxiliary_value is not None and make_agent().net.auxiliary_value is None
