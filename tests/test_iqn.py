"""IQN: n-step targets and the quantile regression loss against plain NumPy loops of their
definitions, windows whose single rows carry their frame stacks, the epsilon schedule, target
copies, the replay ratio in transitions, and CartPole learnt in process through replay."""

import numpy as np
import pytest
import tensorflow as tf
from in_process import train

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.iqn.agent import IQNAgent
from seedfleet.algorithms.iqn.builder import make_trainer
from seedfleet.algorithms.iqn.config import IQN_VECTOR, IQNConfig
from seedfleet.algorithms.iqn.loss import n_step_targets, quantile_huber_loss
from seedfleet.algorithms.iqn.network import QuantileNet
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError

A = 3


def random_flags(rng, B, rows):
    """Episode ends of every kind: terminations, truncations, lost lives, each end followed by a start."""
    terminated = rng.random((B, rows)) < 0.12
    truncated = ~terminated & (rng.random((B, rows)) < 0.08)
    first = np.zeros((B, rows), bool)
    first[:, 1:] = (terminated | truncated)[:, :-1]
    first[:, 0] = rng.random(B) < 0.3
    return first, terminated, truncated, rng.random((B, rows)) < 0.1


def reference_targets(window, n, gamma, clip, life_loss_terminal):
    """Per transition: the n-step return of its episode, G = sum_{k<m} gamma^k r_{t+k} + gamma^m
    [x_{t+m} not terminal] Z(x_{t+m}), m the first k <= n at which x_{t+k} ends the episode."""
    B = len(window["reward"])
    out = np.zeros((4, B))
    for b in range(B):
        if window["first"][b, 1]:  # x_{t+1} opens an episode: no transition t -> t+1
            continue
        ret, m = 0.0, 0
        for k in range(1, n + 1):
            ret += gamma ** (k - 1) * float(np.clip(window["reward"][b, k], -clip, clip))
            m = k
            terminal = window["terminated"][b, k] or (life_loss_terminal and window["life_lost"][b, k])
            if terminal or window["truncated"][b, k] or (k < n and window["first"][b, k + 1]):
                break
        terminal = window["terminated"][b, m] or (life_loss_terminal and window["life_lost"][b, m])
        out[:, b] = ret, 0.0 if terminal else gamma ** m, m, 1.0
    return out


@pytest.mark.parametrize("n,life_loss_terminal", [(1, False), (3, False), (3, True), (5, True)])
def test_n_step_targets_match_the_definition(n, life_loss_terminal):
    rng = np.random.default_rng(n)
    first, terminated, truncated, life_lost = random_flags(rng, 400, n + 1)
    window = {"reward": rng.normal(scale=2.0, size=(400, n + 1)).astype(np.float32), "first": first,
              "terminated": terminated, "truncated": truncated, "life_lost": life_lost}
    got = n_step_targets(window, n, 0.97, 1.0, life_loss_terminal)
    expected = reference_targets(window, n, 0.97, 1.0, life_loss_terminal)
    mask = expected[3] == 1
    np.testing.assert_array_equal(got.mask, expected[3])
    np.testing.assert_allclose(got.returns[mask], expected[0][mask], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.discounts[mask], expected[1][mask], rtol=1e-6)
    np.testing.assert_array_equal(got.bootstrap_rows[mask], expected[2][mask])
    assert 0 < mask.mean() < 1 and (got.discounts[mask] == 0).any() and (n == 1 or (got.bootstrap_rows[mask] < n).any())


def test_quantile_huber_loss_matches_the_papers_equation():
    rng = np.random.default_rng(1)
    B, N, N2, kappa = 4, 5, 7, 1.0
    theta = rng.normal(scale=2.0, size=(B, N)).astype(np.float32)
    taus = rng.random((B, N)).astype(np.float32)
    targets = rng.normal(scale=2.0, size=(B, N2)).astype(np.float32)
    mask = np.array([1, 1, 0, 1], np.float32)
    loss, metrics = quantile_huber_loss(theta, taus, targets, mask, kappa)
    per = np.zeros(B)
    for b in range(B):
        for i in range(N):
            for j in range(N2):
                d = targets[b, j] - theta[b, i]
                huber = 0.5 * d * d if abs(d) <= kappa else kappa * (abs(d) - 0.5 * kappa)
                per[b] += abs(taus[b, i] - (d < 0)) * huber / kappa / N2
    assert float(loss) == pytest.approx((per * mask).sum() / mask.sum(), rel=1e-5)
    assert float(metrics["q/mean"]) == pytest.approx((theta.mean(1) * mask).sum() / mask.sum(), rel=1e-5)


def make_agent(config=None, network=None, obs_shape=(4,), max_envs=4):
    config = config or IQNConfig(unroll_length=8, n_step=3, batch_size=6, num_tau_samples=8,
                                 num_tau_prime_samples=8, num_quantile_samples=8, min_replay_size=0)
    return IQNAgent(config, network or NetworkConfig(mlp_sizes=(16,)),
                    AgentContext(obs_shape, np.dtype(np.float32), ActionSpec.discrete(A), seed=0, max_envs=max_envs))


