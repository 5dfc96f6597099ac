"""The IMPALA loss: episode boundaries, masking, and learning on a fixed batch."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.impala import vtrace
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import (
    clipped_surrogate_loss,
    impala_loss,
    normalized,
    one_step_advantages,
    transitions,
)
from seedfleet.algorithms.network_config import NetworkConfig

TWO_ACTIONS = ActionSpec.discrete(2)


def make_batch(rng, T=6, B=4, obs_dim=3, num_actions=2):
    """Batch-major unrolls, as the learner's queue hands them out."""
    first = np.zeros((B, T + 1), bool)
    first[:, 0] = True
    first[1, 4] = True
    terminated = np.zeros((B, T + 1), bool)
    terminated[1, 3] = True
    truncated = np.zeros((B, T + 1), bool)
    truncated[2, 2] = True
    first[2, 3] = True
    return Unroll(
        observation=rng.normal(size=(B, T + 1, obs_dim)).astype(np.float32),
        first=first,
        reward=rng.normal(size=(B, T + 1)).astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        life_lost=np.zeros((B, T + 1), bool),
        action=rng.integers(0, num_actions, (B, T + 1)).astype(np.int32),
        extras={"policy": rng.normal(size=(B, T + 1, num_actions)).astype(np.float32),
                "policy_version": np.zeros((B, T + 1), np.int64)},
        state={},
    )


def time_major(batch):
    return batch.map(lambda v: np.swapaxes(v, 0, 1), state=False)


def make_agent(**overrides):
    config = ImpalaConfig(unroll_length=6, batch_size=4, **overrides)
    return ImpalaAgent(config, NetworkConfig(), AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0))


def test_termination_stops_bootstrapping_truncation_bootstraps_resets_are_cut():
    batch = time_major(make_batch(np.random.default_rng(0)))
    config = ImpalaConfig(discount=0.9, reward_clip=0.0)
    rewards, discounts, real = transitions(batch, config)
    discounts, real = discounts.numpy(), real.numpy()
    # transition t -> t+1 reads row t+1
    assert discounts[2, 1] == 0.0 and real[2, 1]  # into a terminal observation
    assert discounts[1, 2] == np.float32(0.9) and real[1, 2]  # into a truncated one: bootstrap
    assert discounts[2, 2] == 0.0 and not real[2, 2]  # into the reset observation: cut
    assert discounts[3, 1] == 0.0 and not real[3, 1]
    assert real.sum() == real.size - 2
    np.testing.assert_allclose(rewards.numpy(), batch.reward[1:])


def test_on_policy_targets_bootstrap_a_truncation_from_its_last_observation_and_a_termination_from_nothing():
    """The loss's value targets on an on-policy batch (rho = 1, lambda = 1) against a NumPy loop
    over each episode's rewards: at a time limit the return goes on as gamma V(last observation),
    at a termination it stops, and nothing crosses into the episode after either."""
    rng = np.random.default_rng(5)
    gamma, T = 0.9, 6
    batch = make_batch(rng, T=T)
    config = ImpalaConfig(discount=gamma, reward_clip=0.0)
    tm = time_major(batch)
    rewards, discounts, real = transitions(tm, config)
    values = rng.normal(size=(T + 1, 4)).astype(np.float32)
    log_rhos = np.where(real.numpy(), 0.0, -np.inf).astype(np.float32)
    targets = vtrace.from_importance_weights(log_rhos, discounts, rewards, values[:-1], values[-1],
                                             clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, lambda_=1.0)
    for b in range(4):
        for s in range(T):
            if batch.first[b, s + 1]:  # s -> s+1 is no transition: the target is V(x_s) itself
                expected = values[s, b]
            else:
                expected, weight, t = 0.0, 1.0, s
                while True:  # sum rewards along the episode until it ends or the unroll does
                    expected += weight * batch.reward[b, t + 1]
                    if batch.terminated[b, t + 1]:
                        break
                    if batch.truncated[b, t + 1] or t + 1 == T:  # bootstrap from the last observation
                        expected += weight * gamma * values[t + 1, b]
                        break
                    weight *= gamma
                    t += 1
            assert targets.vs.numpy()[s, b] == pytest.approx(expected, rel=1e-5, abs=1e-5), (s, b)
    assert batch.truncated[2, 2] and batch.terminated[1, 3]  # the batch holds one of each


