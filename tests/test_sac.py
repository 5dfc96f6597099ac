"""SAC's equations (algorithms/sac/loss.py) against NumPy written from the paper, and its agent
acting and learning on the learner's own path."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.optim import ADAM_BETA_2
from seedfleet.algorithms.sac.agent import ADAM_EPSILON, SACAgent
from seedfleet.algorithms.sac.config import SACConfig
from seedfleet.algorithms.sac.loss import (
    actor_loss,
    critic_loss,
    critic_targets,
    polyak_update,
    squashed_sample,
    temperature_loss,
)
from seedfleet.errors import UsageError

LOW, HIGH = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
CENTER, HALF = (HIGH + LOW) / 2, (HIGH - LOW) / 2


def squash(u: np.ndarray) -> np.ndarray:
    return CENTER + HALF * np.tanh(u)


def reference_log_prob(mean, log_std, u) -> np.ndarray:
    """log pi(a) by the change of variables, with the Jacobian da/du taken by central finite
    differences of the squashing itself, dimension by dimension (it is diagonal)."""
    h = 1e-5
    jacobian = (squash(u + h) - squash(u - h)) / (2 * h)
    std = np.exp(log_std)
    gaussian = -0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    return np.sum(gaussian - np.log(jacobian), axis=-1)


def test_the_squashed_log_probability_is_the_gaussians_less_the_log_jacobian():
    rng = np.random.default_rng(0)
    mean = rng.normal(0, 1.5, (64, 2))
    log_std = rng.uniform(-2, 0.5, (64, 2))
    noise = rng.normal(size=(64, 2))
    actions, log_prob = squashed_sample(*(tf.constant(x, tf.float64) for x in (mean, log_std, noise, CENTER, HALF)))
    u = mean + np.exp(log_std) * noise
    np.testing.assert_allclose(actions.numpy(), squash(u), rtol=1e-12)
    assert ((actions.numpy() >= LOW) & (actions.numpy() <= HIGH)).all()
    np.testing.assert_allclose(log_prob.numpy(), reference_log_prob(mean, log_std, u), rtol=1e-6, atol=1e-6)
    # far in the tails, where tanh(u) rounds to 1 in float32, the log-probability stays finite
    _, tail = squashed_sample(*(tf.constant(x, tf.float32) for x in ([[30.0, -30.0]], [[0.0, 0.0]], [[0.0, 0.0]],
                                                                     CENTER, HALF)))
    assert np.isfinite(tail.numpy()).all()


def test_the_policys_entropy_estimate_matches_monte_carlo_over_the_density():
    """-E[log pi(a)] from the squashed samples against a Monte Carlo estimate from NumPy alone."""
    mean, log_std = np.array([0.3, -0.8]), np.array([-0.5, 0.2])
    n = 200_000
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(n, 2))
    _, log_prob = squashed_sample(*(tf.constant(x, tf.float64) for x in (np.tile(mean, (n, 1)),
                                                                        np.tile(log_std, (n, 1)), noise, CENTER, HALF)))
    u = mean + np.exp(log_std) * rng.normal(size=(n, 2))  # fresh samples for the reference
    reference = -np.mean(reference_log_prob(mean, log_std, u))
    assert abs(-log_prob.numpy().mean() - reference) < 0.02


def test_critic_actor_and_temperature_losses_match_numpy_loops():
    rng = np.random.default_rng(2)
    n, gamma, alpha, target_entropy = 16, 0.99, 0.2, -2.0
    rewards, next_q1, next_q2, next_logp, q1, q2, logp = (rng.normal(size=n) for _ in range(7))
    terminal = rng.random(n) < 0.2
    mask = (rng.random(n) > 0.1).astype(np.float64)
    discounts = gamma * (1 - terminal)
    t = {k: tf.constant(v, tf.float64) for k, v in dict(rewards=rewards, discounts=discounts, next_q1=next_q1,
                                                         next_q2=next_q2, next_logp=next_logp, q1=q1, q2=q2,
                                                         logp=logp, mask=mask).items()}
    alpha_t = tf.constant(alpha, tf.float64)
    targets = critic_targets(t["rewards"], t["discounts"], t["next_q1"], t["next_q2"], t["next_logp"], alpha_t)
    expected_targets = np.array([rewards[i] + (0.0 if terminal[i] else gamma) *
                                 (min(next_q1[i], next_q2[i]) - alpha * next_logp[i]) for i in range(n)])
    np.testing.assert_allclose(targets.numpy(), expected_targets, rtol=1e-12)
    real = n  # means over the batch, cut transitions weighing 0
    np.testing.assert_allclose(critic_loss(t["q1"], t["q2"], targets, t["mask"]).numpy(),
                               sum(mask[i] * ((q1[i] - expected_targets[i]) ** 2 + (q2[i] - expected_targets[i]) ** 2)
                                   for i in range(n)) / real, rtol=1e-12)
    np.testing.assert_allclose(actor_loss(t["logp"], t["q1"], t["q2"], alpha_t, t["mask"]).numpy(),
                               sum(mask[i] * (alpha * logp[i] - min(q1[i], q2[i])) for i in range(n)) / real,
                               rtol=1e-12)
    log_alpha = tf.Variable(np.log(alpha), dtype=tf.float64)
    with tf.GradientTape() as tape:
        loss = temperature_loss(log_alpha, t["logp"], target_entropy, t["mask"])
    expected = sum(mask[i] * -alpha * (logp[i] + target_entropy) for i in range(n)) / real
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(loss, log_alpha).numpy(), expected, rtol=1e-12)  # d/dlog a of -a(...)


def test_polyak_moves_each_target_a_tau_share_of_the_way():
    online = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
    target = [tf.Variable([0.0, 0.0]), tf.Variable([[1.0]])]
    polyak_update(target, online, 0.1)
    np.testing.assert_allclose(target[0].numpy(), [0.1, 0.2], rtol=1e-6)
    np.testing.assert_allclose(target[1].numpy(), [[1.2]], rtol=1e-6)


def sac_agent(**overrides) -> SACAgent:
    config = SACConfig(**{"batch_size": 8, "learning_starts": 4, "updates_per_call": 1, **overrides})
    return SACAgent(config, NetworkConfig(mlp_sizes=(32, 32), jit_compile=False),
                    AgentContext((3,), np.dtype(np.float32), ActionSpec.box((1,), [-2.0], [2.0]), max_envs=8))


def test_sac_acts_randomly_then_from_its_actor_and_greedily_on_evaluation_envs():
    agent = sac_agent()
    agent.assign_envs(4, 8, evaluation=True)
    obs = np.random.default_rng(3).normal(size=(8, 3)).astype(np.float32)
    ids = np.arange(8, dtype=np.int32)
    args = (obs, np.zeros(8, np.float32), np.zeros(8, bool), ids, {})
    first, _, _ = agent.act(*args)
    assert int(agent.acted.numpy()) == 4  # training envs only
    greedy = agent.policy(*args)[0].numpy()
    np.testing.assert_allclose(first.numpy()[4:], greedy[4:], rtol=1e-6)  # evaluation envs: the mean
    assert (np.abs(first.numpy()) <= 2.0).all()
    later = np.stack([agent.act(*args)[0].numpy() for _ in range(3)])
    assert (np.abs(later) <= 2.0).all() and not np.allclose(later[0, :4], later[1, :4])


@pytest.mark.parametrize("correlation", [0.0, 0.9])
def test_exploration_noise_is_uniform_in_the_bounds_and_correlated_as_asked(correlation):
    """The random phase's actions a_t = 2 erf(e_t / sqrt 2) over many steps of 8 envs: uniform on
    [-2, 2] (mean 0, variance 4/3) at every correlation. For e_t an AR(1) process of N(0, 1)
    marginals, corr(e_t, e_{t+k}) = c^k, and a uniform transform of two normals of correlation r
    has correlation (6 / pi) arcsin(r / 2) (Pearson, 1907). An episode's first step starts the
    process afresh: its noise is uncorrelated with the previous step's."""
    steps, envs = 1_000, 8
    agent = sac_agent(learning_starts=10**9, exploration_correlation=correlation)
    obs = np.zeros((envs, 3), np.float32)
    actions = np.empty((steps, envs))
    first = np.zeros((steps, envs), bool)
    first[::50] = True  # an episode every 50 steps
    for t in range(steps):
        actions[t] = agent.act(obs, np.zeros(envs, np.float32), first[t], np.arange(envs, dtype=np.int32), {})[0][:, 0]

    def uniform_correlation(r: float) -> float:
        return 6.0 / np.pi * np.arcsin(r / 2.0)

    # an AR(1) series of lag-1 correlation r carries as much about its mean as n (1 - r) / (1 + r)
    # independent draws; 4 standard errors of the mean of a and of a^2 (variances 4/3 and 64/45)
    r1 = uniform_correlation(correlation)
    independent = actions.size * (1 - r1) / (1 + r1)
    assert abs(actions.mean()) < 4 * np.sqrt(4 / 3 / independent)
    assert abs(actions.var() - 4 / 3) < 4 * np.sqrt(64 / 45 / independent)

    def autocorrelation(lag: int, across_episodes: bool) -> float:
        pairs = [(actions[t - lag, e], actions[t, e]) for t in range(lag, steps) for e in range(envs)
                 if first[t - lag + 1:t + 1, e].any() == across_episodes]
        a, b = np.array(pairs).T
        return float(np.corrcoef(a, b)[0, 1])

    assert autocorrelation(1, False) == pytest.approx(uniform_correlation(correlation), abs=0.06)
    assert autocorrelation(2, False) == pytest.approx(uniform_correlation(correlation**2), abs=0.06)
    assert abs(autocorrelation(1, True)) < 0.45  # 152 pairs (sd 0.08); without the reset about 0.89 at c = 0.9


