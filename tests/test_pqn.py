"""PQN: Q(lambda) targets against a forward-view NumPy reference, epsilon-greedy acting and its
schedule, single-transition minibatches with their frame stacks, a step that lowers the loss,
and CartPole learnt in process."""

import numpy as np
import pytest
from in_process import train

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.pqn.agent import PQNAgent
from seedfleet.algorithms.pqn.config import PQN_VECTOR, PQNConfig
from seedfleet.algorithms.pqn.loss import q_lambda_targets
from seedfleet.errors import UsageError

A = 3


def make_batch(rng, T=8, B=5, obs_shape=(4,)):
    """Batch-major unrolls with an episode start, a termination, a truncation and a lost life."""
    first = np.zeros((B, T + 1), bool)
    first[:, 0] = True
    terminated = np.zeros((B, T + 1), bool)
    truncated = np.zeros((B, T + 1), bool)
    life_lost = np.zeros((B, T + 1), bool)
    terminated[1, 3], first[1, 4] = True, True  # x_3 ends an episode, x_4 opens the next
    truncated[2, 5], first[2, 6] = True, True  # x_5 ends one by the time limit
    life_lost[3, 2] = True  # the game goes on after a lost life
    terminated[4, T] = True  # the unroll's last row ends an episode
    return Unroll(
        observation=rng.normal(size=(B, T + 1, *obs_shape)).astype(np.float32),
        first=first,
        reward=rng.normal(scale=2.0, size=(B, T + 1)).astype(np.float32),
        terminated=terminated, truncated=truncated, life_lost=life_lost,
        action=rng.integers(0, A, (B, T + 1)).astype(np.int32),
        extras={"value": rng.normal(size=(B, T + 1)).astype(np.float32),
                "policy_version": np.zeros((B, T + 1), np.int64)},
        state={},
    )


def forward_view_targets(batch, config: PQNConfig) -> np.ndarray:
    """The lambda-return as the weighted sum of n-step returns (Sutton & Barto, eq. 12.3, truncated):

      G_t = (1 - lambda) sum_{n=1}^{H-1} lambda^(n-1) G_t^(n) + lambda^(H-1) G_t^(H),
      G_t^(n) = sum_{k<n} (prod_{j<k} d_{t+j}) r_{t+k} + (prod_{j<n} d_{t+j}) V_{t+n},

    where d_s = gamma, 0 at a terminal (or lost life), and the horizon H counts the transitions
    from t on that exist in the unroll and are real (the steps after a truncation are not)."""
    B, rows = batch.action.shape
    T = rows - 1
    targets = np.zeros((B, T))
    for b in range(B):
        reward = np.clip(batch.reward[b], -config.reward_clip, config.reward_clip) * config.reward_scale
        for t in range(T):
            horizon = 1
            while t + horizon < T and not batch.first[b, t + horizon + 1]:
                horizon += 1

            def n_step(n, b=b, t=t, reward=reward):
                total, scale = 0.0, 1.0
                for k in range(n):
                    total += scale * reward[t + k + 1]
                    row = t + k + 1
                    ends = batch.terminated[b, row] or (config.life_loss_terminal and batch.life_lost[b, row])
                    scale *= 0.0 if ends else config.discount
                return total + scale * batch.extras["value"][b, t + n]

            lam = config.q_lambda
            weighted = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, horizon))
            targets[b, t] = weighted + lam ** (horizon - 1) * n_step(horizon)
    return targets