def test_a_lost_life_is_terminal_for_training_only_when_asked():
    batch = time_major(make_batch(np.random.default_rng(0)))
    batch.life_lost[4, 0] = True  # env 0: the transition 3 -> 4 lost a life
    _, discounts, real = transitions(batch, ImpalaConfig(discount=0.9))
    assert discounts.numpy()[3, 0] == np.float32(0.9)
    _, discounts, real = transitions(batch, ImpalaConfig(discount=0.9, life_loss_terminal=True))
    assert discounts.numpy()[3, 0] == 0.0 and real.numpy()[3, 0]  # no bootstrap, but a real transition
    assert (discounts.numpy() == 0).sum() == 4  # cut twice, terminated once, the lost life


def test_normalized_advantages_have_mean_0_and_std_1_over_real_transitions():
    rng = np.random.default_rng(4)
    advantages = rng.normal(3.0, 0.05, (6, 4)).astype(np.float32)
    mask = np.ones((6, 4), np.float32)
    mask[2, 1] = mask[5, 3] = 0.0
    advantages[2, 1] = 1e6  # a cut transition weighs nothing in the statistics
    out = normalized(tf.constant(advantages), tf.constant(mask)).numpy()
    real = out[mask > 0]
    expected = (advantages[mask > 0] - advantages[mask > 0].mean()) / advantages[mask > 0].std()
    np.testing.assert_allclose(real, expected, rtol=1e-4, atol=1e-4)


def test_reward_clipping():
    batch = time_major(make_batch(np.random.default_rng(0)))
    batch = batch._replace(reward=batch.reward * 10)
    rewards, _, _ = transitions(batch, ImpalaConfig(reward_clip=1.0))
    assert np.abs(rewards.numpy()).max() <= 1.0


def test_cut_transitions_carry_no_loss():
    agent = make_agent()
    batch = time_major(make_batch(np.random.default_rng(1)))
    loss, _ = impala_loss(agent.net, agent.config, batch)
    changed = batch._replace(reward=batch.reward.copy(), action=batch.action.copy())
    # transition 2 -> 3 of env 2 leads into a reset: its action and reward must not matter
    changed.reward[3, 2] += 100.0
    changed.action[2, 2] = 1 - batch.action[2, 2]
    loss2, _ = impala_loss(agent.net, agent.config, changed)
    np.testing.assert_allclose(loss.numpy(), loss2.numpy(), rtol=1e-6)
    # a real transition's reward does matter
    changed.reward[2, 2] += 100.0
    loss3, _ = impala_loss(agent.net, agent.config, changed)
    assert abs(loss3.numpy() - loss.numpy()) > 1e-3


def test_one_training_step_lowers_the_loss_on_a_fixed_batch():
    agent = make_agent(learning_rate=1e-2)
    batch = make_batch(np.random.default_rng(2))
    before, _ = impala_loss(agent.net, agent.config, time_major(batch))
    metrics = agent.learn(batch)
    after, _ = impala_loss(agent.net, agent.config, time_major(batch))
    assert np.isfinite(metrics["grad_norm"])
    assert after.numpy() < before.numpy()


def test_act_samples_valid_actions_and_returns_logits():
    agent = make_agent()
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    actions, extras, state = agent.act(obs, np.zeros(5, np.float32), np.ones(5, bool), np.arange(5, dtype=np.int32), {})
    assert actions.shape == (5,) and set(actions.numpy()) <= {0, 1}
    assert extras["policy"].shape == (5, 2)
    assert tf.reduce_all(tf.math.is_finite(extras["policy"]))


def test_state_information_is_the_mutual_information_of_state_and_action_over_the_batch():
    agent = make_agent()
    agent.net.policy.w.assign(agent.net.policy.w * 300.0)  # a policy that depends on its input
    batch = time_major(make_batch(np.random.default_rng(3)))
    _, metrics = impala_loss(agent.net, agent.config, batch)
    logits, _, _ = agent.net(batch.observation, batch.first, batch.state)
    probs = tf.nn.softmax(logits[:-1]).numpy().reshape(-1, 2)
    real = ~batch.first[1:].reshape(-1)
    mean = probs[real].mean(axis=0)
    entropies = [-sum(p[a] * np.log(p[a]) for a in range(2)) for p in probs[real]]
    expected = -sum(mean[a] * np.log(mean[a]) for a in range(2)) - np.mean(entropies)
    np.testing.assert_allclose(metrics["policy/state_information"].numpy(), expected, rtol=1e-4, atol=1e-7)
    assert expected > 0.01
    same = batch._replace(observation=np.broadcast_to(batch.observation[:1, :1], batch.observation.shape).copy())
    _, metrics = impala_loss(agent.net, agent.config, same)
    assert abs(metrics["policy/state_information"].numpy()) < 1e-6