def test_an_exploration_correlation_of_one_or_more_is_one_clear_line():
    with pytest.raises(UsageError, match="--exploration-correlation must be in"):
        sac_agent(exploration_correlation=1.0)


@pytest.mark.parametrize("setting", [{"layer_norm": True}, {"feature_norm": True}, {"conv_norm": "map"},
                                     {"dense_units": 512}])
def test_torso_flags_sac_has_no_use_for_are_refused_not_ignored(setting):
    context = AgentContext((3,), np.dtype(np.float32), ActionSpec.box((1,), [-2.0], [2.0]), max_envs=8)
    with pytest.raises(UsageError, match="--critic-layer-norm"):
        SACAgent(SACConfig(), NetworkConfig(jit_compile=False, **setting), context)


def transitions(rng, n: int) -> Unroll:
    first = np.zeros((n, 2), bool)
    first[0, 1] = True  # a step into a reset observation: no transition
    terminated = np.zeros((n, 2), bool)
    terminated[1, 1] = True
    return Unroll(observation=rng.normal(size=(n, 2, 3)).astype(np.float32), first=first,
                  reward=rng.normal(size=(n, 2)).astype(np.float32), terminated=terminated,
                  truncated=np.zeros((n, 2), bool), life_lost=np.zeros((n, 2), bool),
                  action=rng.uniform(-2, 2, (n, 2, 1)).astype(np.float32), extras={}, state={})


