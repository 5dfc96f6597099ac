"""R2D2 learning: Ape-X epsilons, burn-in without gradient, a step that lowers the loss."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import DuelingQNet
from seedfleet.algorithms.r2d2.config import R2D2Config, ape_x_epsilons
from seedfleet.algorithms.r2d2.loss import r2d2_loss

A = 3


def test_ape_x_epsilons():
    eps = ape_x_epsilons(4)
    np.testing.assert_allclose(eps, [0.4 ** (1 + 7 * i / 3) for i in range(4)], rtol=1e-6)
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert np.all(np.diff(eps) < 0)
    assert ape_x_epsilons(1)[0] == pytest.approx(0.4)


def make_batch(rng, L, B, obs_dim=4):
    first = np.zeros((L, B), bool)
    first[0] = True
    first[7, 1] = True
    terminated = np.zeros((L, B), bool)
    terminated[6, 1] = True
    return Unroll(
        observation=tf.constant(rng.normal(size=(L, B, obs_dim)).astype(np.float32)),
        first=tf.constant(first),
        reward=tf.constant(rng.normal(size=(L, B)).astype(np.float32)),
        terminated=tf.constant(terminated),
        truncated=tf.zeros((L, B), tf.bool),
        life_lost=tf.zeros((L, B), tf.bool),
        action=tf.constant(rng.integers(0, A, (L, B)).astype(np.int32)),
        extras={},
        state={},
    )


def nets(seed=0):
    config = NetworkConfig(mlp_sizes=(16,), lstm_size=8)
    return DuelingQNet(config, (4,), A, seed=seed), DuelingQNet(config, (4,), A, seed=seed + 1)


def with_state(batch, net, B):
    state = {k: tf.constant(v) for k, v in net.initial_state(B).items()}
    state["prev_action"] = tf.zeros([B], tf.int32)
    return batch._replace(state=state)


def test_dueling_heads_average_to_the_value():
    online, _ = nets()
    rng = np.random.default_rng(0)
    obs = tf.constant(rng.normal(size=(2, 3, 4)).astype(np.float32))
    q, _ = online(obs, tf.zeros([2, 3], tf.bool), tf.zeros([2, 3], tf.int32), tf.zeros([2, 3]),
                  {k: tf.constant(v) for k, v in online.initial_state(3).items()})
    assert q.shape == (2, 3, A)
    features, _ = online.torso(obs, tf.zeros([2, 3], tf.bool), online.initial_state(3),
                               tf.concat([tf.one_hot(tf.zeros([2, 3], tf.int32), A), tf.zeros([2, 3, 1])], -1))
    np.testing.assert_allclose(tf.reduce_mean(q, -1).numpy(), tf.squeeze(online.value(features), -1).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_burn_in_produces_no_gradient():
    """The loss's gradient equals that of the same loss started, with no burn-in, from the
    burned-in state held constant: nothing flows back into the burn-in rows."""
    rng = np.random.default_rng(1)
    burn_in, T, B = 5, 6, 2
    online, target = nets()
    batch = with_state(make_batch(rng, burn_in + T + 1, B), online, B)
    weights = tf.ones([B])
    config = R2D2Config(burn_in=burn_in, unroll_length=T, n_step=3)
    with tf.GradientTape() as tape:
        loss, _, _ = r2d2_loss(online, target, config, batch, weights)
    grads = tape.gradient(loss, online.trainable_variables)

    # the same computation by hand: burn in, then start a burn-in-free sequence there
    prev_action = tf.concat([batch.state["prev_action"][None], batch.action[:-1]], 0)
    net_state = {k: v for k, v in batch.state.items() if k != "prev_action"}

    def burn(net):
        return net(batch.observation[:burn_in], batch.first[:burn_in], prev_action[:burn_in],
                   batch.reward[:burn_in], net_state)[1]
    online_state, target_state = burn(online), burn(target)
    rest = batch.map(lambda v: v[burn_in:], state=False)
    config0 = R2D2Config(burn_in=0, unroll_length=T, n_step=3)
    # with no burn-in, one state serves both nets: the target net keeps its own burned-in state
    with tf.GradientTape() as tape:
        state = {**online_state, "prev_action": prev_action[burn_in]}
        tstate = {**target_state, "prev_action": prev_action[burn_in]}
        loss_o = _loss_with_states(online, target, config0, rest, state, tstate, weights)
    grads0 = tape.gradient(loss_o, online.trainable_variables)
    np.testing.assert_allclose(loss.numpy(), loss_o.numpy(), rtol=1e-5)
    for g, g0 in zip(grads, grads0, strict=True):
        np.testing.assert_allclose(g.numpy(), g0.numpy(), rtol=1e-4, atol=1e-6)


def _loss_with_states(online, target, config, rest, online_state, target_state, weights):
    """r2d2_loss with no burn-in, the target net run from its own state."""

    class Target(tf.Module):
        def __call__(self, obs, first, prev_action, reward, _state):
            return target(obs, first, prev_action, reward, {k: v for k, v in target_state.items()
                                                             if k != "prev_action"})
    loss, _, _ = r2d2_loss(online, Target(), config, rest._replace(state=online_state), weights)
    return loss


def test_one_training_step_lowers_the_loss_on_a_fixed_batch():
    rng = np.random.default_rng(2)
    online, target = nets()
    B = 4
    batch = with_state(make_batch(rng, 3 + 8 + 1, B), online, B)
    config = R2D2Config(burn_in=3, unroll_length=8, n_step=2)
    weights = tf.constant([1.0, 0.5, 0.25, 1.0])
    optimizer = optim.Optimizer("adam", online.trainable_variables, 1e-2, 1e-8)
    with tf.GradientTape() as tape:
        before, priorities, _ = r2d2_loss(online, target, config, batch, weights)
    optimizer.apply_clipped(tape.gradient(before, online.trainable_variables))
    after, _, _ = r2d2_loss(online, target, config, batch, weights)
    assert after.numpy() < before.numpy()
    assert priorities.shape == (B,) and np.all(priorities.numpy() >= 0)


def test_acting_is_epsilon_greedy_per_env_and_remembers_the_action():
    from seedfleet.algorithms.agent import AgentContext
    from seedfleet.algorithms.r2d2.agent import R2D2Agent

    agent = R2D2Agent(R2D2Config(burn_in=2, unroll_length=4), NetworkConfig(mlp_sizes=(8,), lstm_size=4),
                      AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(A), seed=0, max_envs=4))
    agent.set_epsilons(np.array([0.0, 1.0], np.float32))  # ids 2, 3 keep the last rate: 1.0
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    state = agent.initial_state(2)
    ids = np.array([0, 1], np.int32)
    greedy, random = set(), set()
    for _ in range(60):
        actions, extras, new_state = agent.act(obs, np.zeros(2, np.float32), np.ones(2, bool), ids, state)
        q = extras["q"].numpy()
        greedy.add(int(actions[0]) == int(np.argmax(q[0])))
        random.add(int(actions[1]))
        np.testing.assert_array_equal(new_state["prev_action"].numpy(), actions.numpy())
    assert greedy == {True} and random == set(range(A))
    np.testing.assert_allclose(agent.epsilons.numpy(), [0.0, 1.0, 1.0, 1.0])
    agent.assign_envs(1, 3, evaluation=True)  # an evaluation actor takes ids 1..2
    np.testing.assert_allclose(agent.epsilons.numpy(), [0.0, 0.001, 0.001, 1.0])
    agent.assign_envs(1, 3, evaluation=False)  # and a training actor takes them back
    np.testing.assert_allclose(agent.epsilons.numpy(), [0.0, 1.0, 1.0, 1.0])


def test_the_target_network_takes_the_online_weights_every_target_update_period_steps():
    """In the learner step's graph: after steps 1 and 2 of a period of 3 the target keeps the
    weights it started with, after step 3 it holds the online network's."""
    from test_impala import make_batch

    from seedfleet.algorithms.agent import AgentContext
    from seedfleet.algorithms.r2d2.agent import R2D2Agent

    agent = R2D2Agent(R2D2Config(burn_in=2, unroll_length=4, batch_size=4, n_step=2, target_update_period=3),
                      NetworkConfig(lstm_size=8, jit_compile=False),
                      AgentContext((3,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0))
    start = [v.numpy() for v in agent.target.trainable_variables]
    rng = np.random.default_rng(1)
    for step in (1, 2, 3):
        batch = make_batch(rng, T=6)
        agent.learn(batch._replace(state=agent.initial_state(4), extras={}))
        online = [v.numpy() for v in agent.online.trainable_variables]
        target = [v.numpy() for v in agent.target.trainable_variables]
        assert not all(np.array_equal(o, s) for o, s in zip(online, start, strict=True))  # training moved it
        kept = all(np.array_equal(t, s) for t, s in zip(target, start, strict=True))
        copied = all(np.array_equal(t, o) for t, o in zip(target, online, strict=True))
        assert (kept, copied) == ((True, False) if step < 3 else (False, True)), step