def test_clipped_surrogate_matches_a_numpy_loop_from_the_appo_equations():
    rng = np.random.default_rng(5)
    T, B, eps = 5, 3, 0.2
    log_ratio = rng.normal(0.0, 0.4, (T, B)).astype(np.float32)
    rewards, values, vs = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    discounts = (0.9 * (rng.random((T, B)) > 0.2)).astype(np.float32)
    bootstrap = rng.normal(size=B).astype(np.float32)
    mask = (rng.random((T, B)) > 0.1).astype(np.float32)
    advantages = one_step_advantages(*(tf.constant(x) for x in (rewards, discounts, vs, values, bootstrap)))
    loss = clipped_surrogate_loss(tf.constant(log_ratio), advantages, tf.constant(mask), eps).numpy()
    total = 0.0
    for t in range(T):
        for b in range(B):
            v_next = vs[t + 1, b] if t + 1 < T else bootstrap[b]
            advantage = rewards[t, b] + discounts[t, b] * v_next - values[t, b]
            ratio = np.exp(log_ratio[t, b])
            clipped = min(max(ratio, 1 - eps), 1 + eps)
            total += mask[t, b] * min(ratio * advantage, clipped * advantage)
    np.testing.assert_allclose(loss, -total / (T * B), rtol=1e-5)


def _gradients(agent, batch):
    with tf.GradientTape() as tape:
        loss, _ = impala_loss(agent.net, agent.config, time_major(batch))
    return tape.gradient(loss, agent.net.trainable_variables)


def _on_policy(agent, batch):
    """The batch as if acted by `agent`'s current parameters (pi = mu)."""
    tm = time_major(batch)
    logits, _, _ = agent.net(tm.observation, tm.first, {})
    return batch._replace(extras={**batch.extras, "policy": np.swapaxes(logits.numpy(), 0, 1)})


