"""The learner's health checks (policy lag, approx KL, clip fraction, explained variance,
advantage moments), each against NumPy written from its definition, and the minibatch
schedule of several passes over a batch."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala import vtrace
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import explained_variance, impala_loss, policy_shift, transitions
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.server.metrics import Metrics, Reporter
from tests.test_fixed_targets import GAMMA, LAMBDA, RHO_BAR, numpy_targets
from tests.test_impala import make_batch, time_major

TWO_ACTIONS = ActionSpec.discrete(2)


def make_agent(**overrides) -> ImpalaAgent:
    config = ImpalaConfig(**{"unroll_length": 6, "batch_size": 4, **overrides})
    context = AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0)
    return ImpalaAgent(config, NetworkConfig(jit_compile=False), context)


def test_approx_kl_and_clip_fraction_follow_their_definitions():
    rng = np.random.default_rng(0)
    log_ratio = rng.normal(0, 0.2, (7, 5)).astype(np.float32)
    mask = (rng.random((7, 5)) > 0.2).astype(np.float32)
    log_ratio[mask == 0] = 50.0  # a cut transition's ratio is never counted
    r = np.exp(log_ratio)
    kl = sum((r[t, b] - 1) - log_ratio[t, b] for t in range(7) for b in range(5) if mask[t, b]) / mask.sum()
    clipped = sum(abs(r[t, b] - 1) > 0.1 for t in range(7) for b in range(5) if mask[t, b]) / mask.sum()
    truncated = sum(r[t, b] > 1.0 for t in range(7) for b in range(5) if mask[t, b]) / mask.sum()
    surrogate = policy_shift(tf.constant(log_ratio), tf.constant(mask), 0.1, 1.0)
    np.testing.assert_allclose(surrogate["policy/approx_kl"].numpy(), kl, rtol=1e-4)
    np.testing.assert_allclose(surrogate["policy/clip_fraction"].numpy(), clipped, rtol=1e-6)
    assert 0 < clipped < 1 and clipped != truncated  # the two kinds of clipping are told apart
    impala = policy_shift(tf.constant(log_ratio), tf.constant(mask), 0.0, 1.0)  # rho truncated at rho_bar = 1
    np.testing.assert_allclose(impala["policy/clip_fraction"].numpy(), truncated, rtol=1e-6)
    same = policy_shift(tf.zeros([7, 5]), tf.constant(mask), 0.1, 1.0)
    assert same["policy/approx_kl"].numpy() == 0.0 and same["policy/clip_fraction"].numpy() == 0.0


def test_explained_variance_is_one_for_a_perfect_value_zero_for_the_mean_nan_for_constant_targets():
    rng = np.random.default_rng(1)
    targets = rng.normal(size=(6, 4)).astype(np.float32)
    mask = np.ones((6, 4), np.float32)
    mask[0, 0] = 0.0
    targets[0, 0] = 1e6  # masked out: must not swamp the variance
    real = mask > 0
    noisy = targets + rng.normal(0, 0.5, size=targets.shape).astype(np.float32)
    expected = 1 - np.var((targets - noisy)[real]) / np.var(targets[real])

    def ev(values, y=targets):
        return float(explained_variance(tf.constant(y), tf.constant(values, tf.float32), tf.constant(mask)))

    np.testing.assert_allclose(ev(noisy), expected, rtol=1e-4)
    assert ev(targets) == pytest.approx(1.0)
    assert ev(np.full_like(targets, targets[real].mean())) == pytest.approx(0.0, abs=1e-5)
    assert np.isnan(ev(noisy, np.full_like(targets, 3.0)))


@pytest.mark.parametrize("normalize", [False, True])
def test_advantage_moments_are_taken_before_normalisation(normalize):
    agent = make_agent(normalize_advantages=normalize, reward_clip=0.0)
    batch = time_major(make_batch(np.random.default_rng(2)))
    _, metrics = impala_loss(agent.net, agent.config, batch)
    # the V-trace advantages from the same net, taken over the real transitions only
    logits, values, _ = agent.net(batch.observation, batch.first, {})
    rewards, discounts, real = transitions(batch, agent.config)
    actions = batch.action[:-1]
    logp = tf.nn.log_softmax(logits[:-1]).numpy()
    behaviour = tf.nn.log_softmax(batch.extras["policy"][:-1]).numpy()
    pick = np.take_along_axis
    log_rhos = (pick(logp, actions[..., None], -1) - pick(behaviour, actions[..., None], -1))[..., 0]
    log_rhos = np.where(real.numpy(), log_rhos, -np.inf)
    out = vtrace.from_importance_weights(log_rhos, discounts, rewards, values[:-1], values[-1])
    advantages = out.pg_advantages.numpy()[real.numpy()]
    np.testing.assert_allclose(metrics["advantage/mean"].numpy(), advantages.mean(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(metrics["advantage/std"].numpy(), advantages.std(), rtol=1e-4)
    assert advantages.std() > 0.1  # normalising would have made it 1


def _acted(agent: ImpalaAgent, batch):
    """The batch as `agent` acts it now: its logits and its update count as the policy version."""
    obs = batch.observation.reshape(-1, batch.observation.shape[-1])
    n = len(obs)
    actions, extras, _ = agent.act(obs, np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, np.int32), {})
    rows = batch.observation.shape[:2]
    return batch._replace(extras={k: v.numpy().reshape(*rows, *v.shape[1:]) for k, v in extras.items()})


def test_the_policy_lag_counts_learner_steps_between_acting_and_training():
    agent = make_agent(epochs=2, minibatches=2, clip_ratio=0.1)  # 4 updates per learner step
    old = _acted(agent, make_batch(np.random.default_rng(3)))
    assert (old.extras["policy_version"] == 0).all()
    first = agent.learn(old)
    # first pass: minibatch 1 trains 0 updates after acting, minibatch 2 one update (1/4 learner step)
    assert first["policy/lag"] == pytest.approx(0.125)
    assert first["policy/lag_max"] == pytest.approx(0.25)
    fresh = _acted(agent, make_batch(np.random.default_rng(4)))
    assert (fresh.extras["policy_version"] == 4).all()
    stale = agent.learn(old)  # acted 4 updates (one learner step) before this step began
    assert stale["policy/lag"] == pytest.approx((4 / 4 + 5 / 4) / 2)
    assert agent.learn(fresh)["policy/lag"] == pytest.approx((4 / 4 + 5 / 4) / 2)  # 8 and 9 updates after 4


def test_each_pass_cuts_the_batch_into_minibatches_of_whole_unrolls_in_a_fresh_order():
    """Two passes of two minibatches equal four plain steps on the rows the agent's order picks."""
    minibatched = make_agent(epochs=2, minibatches=2, clip_ratio=0.1, learning_rate=1e-2)
    plain = make_agent(clip_ratio=0.1, learning_rate=1e-2, batch_size=2)
    batch = _acted(minibatched, make_batch(np.random.default_rng(5)))
    rng = np.random.default_rng(0)  # the agent's order: its rng, seeded with the agent's seed
    minibatched.learn(batch)
    for _ in range(2):
        for rows in np.array_split(rng.permutation(4), 2):
            plain.learn(batch.map(lambda v, rows=rows: v[rows]))
    assert int(minibatched.optimizer.iterations) == int(plain.optimizer.iterations) == 4
    for a, b in zip(minibatched.net.trainable_variables, plain.net.trainable_variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    moved = make_agent(clip_ratio=0.1, learning_rate=1e-2, batch_size=2)
    for lo in (0, 2, 0, 2):  # the same steps in a fixed order end elsewhere
        moved.learn(batch.map(lambda v, lo=lo: v[lo:lo + 2]))
    assert any(np.abs(a.numpy() - b.numpy()).max() > 1e-4
               for a, b in zip(moved.net.trainable_variables, plain.net.trainable_variables, strict=True))


def test_a_batch_that_does_not_split_into_minibatches_is_refused():
    with pytest.raises(ValueError, match="minibatches"):
        make_agent(minibatches=3)


def test_progress_lines_average_the_learner_metrics_over_the_interval(tmp_path):
    metrics = Metrics(frame_skip=1)
    metrics.add_learner_step({"policy/lag": 1.0, "policy/approx_kl": 0.02, "value/explained_variance": float("nan"),
                              "grad_norm": 0.5})
    metrics.add_learner_step({"policy/lag": 3.0, "policy/approx_kl": 0.04, "value/explained_variance": 0.5,
                              "grad_norm": 2.5})
    reporter = Reporter(metrics, tmp_path, lambda: 0)
    reporter.report()
    metrics.add_learner_step({"policy/lag": 7.0})
    reporter.report()
    reporter.report()  # no learner step in this interval: empty cells, not the last values again
    rows = [line.split(",") for line in (tmp_path / "progress.csv").read_text().splitlines()]
    header, first, second, third = rows
    row = [dict(zip(header, r, strict=True)) for r in (first, second, third)]
    assert float(row[0]["policy_lag"]) == 2.0 and float(row[0]["approx_kl"]) == pytest.approx(0.03)
    assert float(row[0]["explained_variance"]) == 0.5  # the NaN of the first step left out of the mean
    assert float(row[0]["grad_norm"]) == pytest.approx(1.5)  # before clipping: what --max-grad-norm acts on
    assert row[0]["clip_fraction"] == ""  # never reported
    assert float(row[1]["policy_lag"]) == 7.0 and row[1]["approx_kl"] == ""
    assert row[2]["policy_lag"] == ""


def test_a_resumed_run_keeps_the_columns_its_progress_file_began_with(tmp_path):
    old_header = "elapsed_s,frames,env_steps,frames_per_s,mean_return_last_100,episodes,learner_steps," \
                 "learner_steps_per_s,mean_eval_return_last_100,replay_size,memory_gib"
    (tmp_path / "progress.csv").write_text(old_header + "\n1.0,4,1,4.0,nan,0,0,0.00,nan,nan,0.100\n")
    metrics = Metrics(frame_skip=4)
    metrics.add_learner_step({"policy/lag": 1.0})
    Reporter(metrics, tmp_path, lambda: 0).report()
    lines = (tmp_path / "progress.csv").read_text().splitlines()
    assert lines[0] == old_header and all(len(line.split(",")) == 11 for line in lines)


def test_the_learning_rate_decay_counts_learner_steps_whatever_the_passes_and_minibatches():
    agent = ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, epochs=2, minibatches=2, clip_ratio=0.1),
                        NetworkConfig(jit_compile=False), AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0),
                        decay_steps=10)
    batch = _acted(agent, make_batch(np.random.default_rng(6)))
    for _ in range(5):
        metrics = agent.learn(batch)
    assert int(agent.optimizer.iterations) == 20  # 5 learner steps x 2 passes x 2 minibatches
    assert metrics["learning_rate"] == pytest.approx(0.5e-3, rel=1e-5)  # half of 1e-3 left after 5 of 10