def image_batch(rng, B=6, T=8, shape=(10, 10)):
    first, terminated, truncated, life_lost = random_flags(rng, B, T + 1)
    first[0, 2] = first[1, 6] = True  # starts inside the first rows' stacks and later on
    return Unroll(observation=rng.normal(size=(B, T + 1, *shape)).astype(np.float32), first=first,
                  reward=rng.normal(size=(B, T + 1)).astype(np.float32), terminated=terminated, truncated=truncated,
                  life_lost=life_lost, action=rng.integers(0, A, (B, T + 1)).astype(np.int32), extras={},
                  state={"frames": rng.normal(size=(B, 3, *shape)).astype(np.float32)})


def test_each_windows_rows_carry_their_frame_stacks():
    """Rows t and t+m of a window, alone with the state `learn` gives them, read what steps t and
    t+m of the whole sequence read."""
    agent = make_agent(network=NetworkConfig(torso="minatar", jit_compile=False), obs_shape=(10, 10))
    rng = np.random.default_rng(2)
    for _ in range(5):
        batch = image_batch(rng)
        windows = agent.windows(batch)
        obs = np.swapaxes(batch.observation, 0, 1)
        unrolled, _ = agent.online.torso(obs, np.swapaxes(batch.first, 0, 1), batch.state)
        unrolled = np.swapaxes(unrolled.numpy(), 0, 1)  # [B, T+1, d]
        # each window is rows t..t+n of its sequence: find t from the frames
        t = np.array([next(s for s in range(9) if np.array_equal(batch.observation[b, s], windows["frames"][b, 0]))
                      for b in range(6)])
        for k in range(agent.config.n_step + 1):
            (row,) = agent._rows({name: windows[name] for name in ("frames", "first", "history")},
                                 np.full(6, k, np.int32))
            features, _ = agent.online.features(*row)
            np.testing.assert_allclose(features.numpy(), unrolled[np.arange(6), t + k], rtol=1e-4, atol=1e-5)


def test_epsilon_is_one_through_the_warm_up_then_falls_linearly():
    agent = make_agent(IQNConfig(unroll_length=8, batch_size=6, min_replay_size=100, exploration_steps=400,
                                 epsilon_end=0.1))
    for steps, expected in [(0, 1.0), (100, 1.0), (300, 1.0 - 0.9 * 0.5), (500, 0.1), (10_000, 0.1)]:
        agent.env_steps.assign(steps)
        assert float(agent.epsilon()) == pytest.approx(expected)


def test_acting_counts_training_steps_and_evaluation_envs_are_greedy():
    agent = make_agent()
    agent.online.out.b.assign([0.0, 5.0, 0.0])  # action 1 is greedy whatever the fractions drawn
    agent.assign_envs(2, 4, evaluation=True)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    ids, state = np.arange(4, dtype=np.int32), agent.initial_state(4)
    training, evaluation = set(), []
    for _ in range(60):
        actions, _, _ = agent.act(obs, np.zeros(4, np.float32), np.ones(4, bool), ids, state)
        training.update(int(a) for a in actions[:2])
        evaluation.extend(int(a) for a in actions[2:])
    assert training == set(range(A))  # epsilon 1 in the warm-up: every action
    # the greedy policy reads Q at fixed fractions: the same state, the same values
    first_q, again_q = (agent.policy(obs, np.zeros(4, np.float32), np.ones(4, bool), ids, state)[1] for _ in range(2))
    np.testing.assert_array_equal(first_q.numpy(), again_q.numpy())
    assert int(agent.env_steps) == 120  # the two training envs' steps only
    # epsilon 0.001: of 120 picks, 3 or more random ones come once in about 4,000 runs
    assert sum(a != 1 for a in evaluation) <= 2


@pytest.mark.parametrize("hidden", [0, 5])
def test_quantiles_follow_the_networks_equation(hidden):
    """Z_tau(x, a) against NumPy: psi = ReLU(W_psi cos(pi i tau) + b), then phi(x) * psi, through
    the optional hidden ReLU layer, then the output layer."""
    net = QuantileNet(NetworkConfig(torso="mlp", mlp_sizes=(6,)), (4,), A, embedding=7, hidden=hidden, seed=2)
    rng = np.random.default_rng(5)
    features, taus = rng.normal(size=(3, 6)).astype(np.float32), rng.random((3, 4)).astype(np.float32)
    got = net.quantiles(tf.constant(features), tf.constant(taus)).numpy()
    relu = lambda v: np.maximum(v, 0.0)  # noqa: E731
    expected = np.zeros((3, 4, A))
    for b in range(3):
        for m in range(4):
            cosines = np.cos(np.pi * np.arange(7) * taus[b, m])
            x = features[b] * relu(cosines @ net.embed.w.numpy() + net.embed.b.numpy())
            if hidden:
                x = relu(x @ net.hidden.w.numpy() + net.hidden.b.numpy())
            expected[b, m] = x @ net.out.w.numpy() + net.out.b.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden", [0, 16])