def test_the_clipped_surrogate_on_policy_has_impalas_gradient():
    plain, clipped = make_agent(), make_agent(clip_ratio=0.1)
    batch = _on_policy(plain, make_batch(np.random.default_rng(6)))
    for a, b in zip(_gradients(plain, batch), _gradients(clipped, batch), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_the_clipped_surrogate_has_no_gradient_where_the_clip_binds():
    # ratios 1.5, 1.5, 0.5, 0.5, 1.05 against advantages +1, -1, +1, -1, +1 (A = r here)
    log_ratio = tf.Variable(np.log([[1.5, 1.5, 0.5, 0.5, 1.05]]).astype(np.float32))
    rewards = tf.constant([[1.0, -1.0, 1.0, -1.0, 1.0]])
    zeros = tf.zeros([1, 5])
    with tf.GradientTape() as tape:
        advantages = one_step_advantages(rewards, zeros, zeros, zeros, tf.zeros([5]))
        loss = clipped_surrogate_loss(log_ratio, advantages, tf.ones([1, 5]), 0.1)
    moves = np.abs(tape.gradient(loss, log_ratio).numpy()[0]) > 0
    # a gain already past 1 + eps, or a loss already past 1 - eps, earns nothing more
    assert moves.tolist() == [False, True, True, False, True]


def test_the_decoupled_surrogate_matches_a_numpy_loop_from_its_equations():
    """L = -mean(w_t min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t)), r_t = pi/pi_prox, w_t constant."""
    rng = np.random.default_rng(8)
    T, B, eps = 5, 3, 0.2
    log_ratio = rng.normal(0.0, 0.4, (T, B)).astype(np.float32)
    advantages = rng.normal(size=(T, B)).astype(np.float32)
    weights = rng.uniform(0.0, 1.0, (T, B)).astype(np.float32)
    mask = (rng.random((T, B)) > 0.1).astype(np.float32)
    ratio_var = tf.Variable(log_ratio)
    with tf.GradientTape() as tape:
        loss = clipped_surrogate_loss(ratio_var, tf.constant(advantages), tf.constant(mask), eps, tf.constant(weights))
    total, slope = 0.0, np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            ratio, a = np.exp(log_ratio[t, b]), advantages[t, b]
            clipped = min(max(ratio, 1 - eps), 1 + eps)
            total += mask[t, b] * weights[t, b] * min(ratio * a, clipped * a)
            if ratio * a <= clipped * a:  # the unclipped term is the min: d/dlog r of w r A
                slope[t, b] = -mask[t, b] * weights[t, b] * ratio * a / (T * B)
    np.testing.assert_allclose(loss.numpy(), -total / (T * B), rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(loss, ratio_var).numpy(), slope, rtol=1e-4, atol=1e-7)


def test_the_proximal_clip_starts_each_learner_step_with_impalas_gradient_whatever_the_lag():
    """pi_prox is the learner's policy as the step begins: on stale data (mu far from pi) the
    first update's policy gradient is IMPALA's, -min(rho_bar, pi/mu) A grad log pi, where the
    clip against mu would have silenced the transitions whose ratio is past 1 +- eps."""
    impala, proximal = make_agent(), make_agent(clip_ratio=0.1, proximal_clip=True)
    stale = make_batch(np.random.default_rng(9))  # behaviour logits unrelated to the network's
    np.testing.assert_allclose(proximal._step_start(stale)[0], _on_policy(proximal, stale).extras["policy"],
                               rtol=1e-5, atol=1e-6)
    batch = stale._replace(extras={**stale.extras, "proximal_policy": proximal._step_start(stale)[0]})
    for a, b in zip(_gradients(impala, batch), _gradients(proximal, batch), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    coupled = make_agent(clip_ratio=0.1)
    assert any(np.abs(a.numpy() - b.numpy()).max() > 1e-4
               for a, b in zip(_gradients(impala, batch), _gradients(coupled, batch), strict=True))
    metrics = proximal.learn(stale)
    assert metrics["policy/clip_fraction"] == 0.0  # one minibatch, one pass: pi = pi_prox throughout
    assert metrics["policy/approx_kl"] > 0.0  # still measured against the actors' policy
    assert 0.0 < metrics["policy/mean_proximal_weight"] <= 1.0


def test_the_proximal_clip_without_a_clip_is_refused():
    with pytest.raises(ValueError, match="proximal-clip"):
        make_agent(proximal_clip=True)


def test_epochs_take_several_steps_per_batch_and_stretch_the_learning_rate_decay():
    agent = make_agent(epochs=3, clip_ratio=0.1, learning_rate=1e-2)
    batch = _on_policy(agent, make_batch(np.random.default_rng(7)))
    metrics = agent.learn(batch)
    assert int(agent.optimizer.iterations.numpy()) == 3
    np.testing.assert_allclose(metrics["policy/mean_rho"], 1.0, rtol=1e-5)  # the first step: pi = mu
    assert abs(metrics["policy/last_epoch_mean_rho"] - 1.0) > 1e-4  # two steps later pi has moved
    decaying = ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, epochs=3), NetworkConfig(),
                           AgentContext((3,), np.dtype(np.float32), TWO_ACTIONS, seed=0), decay_steps=10)
    for _ in range(5):
        decaying.learn(batch)
    # 5 of 10 learner steps: half the step size is left, though the optimizer took 15 steps
    assert int(decaying.optimizer.iterations.numpy()) == 15
    np.testing.assert_allclose(decaying.optimizer.learning_rate().numpy(), 0.5e-3, rtol=1e-5)


def test_epochs_below_one_are_refused():
    with pytest.raises(ValueError, match="epochs"):
        make_agent(epochs=0)