@pytest.mark.parametrize("autotune", [True, False])
def test_a_learner_step_moves_critics_actor_temperature_and_targets(autotune):
    agent = sac_agent(autotune_alpha=autotune, tau=0.5)
    before = {name: [v.numpy().copy() for v in module.trainable_variables]
              for name, module in (("actor", agent.actor), ("critic", agent.critics[0]), ("target", agent.targets[0]))}
    alpha = float(tf.exp(agent.log_alpha))
    out = agent.learn(transitions(np.random.default_rng(4), 8))
    assert out["skipped_steps"].numpy() == 0 and out["priorities"].shape == (8,)
    for name, module in (("actor", agent.actor), ("critic", agent.critics[0]), ("target", agent.targets[0])):
        assert any(not np.allclose(a, b.numpy()) for a, b in zip(before[name], module.trainable_variables, strict=True))
    assert (float(tf.exp(agent.log_alpha)) != alpha) == autotune
    for target, online, old in zip(agent.targets[0].trainable_variables, agent.critics[0].trainable_variables,
                                   before["target"], strict=True):
        np.testing.assert_allclose(target.numpy(), 0.5 * online.numpy() + 0.5 * old, rtol=1e-5, atol=1e-6)


class QueuedNoise:
    """Stands in for an agent's generator: hands out the given arrays in turn."""

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = list(arrays)

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        array = self.arrays.pop(0)
        assert array.shape == shape
        return array