def test_learning_lowers_the_loss_and_copies_the_target_on_its_period(hidden):
    config = IQNConfig(unroll_length=8, n_step=3, batch_size=6, num_tau_samples=8, num_tau_prime_samples=8,
                       num_quantile_samples=8, learning_rate=3e-3, target_update_period=25, min_replay_size=0,
                       quantile_hidden=hidden)
    tf.random.set_seed(0)
    agent = make_agent(config, network=NetworkConfig(torso="minatar", jit_compile=False), obs_shape=(10, 10))
    batch = image_batch(np.random.default_rng(4))
    losses = []
    for _ in range(24):
        metrics = agent.learn(batch)
        losses.append(float(metrics["loss/total"]))
        assert float(metrics["skipped_steps"]) == 0
    differs = [not np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(agent.online.trainable_variables, agent.target.trainable_variables, strict=True)]
    assert any(differs)  # 24 steps: the target was copied at step 0 only
    agent.learn(batch)  # step 25 copies it
    for a, b in zip(agent.online.trainable_variables, agent.target.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    losses += [float(agent.learn(batch)["loss/total"]) for _ in range(23)]  # fractions are random: average
    assert np.mean(losses[-8:]) < 0.7 * np.mean(losses[:5])


def test_the_replay_ratio_counts_transitions():
    """Held at 8, a learner step of 32 transitions is owed for every 4 env steps."""
    agent = make_agent(IQNConfig(unroll_length=16, n_step=3, batch_size=32, min_replay_size=0))
    trainer = make_trainer(agent, None, None, "/CPU:0", agent.config, 0, None)
    new_steps = agent.layout.new_steps
    assert new_steps == 14 and trainer.config.steps_per_item == 14
    assert trainer.config.ratio * 1 / trainer.config.steps_per_item == pytest.approx(8.0)
    inserted_items = 40
    assert trainer.config.ratio * inserted_items / agent.batch_size == pytest.approx(40 * 14 / 4)


@pytest.mark.parametrize("change,message", [
    ({"n_step": 9}, "--n-step must be in 1..--unroll-length"),
    ({"num_tau_samples": 0}, "--num-tau-samples must be at least 1"),
    ({"kappa": 0.0}, "--kappa must be positive"),
    ({"quantile_hidden": -1}, "--quantile-hidden must be 0"),
    ({"epsilon_end": 1.5}, "--epsilon-end is a probability"),
])
def test_bad_settings_are_refused_in_one_line(change, message):
    with pytest.raises(UsageError, match=message):
        make_agent(IQNConfig(**{"unroll_length": 8, "batch_size": 6, **change}))
    with pytest.raises(UsageError, match="without --lstm-size"):
        make_agent(network=NetworkConfig(lstm_size=4))


class Steps:
    def __init__(self):
        self.losses: list[dict] = []

    def add_learner_step(self, losses: dict) -> None:
        self.losses.append(losses)


def test_iqn_learns_cartpole_through_replay_under_its_vector_defaults():
    """IQN's defaults for vector envs, the learner's inference path and the replay trainer in
    process: the mean of 50 episodes passes 150 within 60,000 env steps."""
    config = IQNConfig(**IQN_VECTOR.algorithm)
    agent = IQNAgent(config, NetworkConfig(**IQN_VECTOR.network, jit_compile=False),
                     AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0, max_envs=16))
    trainer = make_trainer(agent, None, Steps(), "/CPU:0", config, 0, None)

    def insert_and_train(batch):  # what the trainer's thread does, in this thread
        trainer.insert(batch)
        while trainer.may_train():
            trainer.train_one_batch()

    returns, steps = train(agent, "CartPole-v1", 16, 60_000, on_batch=insert_and_train, stop_return=150.0, window=50)
    assert np.mean(returns[-50:]) >= 150.0, (steps, np.mean(returns[-50:]))
    assert trainer.trained == pytest.approx(config.replay_ratio * (trainer.inserted - trainer.config.owed_from)
                                            * agent.layout.new_steps, abs=3 * agent.batch_size)


def test_checkpoint_replay_keeps_the_replay_and_its_ratio_counters():
    config = IQNConfig(unroll_length=8, n_step=3, batch_size=6, min_replay_size=0, checkpoint_replay=True)
    agent = make_agent(config, network=NetworkConfig(torso="minatar", jit_compile=False), obs_shape=(10, 10))
    trainer = make_trainer(agent, None, Steps(), "/CPU:0", config, 0, None)
    batch = image_batch(np.random.default_rng(5))
    trainer.insert(batch)
    trainer.train_one_batch()
    restored = make_trainer(agent, None, Steps(), "/CPU:0", config, 0, None)
    restored.restore(trainer.state())
    assert (len(restored.replay), restored.inserted, restored.trained) == (6, 6, 6)
    np.testing.assert_array_equal(restored.replay.storage["observation"][:6], batch.observation)
    np.testing.assert_array_equal(restored.replay.storage["state"]["frames"][:6], batch.state["frames"])
    assert make_trainer(agent, None, Steps(), "/CPU:0", IQNConfig(), 0, None).state() is None  # off by default
