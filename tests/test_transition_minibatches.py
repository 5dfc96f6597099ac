"""`shuffle_transitions`: minibatches of single transitions drawn across a batch's unrolls. Each
transition alone, with its row state, gives what its unroll step gives; its targets are V-trace's
on the step start network (NumPy loop of test_fixed_targets); one minibatch of every transition
trains as `fixed_targets` on whole unrolls does."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.loss import impala_loss
from seedfleet.algorithms.impala.transition_minibatches import flatten, transition_loss
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet
from seedfleet.errors import UsageError
from tests.test_fixed_targets import GAMMA, LAMBDA, numpy_targets, uncut_batch
from tests.test_impala import make_agent, make_batch, time_major

FOUR_ACTIONS = ActionSpec.discrete(4)


def shuffled_agent(**overrides) -> ImpalaAgent:
    return make_agent(clip_ratio=0.1, shuffle_transitions=True, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0,
                      **overrides)


def test_each_transition_alone_with_its_row_state_gives_what_its_unroll_step_gives():
    """Frames stacked on the learner: the state before row t holds the 3 frames before x_t, zeros
    across an episode start (rows 3 and 5 of env 1 open episodes), and the history carried in."""
    rng = np.random.default_rng(4)
    net = PolicyValueNet(NetworkConfig(torso="minatar", jit_compile=False), (10, 10), FOUR_ACTIONS, seed=2)
    t_len, batch = 7, 3
    obs = rng.integers(0, 256, (t_len, batch, 10, 10), dtype=np.uint8)
    first = np.zeros((t_len, batch), bool)
    first[3, 1] = first[5, 1] = True
    history = rng.integers(0, 256, (batch, 3, 10, 10), dtype=np.uint8)
    params, values, _ = net(tf.constant(obs), tf.constant(first), {"frames": tf.constant(history)})
    states = net.row_states(tf.constant(obs), tf.constant(first), {"frames": tf.constant(history)})
    frames = states["frames"].numpy()
    assert frames.shape == (t_len, batch, 3, 10, 10)
    np.testing.assert_array_equal(frames[0], history)
    np.testing.assert_array_equal(frames[2, 0], np.concatenate([history[0, 2:], obs[:2, 0]]))
    assert not frames[3, 1].any() and not frames[5, 1].any()  # an episode opens at x_t: nothing before it
    np.testing.assert_array_equal(frames[4, 1], np.concatenate([np.zeros((2, 10, 10), np.uint8), obs[3:4, 1]]))
    flat = lambda v: tf.reshape(v, [t_len * batch, *v.shape[2:]])  # noqa: E731
    alone_params, alone_values, _ = net(flat(obs)[None], flat(first)[None], {"frames": flat(frames)})
    np.testing.assert_allclose(alone_params[0].numpy(), flat(params).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(alone_values[0].numpy(), flat(values).numpy(), rtol=1e-5, atol=1e-6)


def test_the_targets_are_vtrace_on_the_step_start_network():
    agent = shuffled_agent()
    batch = make_batch(np.random.default_rng(21))  # the actors' logits unrelated to the network's
    start_logits, start_values = agent._step_start(batch)
    vs, adv, mask = numpy_targets(batch, start_logits, start_values)
    data = flatten(batch, agent._by_minibatch(agent._targets, batch))
    assert data.size == batch.size * (batch.action.shape[1] - 1)
    np.testing.assert_allclose(data.target, vs.reshape(-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(data.advantage, adv.reshape(-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(data.mask, mask.reshape(-1))
    np.testing.assert_array_equal(data.action, batch.action[:, :-1].reshape(-1))


def test_one_minibatch_of_every_transition_trains_as_fixed_targets_on_whole_unrolls():
    """The same loss and gradients, here with the network moved away from the step start (as
    after earlier minibatches), in any order of the transitions."""
    agent = shuffled_agent()
    fixed = make_agent(clip_ratio=0.1, fixed_targets=True, discount=GAMMA, vtrace_lambda=LAMBDA, reward_clip=0.0)
    batch = make_batch(np.random.default_rng(22))
    data = flatten(batch, agent._by_minibatch(agent._targets, batch))
    start_logits, start_values = agent._step_start(batch)
    batch = batch._replace(extras={**batch.extras, "proximal_policy": start_logits, "start_value": start_values})
    rng = np.random.default_rng(23)
    for mine, theirs in zip(agent.net.trainable_variables, fixed.net.trainable_variables, strict=True):
        mine.assign_add(rng.normal(0.0, 0.3, mine.shape).astype(np.float32))
        theirs.assign(mine)
    order = rng.permutation(data.size)
    shuffled = tf.nest.map_structure(lambda v: v[order], data)
    with tf.GradientTape(persistent=True) as tape:
        ours, our_metrics = transition_loss(agent.net, agent.config, shuffled)
        theirs, their_metrics = impala_loss(fixed.net, fixed.config, time_major(batch))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
    for name in ("loss/policy", "loss/baseline", "loss/entropy", "advantage/mean", "policy/approx_kl",
                 "policy/state_information"):
        np.testing.assert_allclose(our_metrics[name].numpy(), their_metrics[name].numpy(), rtol=1e-4, atol=1e-6)
    for mine, reference in zip(tape.gradient(ours, agent.net.trainable_variables),
                               tape.gradient(theirs, fixed.net.trainable_variables), strict=True):
        np.testing.assert_allclose(mine.numpy(), reference.numpy(), rtol=1e-4, atol=1e-6)


def test_a_learner_step_on_shuffled_transitions_trains_every_pass_on_the_step_start_advantages():
    """No cut transitions, so every minibatch holds 12 real ones and the first pass's mean of
    minibatch means is the batch's mean advantage; the network moves."""
    batch = uncut_batch(24)
    agent = shuffled_agent(minibatches=2, epochs=2, learning_rate=0.05)
    start_logits, start_values = agent._step_start(batch)
    _, adv, _ = numpy_targets(batch, start_logits, start_values)
    before = [v.numpy() for v in agent.net.trainable_variables]
    metrics = agent.learn(batch)
    np.testing.assert_allclose(metrics["advantage/mean"], adv.mean(), rtol=1e-4, atol=1e-5)
    assert np.isfinite(metrics["loss/total"]) and metrics["skipped_steps"] == 0
    # acted at update 0; the first pass's two minibatches train at updates 0 and 1 of 4 per step
    assert metrics["policy/lag"] == pytest.approx(0.125) and "policy/last_epoch_clip_fraction" in metrics
    assert any(np.abs(b - v.numpy()).max() > 1e-4 for b, v in zip(before, agent.net.trainable_variables, strict=True))


@pytest.mark.parametrize(("overrides", "network", "words"), [
    ({"clip_ratio": 0.0}, NetworkConfig(), "--clip-ratio"),
    ({"clip_ratio": 0.1, "proximal_clip": True}, NetworkConfig(), "--proximal-clip"),
    ({"clip_ratio": 0.1}, NetworkConfig(lstm_size=8), "--lstm-size"),
])
def test_settings_single_transitions_cannot_take_are_refused_in_one_line(overrides, network, words):
    with pytest.raises(UsageError, match=words):
        ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, shuffle_transitions=True, **overrides), network,
                    AgentContext((3,), np.dtype(np.float32), ActionSpec.discrete(2)))
