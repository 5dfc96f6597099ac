"""`fixed_targets`: V-trace targets and advantages from the network as the learner step began,
the same in every pass, checked against a NumPy loop from the V-trace paper's equations."""

import numpy as np

from seedfleet.algorithms.impala.loss import impala_loss
from tests.test_impala import make_agent, make_batch, time_major

GAMMA, LAMBDA, RHO_BAR = 0.9, 0.95, 1.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def numpy_targets(batch, start_logits, start_values):
    """Batch-major [B, T] value targets, advantages and the real-transition mask, one loop per env.

    Espeholt et al. (2018), eq. 1: v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (prod_{i<t} c_i) delta_t,
    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)), rho_t = min(rho_bar, pi/mu),
    c_i = lambda min(1, pi/mu), written backwards as v_s = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}));
    APPO's advantage A_t = r_t + gamma_t v_{t+1} - V(x_t), v_T = V(x_T). Transition t -> t+1
    reads row t+1; a reset there cuts it (rho = 0, gamma = 0), a termination stops the bootstrap."""
    b_size, t_plus_1 = batch.first.shape
    t_len = t_plus_1 - 1
    vs, adv, mask = np.zeros((b_size, t_len)), np.zeros((b_size, t_len)), np.zeros((b_size, t_len))
    pi_logp, mu_logp = log_softmax(start_logits), log_softmax(batch.extras["policy"])
    for b in range(b_size):
        values = start_values[b].astype(np.float64)
        v_next = values[t_len]
        for t in reversed(range(t_len)):
            real = not batch.first[b, t + 1]
            gamma_t = GAMMA * (not batch.terminated[b, t + 1]) * real
            a = batch.action[b, t]
            ratio = np.exp(pi_logp[b, t, a] - mu_logp[b, t, a]) if real else 0.0
            delta = min(RHO_BAR, ratio) * (batch.reward[b, t + 1] + gamma_t * values[t + 1] - values[t])
            vs[b, t] = values[t] + delta + gamma_t * LAMBDA * min(1.0, ratio) * (v_next - values[t + 1])
            adv[b, t] = batch.reward[b, t + 1] + gamma_t * v_next - values[t]
            mask[b, t] = real
            v_next = vs[b, t]
    return vs, adv, mask


def uncut_batch(seed: int):
    """A batch whose unrolls hold no reset, termination or truncation: every transition is real."""
    batch = make_batch(np.random.default_rng(seed))
    batch.first[:, 1:] = False
    batch.terminated[:] = batch.truncated[:] = False
    return batch


def fixed_agent(**overrides):
    return make_agent(clip_ratio=0.1, fixed_targets=True, discount=GAMMA, vtrace_lambda=LAMBDA,
                      clip_rho_threshold=RHO_BAR, clip_pg_rho_threshold=RHO_BAR, reward_clip=0.0, **overrides)


def test_the_fixed_targets_are_vtrace_on_the_step_start_network_whatever_the_network_is_now():
    agent = fixed_agent()
    batch = make_batch(np.random.default_rng(11))  # the actors' logits unrelated to the network's
    start_logits, start_values = agent._step_start(batch)
    batch = batch._replace(extras={**batch.extras, "proximal_policy": start_logits, "start_value": start_values})
    vs, adv, mask = numpy_targets(batch, start_logits, start_values)
    rng = np.random.default_rng(12)
    for variable in agent.net.trainable_variables:  # the network moves, as after earlier minibatches
        variable.assign_add(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
    _, now_values, _ = agent.net(time_major(batch).observation, time_major(batch).first, {})
    now_values = np.swapaxes(now_values.numpy()[:-1], 0, 1)
    assert np.abs(now_values - start_values[:, :-1]).max() > 0.1

    _, metrics = impala_loss(agent.net, agent.config, time_major(batch))
    real = mask > 0
    np.testing.assert_allclose(metrics["advantage/mean"].numpy(), adv[real].mean(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["advantage/std"].numpy(), adv[real].std(), rtol=1e-4)
    baseline = (mask * 0.5 * (vs - now_values) ** 2).sum() / mask.size  # the values being trained
    np.testing.assert_allclose(metrics["loss/baseline"].numpy(), baseline, rtol=1e-4)

    moving = make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0)
    for mine, theirs in zip(moving.net.trainable_variables, agent.net.trainable_variables, strict=True):
        mine.assign(theirs)
    _, moved = impala_loss(moving.net, moving.config, time_major(batch))
    assert abs(moved["advantage/mean"].numpy() - adv[real].mean()) > 1e-3  # without: the network's own


def test_every_pass_of_a_learner_step_trains_on_the_same_advantages():
    """With no cut transitions every minibatch has the same count, so the first pass's mean of
    minibatch means is the batch's mean advantage: on the step-start network's targets with
    `fixed_targets`, and on a network that moved between the minibatches without."""
    batch = uncut_batch(13)
    agent = fixed_agent(minibatches=2, epochs=2, learning_rate=0.05)
    start_logits, start_values = agent._step_start(batch)
    _, adv, _ = numpy_targets(batch, start_logits, start_values)
    metrics = agent.learn(batch)
    np.testing.assert_allclose(metrics["advantage/mean"], adv.mean(), rtol=1e-4, atol=1e-5)
    assert np.isfinite(metrics["loss/total"]) and metrics["skipped_steps"] == 0

    moving = make_agent(clip_ratio=0.1, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0, minibatches=2,
                        epochs=2, learning_rate=0.05)
    start_logits, start_values = moving._step_start(batch)
    _, adv, _ = numpy_targets(batch, start_logits, start_values)
    assert abs(moving.learn(batch)["advantage/mean"] - adv.mean()) > 1e-4