def test_updates_in_one_call_equal_as_many_calls_of_one_update():
    """K updates in one compiled call: update k takes the batch's transitions k, K + k, 2K + k, ...
    and their noise, and the variables end where K single-update calls leave them."""
    calls, looped = sac_agent(updates_per_call=1), sac_agent(updates_per_call=3)
    assert looped.batch_size == 24
    rng = np.random.default_rng(6)
    batch, noise = transitions(rng, 24), rng.standard_normal((8, 3, 2, 1))
    looped._rng = QueuedNoise([noise])
    calls._rng = QueuedNoise([noise[:, k:k + 1] for k in range(3)])
    out = looped.learn(batch)
    singles = [calls.learn(batch.map(lambda rows, k=k: rows[k::3])) for k in range(3)]
    for key in ("loss/critic", "loss/actor", "q/mean", "grad_norm/critic"):
        np.testing.assert_allclose(float(out[key]), np.mean([float(s[key]) for s in singles]), rtol=1e-5, err_msg=key)
    assert float(out["skipped_steps"]) == 0 and out["priorities"].shape == (24,)
    for name, module in calls.checkpointed().items():
        mine = module.variables if hasattr(module, "variables") else [module]
        theirs = looped.checkpointed()[name]
        theirs = theirs.variables if hasattr(theirs, "variables") else [theirs]
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("after", [True, False])
def test_the_actor_steps_against_the_critics_before_or_after_their_step_as_asked(after):
    """With `actor_after_critics` the actor's gradient is taken against the critics as their
    step of the same update left them (CleanRL's, jaxrl's and stable-baselines3's order), else
    against them before it. Adam's first step moves each weight by lr g / (|g| + eps'), so the
    actor's new weights tell which critics its gradient saw."""
    agent = sac_agent(q_learning_rate=0.1, actor_after_critics=after)
    rng = np.random.default_rng(11)
    batch, noise = transitions(rng, 8), rng.standard_normal((8, 1, 2, 1)).astype(np.float32)
    actor_before = [v.numpy().copy() for v in agent.actor.trainable_variables]
    alpha = float(tf.exp(agent.log_alpha))  # the temperature steps too, after the actor
    critics_before = [[v.numpy().copy() for v in c.trainable_variables] for c in agent.critics]
    agent._rng = QueuedNoise([noise])
    agent.learn(batch)
    critics_after = [[v.numpy().copy() for v in c.trainable_variables] for c in agent.critics]
    actor_after = [v.numpy() for v in agent.actor.trainable_variables]

    def actor_gradients(critic_values: list[list[np.ndarray]]) -> list[np.ndarray]:
        """The actor loss's gradient at the actor's starting weights against the given critics."""
        for variable, value in zip(agent.actor.trainable_variables, actor_before, strict=True):
            variable.assign(value)
        for critic, values in zip(agent.critics, critic_values, strict=True):
            for variable, value in zip(critic.trainable_variables, values, strict=True):
                variable.assign(value)
        obs = tf.constant(batch.observation[:, 0])
        mask = tf.constant(1.0 - batch.first[:, 1].astype(np.float32))
        with tf.GradientTape() as tape:
            mean, log_std = agent.actor(obs)
            pi, log_prob = squashed_sample(mean, log_std, noise[:, 0, 1], agent.center, agent.half_range)
            scaled = (pi - agent.center) / agent.half_range
            loss = actor_loss(log_prob, agent.critics[0](obs, scaled), agent.critics[1](obs, scaled),
                              tf.constant(alpha), mask)
        return [g.numpy() for g in tape.gradient(loss, agent.actor.trainable_variables)]

    def agrees(gradients: list[np.ndarray]) -> bool:
        """Whether every weight moved by Adam's first step, lr g / (|g| + eps'), to within float
        rounding; weights whose gradient is at rounding level are left out, as their sign is."""
        eps = ADAM_EPSILON / np.sqrt(1.0 - ADAM_BETA_2)  # Adam's epsilon as the first bias-corrected step sees it
        rate = agent.config.policy_learning_rate
        for after, before, g in zip(actor_after, actor_before, gradients, strict=True):
            clear = np.abs(g) > 1e-4 * np.abs(g).max()
            if not np.allclose((after - before)[clear], (-rate * g / (np.abs(g) + eps))[clear], rtol=1e-3, atol=1e-7):
                return False
        return True

    seen, unseen = (critics_after, critics_before) if after else (critics_before, critics_after)
    assert agrees(actor_gradients(seen))
    assert not agrees(actor_gradients(unseen))


def test_layer_normalised_critics_train_and_checkpoint_their_norms():
    """`critic_layer_norm`: the critics and their targets carry a norm per hidden layer, which the
    critics' step moves and the targets follow by Polyak averaging; the actor has none."""
    agent = sac_agent(critic_layer_norm=True, tau=0.5)
    assert agent.actor.torso.norms is None
    assert all(len(critic.torso.norms) == 2 for critic in (*agent.critics, *agent.targets))
    scale = agent.critics[0].torso.norms[0].scale
    assert any(v is scale for v in agent.critic_variables)
    before = scale.numpy().copy()
    rng = np.random.default_rng(0)
    batch = transitions(rng, agent.batch_size)
    agent.learn(batch)
    assert not np.array_equal(scale.numpy(), before)
    target_scale = agent.targets[0].torso.norms[0].scale.numpy()
    np.testing.assert_allclose(target_scale, 0.5 * scale.numpy() + 0.5 * before, rtol=1e-6)