@pytest.mark.parametrize("q_lambda", [0.0, 0.65, 1.0])
@pytest.mark.parametrize("life_loss_terminal", [False, True])
def test_q_lambda_targets_match_the_forward_view(q_lambda, life_loss_terminal):
    batch = make_batch(np.random.default_rng(0))
    config = PQNConfig(q_lambda=q_lambda, life_loss_terminal=life_loss_terminal, reward_clip=1.5, reward_scale=0.5)
    targets, mask = q_lambda_targets(batch, config)
    real = ~batch.first[:, 1:]
    np.testing.assert_array_equal(mask, real.astype(np.float32))
    np.testing.assert_allclose(targets[real], forward_view_targets(batch, config)[real], rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_one_step_q_learning():
    batch = make_batch(np.random.default_rng(1))
    targets, _ = q_lambda_targets(batch, PQNConfig(q_lambda=0.0, reward_clip=0.0))
    ends = batch.terminated[:, 1:]
    expected = batch.reward[:, 1:] + 0.99 * (1 - ends) * batch.extras["value"][:, 1:]
    np.testing.assert_allclose(targets[~batch.first[:, 1:]], expected[~batch.first[:, 1:]], rtol=1e-6)


def make_agent(config=None, network=None, obs_shape=(4,), max_envs=4, **context):
    return PQNAgent(config or PQNConfig(unroll_length=8, batch_size=5, minibatches=4),
                    network or NetworkConfig(mlp_sizes=(16,), layer_norm=True),
                    AgentContext(obs_shape, np.dtype(np.float32), ActionSpec.discrete(A), seed=0, max_envs=max_envs,
                                 **context))


def test_epsilon_falls_linearly_over_the_exploration_frames_then_stays():
    # a batch of 5 x 8 transitions, 4 frames each, in 2 x 4 updates: 20 frames per update
    agent = make_agent(PQNConfig(unroll_length=8, batch_size=5, minibatches=4, exploration_frames=400,
                                 epsilon_start=1.0, epsilon_end=0.1), frame_skip=4)
    for updates, expected in [(0, 1.0), (10, 1.0 - 0.9 * 0.5), (20, 0.1), (50, 0.1)]:
        agent.optimizer.iterations.assign(updates)
        assert float(agent.epsilon()) == pytest.approx(expected)


def test_acting_is_epsilon_greedy_and_evaluation_envs_are_greedy():
    agent = make_agent(PQNConfig(unroll_length=8, batch_size=5, minibatches=4, epsilon_start=1.0))
    agent.assign_envs(2, 4, evaluation=True)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    ids = np.arange(4, dtype=np.int32)
    state = agent.initial_state(4)
    training, greedy = set(), []
    for _ in range(60):
        actions, extras, _ = agent.act(obs, np.zeros(4, np.float32), np.ones(4, bool), ids, state)
        q, _ = agent.policy(obs, np.zeros(4, np.float32), np.ones(4, bool), ids, state)[1:]
        np.testing.assert_allclose(extras["value"].numpy(), q.numpy().max(axis=1), rtol=1e-6)
        training.update(int(a) for a in actions[:2])
        greedy.extend(int(a) == int(np.argmax(q[i])) for i, a in zip((2, 3), actions.numpy()[2:], strict=True))
    assert training == set(range(A))  # epsilon 1: every action
    # epsilon 0.001: of 120 picks, 3 or more random ones come once in about 4,000 runs
    assert greedy.count(False) <= 2
    agent.assign_envs(2, 4, evaluation=False)
    assert not agent.evaluating.numpy().any()


def test_single_transitions_carry_their_frame_stacks():
    """Each transition alone, with the state `learn` gives it, has the Q values step t of its unroll has."""
    agent = make_agent(network=NetworkConfig(torso="minatar", jit_compile=False), obs_shape=(10, 10))
    batch = make_batch(np.random.default_rng(2), obs_shape=(10, 10))
    history = np.random.default_rng(3).normal(size=agent.initial_state(5)["frames"].shape).astype(np.float32)
    batch = batch._replace(state={"frames": history})
    transitions = agent._transitions(batch)
    as_rows, _ = agent.net(transitions["observation"][None], transitions["first"][None], transitions["state"])
    obs = np.swapaxes(batch.observation, 0, 1)
    unrolled, _ = agent.net(obs, np.swapaxes(batch.first, 0, 1), batch.state)
    expected = np.swapaxes(unrolled.numpy()[:-1], 0, 1).reshape(-1, A)
    np.testing.assert_allclose(as_rows.numpy()[0], expected, rtol=1e-4, atol=1e-5)
    targets, _ = q_lambda_targets(batch, agent.config)
    np.testing.assert_allclose(transitions["target"], targets.reshape(-1))


def test_learning_lowers_the_loss_and_reports_its_metrics():
    agent = make_agent(PQNConfig(unroll_length=8, batch_size=5, minibatches=4, optimizer="adam",
                                 learning_rate=3e-3, learning_rate_decay=False))
    batch = make_batch(np.random.default_rng(4))
    losses = [agent.learn(batch)["loss/total"] for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    metrics = agent.learn(batch)
    # the batch was acted at 240 updates of 5 frames (5 x 8 transitions in 8 updates)
    assert metrics["skipped_steps"] == 0 and metrics["policy/epsilon"] == pytest.approx(1.0 - 0.99 * 240 * 5 / 2e6)
    assert int(agent.optimizer.iterations) == 31 * 8
    for name in ("q/mean", "value/explained_variance", "policy/lag", "grad_norm", "learning_rate"):
        assert np.isfinite(metrics[name]), name


@pytest.mark.parametrize("change,message", [
    ({"minibatches": 3}, "do not split into 3 equal minibatches"),
    ({"q_lambda": 1.5}, "--q-lambda is in"),
    ({"epsilon_end": -0.1}, "--epsilon-end is a probability"),
])
def test_bad_settings_are_refused_in_one_line(change, message):
    with pytest.raises(UsageError, match=message):
        make_agent(PQNConfig(**{"unroll_length": 8, "batch_size": 5, "minibatches": 4, **change}))
    with pytest.raises(UsageError, match="without --lstm-size"):
        make_agent(network=NetworkConfig(lstm_size=4))


def test_pqn_learns_cartpole_under_its_vector_defaults():
    """PQN's defaults for vector envs, the learner's own inference path in process: the mean of 100
    episodes passes 150 within 300,000 env steps (purejaxql reaches 500 in 500,000)."""
    config = PQNConfig(**PQN_VECTOR.algorithm)
    network = NetworkConfig(**PQN_VECTOR.network)
    agent = PQNAgent(config, network, AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0,
                                                   max_envs=32, max_frames=500_000))
    returns, steps = train(agent, "CartPole-v1", 32, 300_000, stop_return=150.0, window=100)
    assert np.mean(returns[-100:]) >= 150.0, (steps, np.mean(returns[-100:]))
