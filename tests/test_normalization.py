"""Observation normalisation and reward scaling (server/normalization.py), checked against plain
NumPy loops of the equations, and as the learner's inference path applies them."""

import numpy as np
import pytest

from seedfleet.envs import StepBatch
from seedfleet.errors import UsageError
from seedfleet.server.normalization import (
    CLIP,
    EPSILON,
    Normalization,
    ObservationNormalizer,
    RewardScaler,
    RunningMeanStd,
    make_normalization,
)


def welford(samples: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """Welford's one-sample update, a sample at a time: n += 1, d = x - m, m += d / n,
    M2 += d (x - m); the population variance is M2 / n."""
    n, mean, m2 = 0, np.zeros_like(samples[0], np.float64), np.zeros_like(samples[0], np.float64)
    for x in samples:
        n += 1
        delta = x - mean
        mean = mean + delta / n
        m2 = m2 + delta * (x - mean)
    return mean, m2 / n, n


def test_running_moments_merged_by_batch_equal_welfords_sample_by_sample():
    rng = np.random.default_rng(0)
    stats = RunningMeanStd((3,))
    np.testing.assert_array_equal(stats.mean, 0.0)
    np.testing.assert_array_equal(stats.var, 1.0)  # before any sample: the identity
    seen = []
    for size in (1, 7, 0, 64, 2, 300, 1):  # an empty batch changes nothing
        batch = rng.normal([5.0, -2.0, 100.0], [0.1, 3.0, 40.0], (size, 3))
        stats.update(batch)
        seen.extend(batch)
        if seen:
            mean, var, n = welford(seen)
            assert stats.count == n
            np.testing.assert_allclose(stats.mean, mean, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(stats.var, var, rtol=1e-10)


def test_observations_are_normalised_by_training_rows_only_and_clipped():
    rng = np.random.default_rng(1)
    normalizer = ObservationNormalizer((2,))
    trained = []
    for _ in range(20):
        obs = rng.normal([3.0, -1.0], [2.0, 0.5], (8, 2)).astype(np.float32)
        obs[0] = 1e6  # an evaluation env's wild observation: normalised, never counted
        update = np.ones(8, bool)
        update[0] = False
        out = normalizer(obs, update)
        trained.extend(obs[1:].astype(np.float64))
        mean, var, _ = welford(trained)
        expected = np.clip((obs - mean.astype(np.float32)) / np.sqrt(var + EPSILON).astype(np.float32), -CLIP, CLIP)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        assert (out[0] == CLIP).all()
    np.testing.assert_allclose(normalizer.stats.mean, [3.0, -1.0], atol=1.0)  # 1e6 counted: about 5e4


def test_rewards_are_scaled_by_the_spread_of_each_envs_discounted_return():
    rng = np.random.default_rng(2)
    gamma, envs = 0.9, 4
    scaler = RewardScaler(capacity=10, discount=gamma)
    env_ids = np.array([7, 2, 5, 9])
    running = np.zeros(envs)
    seen = []
    for t in range(50):
        rewards = rng.normal(3.0, 2.0, envs).astype(np.float32)
        first = rng.random(envs) < 0.1 if t else np.ones(envs, bool)
        rewards[first] = 0.0  # a reset observation comes with no reward
        update = np.array([True, True, True, False])  # env 9 evaluates
        out = scaler(env_ids, rewards, first, update)
        for i in range(envs):  # G_t = gamma G_{t-1} + r_t, restarted where an episode opens
            running[i] = 0.0 if first[i] else gamma * running[i] + rewards[i]
        seen.extend(running[:3].copy())
        _, var, _ = welford([np.float64(g) for g in seen])
        np.testing.assert_allclose(out, np.clip(rewards / np.sqrt(var + EPSILON), -CLIP, CLIP), rtol=1e-5)


def test_statistics_round_trip_and_refuse_another_shape():
    a = Normalization(ObservationNormalizer((3,)), RewardScaler(4, 0.99))
    a.observations(np.arange(12, dtype=np.float32).reshape(4, 3), np.ones(4, bool))
    a.rewards(np.arange(4), np.ones(4, np.float32), np.zeros(4, bool), np.ones(4, bool))
    b = Normalization(ObservationNormalizer((3,)), RewardScaler(4, 0.99))
    b.restore(a.state())
    assert b.state() == a.state()
    probe = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(b.observations.apply(probe), a.observations.apply(probe))
    with pytest.raises(ValueError, match="shape"):
        Normalization(ObservationNormalizer((4,))).restore(a.state())
    with pytest.raises(ValueError, match="no rewards statistics"):
        Normalization(rewards=RewardScaler(4, 0.99)).restore({"observations": a.state()["observations"]})


def test_frames_and_boards_are_not_normalised():
    with pytest.raises(UsageError, match="--normalize-observations is for float observations"):
        make_normalization(True, False, "ALE/Pong-v5", (84, 84), np.dtype(np.uint8), 8, 0.99)
    assert not make_normalization(False, False, "CartPole-v1", (4,), np.dtype(np.float32), 8, 0.99)


class RecordingAgent:
    """Acts 0 everywhere and keeps what it was given, to see what inference hands an agent."""

    batch_size = 1

    def __init__(self, actions):
        from seedfleet.algorithms.agent import SequenceLayout

        self.layout, self.actions, self.extras_spec, self.seen = SequenceLayout(2), actions, {}, []

    def initial_state(self, batch_size):
        return {}

    def assign_envs(self, lo, hi, evaluation):
        pass

    def act(self, obs, reward, first, env_ids, state):
        import tensorflow as tf

        self.seen.append((np.array(obs), np.array(reward)))
        return tf.zeros([len(obs), *self.actions.row_shape], tf.float32), {}, {}


def test_unrolls_keep_what_the_agent_acted_on_and_returns_stay_the_envs_own():
    from seedfleet.actions import ActionSpec
    from seedfleet.server.env_slots import EnvSlots
    from seedfleet.server.inference import InferenceEngine, StepRequest
    from seedfleet.server.metrics import Metrics
    from seedfleet.server.unroll_queue import UnrollQueue

    actions = ActionSpec.box((1,), [-2.0], [2.0])
    agent = RecordingAgent(actions)
    slots = EnvSlots(4, agent.layout, (2,), np.dtype(np.float32), {}, agent.initial_state, actions=actions)
    queue, metrics = UnrollQueue(64, 1), Metrics(1)
    normalization = Normalization(ObservationNormalizer((2,)), RewardScaler(4, 0.99))
    engine = InferenceEngine(agent, slots, queue, metrics, "/CPU:0", normalization)
    engine.reset(0, 2)
    engine.reset(2, 4, evaluation=True)
    rng = np.random.default_rng(3)
    ids = np.arange(4, dtype=np.int32)
    raw_total = np.zeros(4)
    for t in range(6):
        obs = rng.normal(50.0, 5.0, (4, 2)).astype(np.float32)
        obs[2:] = 1e5  # evaluation envs' observations never move the statistics
        rewards = np.full(4, 0.0 if t == 0 else 100.0, np.float32)
        done = np.full(4, t == 5)
        engine.process([StepRequest(ids, StepBatch(obs, rewards, done, np.zeros(4, bool), np.full(4, t == 0)))])
        raw_total += rewards
    assert normalization.observations.stats.count == 12  # 2 training envs x 6 steps
    assert np.abs(normalization.observations.stats.mean - 50.0).max() < 10.0
    acted = np.concatenate([obs for obs, _ in agent.seen[-3:-1]])
    unrolls = [queue.get_batch(1, timeout_s=0) for _ in range(len(queue))]
    kept = np.concatenate([u.observation[0] for u in unrolls])
    assert np.abs(kept).max() <= CLIP and set(map(tuple, acted.round(5))) >= set(map(tuple, kept[-2:].round(5)))
    assert all(np.abs(u.reward).max() < 100.0 for u in unrolls)  # the scaled rewards are what is trained on
    returns = metrics.take_interval()["returns"]
    assert sorted(returns) == [500.0, 500.0]  # training envs' returns: the env's own rewards


def test_wild_float_observations_are_refused_where_the_space_has_no_bounds():
    """MuJoCo's observation spaces are unbounded: --max-abs-observation is the bound a stream
    must keep, so one actor's wild values never reach the statistics every env is normalised with."""
    from seedfleet.server.actor_port import observation_limits
    from seedfleet.server.assembly import env_config_for
    from seedfleet.server.config import LearnerConfig
    from seedfleet.v1 import actor_learner_pb2 as pb
    from seedfleet.wire import EnvSpec, WireError, decode_steps

    config = LearnerConfig(env="HalfCheetah-v5")
    spec = EnvSpec.from_proto(env_config_for(config)[0])
    low, high = observation_limits(config, spec)
    assert spec.obs_dtype == np.float32 and (low == -1e6).all() and (high == 1e6).all()
    ok = np.zeros((2, 17), np.float32)
    for value, refused in ((5e5, False), (2e6, True), (-3e38, True)):
        obs = ok.copy()
        obs[1, 3] = value
        steps = pb.Steps(env_ids=np.arange(2, dtype="<i4").tobytes(), observations=obs.tobytes(),
                         rewards=np.zeros(2, "<f4").tobytes(), terminated=bytes(2), truncated=bytes(2), first=bytes(2))
        if refused:
            with pytest.raises(WireError, match="--max-abs-observation"):
                decode_steps(steps, (0, 2), spec.obs_shape, spec.obs_dtype, bounds=(low, high))
        else:
            decode_steps(steps, (0, 2), spec.obs_shape, spec.obs_dtype, bounds=(low, high))
    assert observation_limits(LearnerConfig(env="ALE/Pong-v5"), EnvSpec("ALE/Pong-v5", (84, 84), np.dtype(np.uint8),
                                                                         spec.actions)) is None