def test_a_trainer_adds_its_own_columns_and_only_its_own(tmp_path):
    """progress.csv has the columns of the trainer it reports on (R2D2's replay size), and
    none of another algorithm's."""
    class Replaying:
        PROGRESS_COLUMNS = ("replay_size", "replay_bytes_per_step")

        def progress(self):
            return {"replay_size": 1234.0, "replay_bytes_per_step": 56.5}

    (tmp_path / "r2d2").mkdir()
    (tmp_path / "vtrace").mkdir()
    line = Reporter(Metrics(frame_skip=1), tmp_path / "r2d2", lambda: 0, trainer=Replaying()).report()
    header, row = (tmp_path / "r2d2" / "progress.csv").read_text().splitlines()
    values = dict(zip(header.split(","), row.split(","), strict=True))
    assert (values["replay_size"], values["replay_bytes_per_step"]) == ("1234", "56.5")
    assert "replay size 1,234" in line
    Reporter(Metrics(frame_skip=1), tmp_path / "vtrace", lambda: 0).report()
    assert "replay" not in (tmp_path / "vtrace" / "progress.csv").read_text()


def test_the_learning_rate_can_fall_to_0_past_the_frame_budget(monkeypatch):
    """--learning-rate-decay-frames sets the schedule's end apart from --max-frames (a 40M-frame
    schedule, as CleanRL's PPO anneals over 10M agent steps, in a run read at 20M)."""
    import dataclasses

    from seedfleet.algorithms.impala import builder

    monkeypatch.setattr(builder, "ImpalaAgent", lambda config, network, context, decay_steps: decay_steps)
    config = ImpalaConfig(unroll_length=10, batch_size=8, learning_rate_decay=True)
    context = AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0, max_frames=20_000_000, frame_skip=4)
    to_budget = builder.make_agent(config, NetworkConfig(), context)
    longer = builder.make_agent(dataclasses.replace(config, learning_rate_decay_frames=40_000_000), NetworkConfig(),
                                context)
    assert to_budget == 20_000_000 // (4 * 8 * 10) and longer == 2 * to_budget
    with pytest.raises(ValueError, match="set --max-frames"):
        builder.make_agent(config, NetworkConfig(), AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0))


