"""QR-DQN: its network against NumPy, one learner step's loss against a plain NumPy reading of
the paper's targets and loss, and CartPole learnt in process through replay."""

import numpy as np
import pytest
import tensorflow as tf
from in_process import train
from test_iqn import Steps, image_batch, reference_targets

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.iqn.builder import make_trainer
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.qrdqn.agent import QRDQNAgent
from seedfleet.algorithms.qrdqn.config import QRDQN_VECTOR, QRDQNConfig
from seedfleet.algorithms.qrdqn.network import AtomNet
from seedfleet.errors import UsageError

A, N = 3, 5


def make_agent(config=None, obs_shape=(10, 10), torso="minatar"):
    config = config or QRDQNConfig(unroll_length=8, n_step=3, batch_size=6, num_atoms=N, min_replay_size=0,
                                   learning_rate=3e-3)
    return QRDQNAgent(config, NetworkConfig(torso=torso, mlp_sizes=(16,), jit_compile=False),
                      AgentContext(obs_shape, np.dtype(np.float32), ActionSpec.discrete(A), seed=0, max_envs=4))


def test_quantiles_are_one_linear_output_per_action_and_midpoint():
    net = AtomNet(NetworkConfig(torso="mlp", mlp_sizes=(6,)), (4,), A, atoms=N, seed=1)
    features = np.random.default_rng(2).normal(size=(2, 6)).astype(np.float32)
    taus = net.trained_fractions(tf.constant(2)).numpy()
    np.testing.assert_allclose(taus, np.tile([0.1, 0.3, 0.5, 0.7, 0.9], (2, 1)), rtol=1e-6)
    np.testing.assert_array_equal(net.target_fractions(tf.constant(2)).numpy(), taus)
    z = net.quantiles(tf.constant(features), taus).numpy()
    flat = features @ net.out.w.numpy() + net.out.b.numpy()  # [B, N * A]
    for i in range(N):
        for a in range(A):
            np.testing.assert_allclose(z[:, i, a], flat[:, i * A + a], rtol=1e-5)
    np.testing.assert_allclose(net.q_values(tf.constant(features)).numpy(), z.mean(axis=1), rtol=1e-5)


def test_a_learner_steps_loss_is_the_papers():
    """Loss = mean over transitions of sum_i mean_j rho_tau_i(T_j - theta_i), with
    T_j = G + d * theta'_j(x_{t+m}, argmax_a mean_j theta'_j(x_{t+m}, a)) from the target network,
    tau_i = (2i + 1) / 2N (Dabney et al. 2017, eq. 10, with kappa = 1)."""
    agent = make_agent(QRDQNConfig(unroll_length=8, n_step=3, batch_size=6, num_atoms=N, min_replay_size=0),
                       obs_shape=(4,), torso="mlp")
    for variable in agent.target.trainable_variables:  # a target unlike the online network
        variable.assign(variable * 0.5 + 0.1)
    rng = np.random.default_rng(3)
    batch = image_batch(rng, shape=(4,))
    state = agent._rng.bit_generator.state
    windows = agent.windows(batch)
    agent._rng.bit_generator.state = state  # learn() draws the same windows
    c = agent.config
    reference = reference_targets(windows, c.n_step, c.discount, c.reward_clip, c.life_loss_terminal)

    def quantiles(net, row):  # [B, N, A] at row `row` of each window (vector obs: no stack)
        obs = windows["frames"][np.arange(6), row]
        features = net.features(tf.constant(obs), tf.constant(windows["first"][np.arange(6), row]), {})[0]
        return net.quantiles(features, None).numpy()

    theta = quantiles(agent.online, np.zeros(6, int))
    following = quantiles(agent.target, reference[2].astype(int))
    taus = (np.arange(N) + 0.5) / N
    total, count = 0.0, 0
    for b in range(6):
        if reference[3, b] == 0:
            continue
        best = np.argmax(following[b].mean(axis=0))
        targets = reference[0, b] + reference[1, b] * following[b, :, best]
        loss = 0.0
        for i in range(N):
            for j in range(N):
                u = targets[j] - theta[b, i, windows["action"][b]]
                huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                loss += abs(taus[i] - (u < 0)) * huber / N
        total, count = total + loss, count + 1
    got = float(agent.learn(batch)["loss/total"])
    assert count > 0
    assert got == pytest.approx(total / count, rel=1e-4)


def test_learning_lowers_the_loss():
    agent = make_agent()
    batch = image_batch(np.random.default_rng(4))
    losses = [float(agent.learn(batch)["loss/total"]) for _ in range(30)]
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(UsageError, match="--num-atoms must be at least 1"):
        make_agent(QRDQNConfig(unroll_length=8, batch_size=6, num_atoms=0))


def test_qrdqn_learns_cartpole_through_replay_under_its_vector_defaults():
    """QR-DQN's defaults for vector envs through the replay trainer in process: the mean of 50
    episodes passes 150 within 60,000 env steps."""
    config = QRDQNConfig(**QRDQN_VECTOR.algorithm)
    agent = QRDQNAgent(config, NetworkConfig(**QRDQN_VECTOR.network, jit_compile=False),
                       AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0, max_envs=16))
    trainer = make_trainer(agent, None, Steps(), "/CPU:0", config, 0, None)

    def insert_and_train(batch):
        trainer.insert(batch)
        while trainer.may_train():
            trainer.train_one_batch()

    returns, steps = train(agent, "CartPole-v1", 16, 60_000, on_batch=insert_and_train, stop_return=150.0, window=50)
    assert np.mean(returns[-50:]) >= 150.0, (steps, np.mean(returns[-50:]))