def test_gaussian_appo_loss_matches_a_numpy_loop_from_the_equations():
    """The whole APPO loss on Box actions: Gaussian log-probabilities of the behaviour and the
    learner's policy, V-trace targets (the paper's sum, tests/test_vtrace.py), the clipped
    surrogate on normalised one-step advantages, the value loss and the entropy, written out."""
    from test_vtrace import reference_vtrace

    rng = np.random.default_rng(11)
    T, B, D, gamma, lam, eps, c_ent = 6, 4, 2, 0.99, 0.95, 0.2, 0.01
    box = ActionSpec.box((D,), [-1.0] * D, [1.0] * D)
    config = ImpalaConfig(unroll_length=T, batch_size=B, discount=gamma, vtrace_lambda=lam, clip_ratio=eps,
                          normalize_advantages=True, entropy_cost=c_ent, reward_clip=10.0)
    agent = ImpalaAgent(config, NetworkConfig(activation="tanh", shared_torso=False, initial_log_std=-0.5),
                        AgentContext((3,), np.dtype(np.float32), box, seed=3))
    batch = make_batch(rng, T, B)
    batch = batch._replace(action=rng.normal(0, 0.8, (B, T + 1, D)).astype(np.float32),
                           extras={**batch.extras, "policy": np.concatenate(
                               [rng.normal(0, 0.5, (B, T + 1, D)), rng.normal(-0.5, 0.2, (B, T + 1, D))],
                               axis=-1).astype(np.float32)})
    tm = time_major(batch)
    loss, metrics = impala_loss(agent.net, config, tm)
    params, values, _ = agent.net(tm.observation, tm.first, {})
    params, values = params.numpy().astype(np.float64), values.numpy().astype(np.float64)

    def log_prob(p, a):
        total = 0.0
        for d in range(D):
            mean, log_std = p[d], p[D + d]
            total += -0.5 * ((a[d] - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
        return total

    rewards, discounts, mask = np.zeros((T, B)), np.zeros((T, B)), np.zeros((T, B))
    log_rhos, entropy = np.zeros((T, B)), np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            real = not tm.first[t + 1, b]
            mask[t, b] = real
            rewards[t, b] = np.clip(tm.reward[t + 1, b], -10, 10)
            discounts[t, b] = gamma * (not tm.terminated[t + 1, b]) * real
            a = tm.action[t, b]
            lp, lmu = log_prob(params[t, b], a), log_prob(tm.extras["policy"][t, b].astype(np.float64), a)
            log_rhos[t, b] = lp - lmu if real else -np.inf
            entropy[t, b] = sum(params[t, b, D + d] + 0.5 * np.log(2 * np.pi * np.e) for d in range(D))
    vs, _ = reference_vtrace(log_rhos, discounts, rewards, values[:-1], values[-1], 1.0, 1.0, lam)
    vs_next = np.concatenate([vs[1:], values[-1][None]], axis=0)
    advantages = rewards + discounts * vs_next - values[:-1]
    n = mask.sum()
    mean = (mask * advantages).sum() / n
    std = np.sqrt((mask * (advantages - mean) ** 2).sum() / n)
    surrogate = 0.0
    for t in range(T):
        for b in range(B):
            ratio = np.exp(log_rhos[t, b]) if mask[t, b] else 1.0
            a_norm = (advantages[t, b] - mean) / (std + 1e-8)
            surrogate += mask[t, b] * min(ratio * a_norm, np.clip(ratio, 1 - eps, 1 + eps) * a_norm)
    pg = -surrogate / (T * B)
    baseline = (mask * 0.5 * (vs - values[:-1]) ** 2).sum() / (T * B)
    entropy_loss = -(mask * entropy).sum() / (T * B)
    np.testing.assert_allclose(metrics["loss/policy"].numpy(), pg, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(metrics["loss/entropy"].numpy(), entropy_loss, rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), pg + 0.5 * baseline + c_ent * entropy_loss, rtol=1e-4, atol=1e-6)
    assert "policy/state_information" not in metrics and metrics["policy/action_std"].numpy() > 0


def test_adam_rel_restarts_its_bias_corrections_with_each_learner_step():
    """Adam-Rel's first learner step is Adam's (t counts 1..4 in both); from the second its t
    starts again at 1, where Adam's goes on at 5, so the two agents part."""
    batch = make_batch(np.random.default_rng(3))
    agents = [make_agent(epochs=2, minibatches=2, clip_ratio=0.1, learning_rate=1e-2, adam_relative_steps=relative)
              for relative in (False, True)]
    for agent in agents:
        agent.learn(batch)
    for plain, relative in zip(*(a.net.trainable_variables for a in agents), strict=True):
        np.testing.assert_allclose(plain.numpy(), relative.numpy(), rtol=1e-6, atol=1e-7)
    for agent in agents:
        agent.learn(batch)
    assert max(np.abs(p.numpy() - r.numpy()).max()
               for p, r in zip(*(a.net.trainable_variables for a in agents), strict=True)) > 1e-4