@pytest.mark.parametrize("minibatches", [1, 2, 4])
def test_explained_variance_is_the_whole_batchs_however_it_is_cut_into_minibatches(minibatches):
    """With the learning rate at 0 every step sees the values the batch began with, so the
    reported figure must be 1 - Var(v - V) / Var(v) over all the batch's real transitions, one
    NumPy loop over them, not a mean of each minibatch's own (which misses the spread between
    a minibatch's unrolls and the rest)."""
    agent = make_agent(fixed_targets=True, minibatches=minibatches, learning_rate=0.0, clip_ratio=0.1,
                       discount=GAMMA, vtrace_lambda=LAMBDA, clip_rho_threshold=RHO_BAR,
                       clip_pg_rho_threshold=RHO_BAR, reward_clip=0.0)
    batch = make_batch(np.random.default_rng(11))
    batch.reward[2:] += 5.0  # two unrolls earn more than the other two: spread between minibatches
    start_logits, start_values = agent._step_start(batch)
    vs, _, mask = numpy_targets(batch, start_logits, start_values)
    targets, residuals = [], []
    for b in range(mask.shape[0]):
        for t in range(mask.shape[1]):
            if mask[b, t]:
                targets.append(vs[b, t])
                residuals.append(vs[b, t] - start_values[b, t])

    def variance(xs):
        mean = sum(xs) / len(xs)
        return sum((x - mean) ** 2 for x in xs) / len(xs)

    expected = 1.0 - variance(residuals) / variance(targets)
    np.testing.assert_allclose(agent.learn(batch)["value/explained_variance"], expected, rtol=1e-3, atol=1e-4)
