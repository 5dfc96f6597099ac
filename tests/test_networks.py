"""Networks: learner-side frame stacking, one unroll equal to T single steps, the value torso, the
LSTM, the MLP torso's layer norm and the dense layer over [T, B, n]; the image torsos are in
test_image_torsos.py."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.layers import Linear
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet, stack_frames
from seedfleet.errors import UsageError


def reference_stack(frames, first, history):
    """Plain loop: keep a deque of k frames per env, zeroed where an episode opens."""
    T, B = first.shape
    k = history.shape[1] + 1
    out = np.zeros((T, B, k) + frames.shape[2:], frames.dtype)
    for b in range(B):
        stack = [history[b, i] for i in range(k - 1)]
        for t in range(T):
            if first[t, b]:
                stack = [np.zeros_like(frames[t, b]) for _ in range(k - 1)]
            stack = stack + [frames[t, b]]
            out[t, b] = np.stack(stack)
            stack = stack[1:]
    return out


@pytest.mark.parametrize("frame_shape", [(2, 2), (2, 3, 3)])
def test_stack_frames_matches_a_loop_across_episode_starts(frame_shape):
    rng = np.random.default_rng(3)
    T, B, k = 7, 3, 4
    frames = rng.integers(1, 255, (T, B, *frame_shape), dtype=np.uint8)
    first = np.zeros((T, B), bool)
    first[2, 0] = first[5, 0] = first[0, 1] = first[6, 2] = True
    history = rng.integers(1, 255, (B, k - 1, *frame_shape), dtype=np.uint8)
    stacked, new_history = stack_frames(tf.constant(frames), tf.constant(first), tf.constant(history))
    expected = reference_stack(frames, first, history)
    np.testing.assert_array_equal(stacked.numpy(), expected)
    np.testing.assert_array_equal(new_history.numpy(), expected[-1, :, 1:])


def run_both_ways(config, obs_shape, obs, first):
    net = PolicyValueNet(config, obs_shape, ActionSpec.discrete(3), seed=1)
    T, B = first.shape
    state0 = net.initial_state(B)
    logits, values, final = net(tf.constant(obs), tf.constant(first), state0)
    state = state0
    step_logits = []
    for t in range(T):
        lg, _, state = net(tf.constant(obs[t : t + 1]), tf.constant(first[t : t + 1]), state)
        step_logits.append(lg[0].numpy())
    np.testing.assert_allclose(logits.numpy(), np.stack(step_logits), rtol=1e-4, atol=1e-5)
    for name in final:
        np.testing.assert_allclose(final[name].numpy(), state[name].numpy(), rtol=1e-4, atol=1e-5)
    return logits, values


def test_atari_net_unroll_equals_single_steps():
    rng = np.random.default_rng(0)
    T, B = 5, 2
    obs = rng.integers(0, 255, (T, B, 84, 84), dtype=np.uint8)
    first = np.zeros((T, B), bool)
    first[0] = True
    first[3, 1] = True
    config = NetworkConfig(torso="impala_shallow", lstm_size=16, frame_stack=4)
    logits, values = run_both_ways(config, (84, 84), obs, first)
    assert logits.shape == (T, B, 3) and values.shape == (T, B)


def test_a_value_torso_of_its_own_reads_the_frame_stack_and_leaves_the_policy_alone():
    """`shared_torso` off on stacked frames: the value's torso sees the stack the policy's keeps
    (an unroll's values equal those of its steps one by one, each with the state carried on),
    its weights move the value and not the policy, and an LSTM is still refused."""
    rng = np.random.default_rng(4)
    T, B = 5, 2
    obs = rng.integers(0, 255, (T, B, 84, 84), dtype=np.uint8)
    first = np.zeros((T, B), bool)
    first[0] = first[3, 1] = True
    config = NetworkConfig(torso="impala_shallow", frame_stack=4, shared_torso=False, compute_dtype="float32")
    net = PolicyValueNet(config, (84, 84), ActionSpec.discrete(3), seed=1)
    state0 = net.initial_state(B)
    logits, values, _ = net(tf.constant(obs), tf.constant(first), state0)
    state, step_values = state0, []
    for t in range(T):
        _, value, state = net(tf.constant(obs[t : t + 1]), tf.constant(first[t : t + 1]), state)
        step_values.append(value[0].numpy())
    np.testing.assert_allclose(values.numpy(), np.stack(step_values), rtol=1e-4, atol=1e-5)
    later = np.concatenate([obs[:1], obs], axis=0)  # obs[0] again, now with itself one frame before
    later_first = np.concatenate([first[:1], np.zeros_like(first)], axis=0)
    _, later_values, _ = net(tf.constant(later), tf.constant(later_first), state0)
    assert np.abs(later_values.numpy()[1] - values.numpy()[0]).max() > 1e-6  # the stack, not the frame alone
    for variable in net.value_torso.trainable_variables:
        variable.assign(variable * 1.5)
    moved_logits, moved_values, _ = net(tf.constant(obs), tf.constant(first), state0)
    np.testing.assert_array_equal(moved_logits.numpy(), logits.numpy())
    assert np.abs(moved_values.numpy() - values.numpy()).max() > 1e-4
    with pytest.raises(UsageError, match="--lstm-size needs --shared-torso"):
        PolicyValueNet(NetworkConfig(torso="impala_shallow", frame_stack=4, lstm_size=8, shared_torso=False),
                       (84, 84), ActionSpec.discrete(3))


def test_lstm_state_resets_where_an_episode_opens():
    rng = np.random.default_rng(1)
    T, B = 4, 1
    obs = rng.normal(size=(T, B, 4)).astype(np.float32)
    first = np.array([[True], [False], [True], [False]])
    net = PolicyValueNet(NetworkConfig(lstm_size=8), (4,), ActionSpec.discrete(2), seed=0)
    logits, _, _ = net(tf.constant(obs), tf.constant(first), net.initial_state(B))
    # rows 2..3 start from a zero state, like rows 0..1 would with the same inputs
    again, _, _ = net(tf.constant(obs[2:]), tf.constant(first[2:]), net.initial_state(B))
    np.testing.assert_allclose(logits.numpy()[2:], again.numpy(), rtol=1e-5, atol=1e-6)
    run_both_ways(NetworkConfig(lstm_size=8), (4,), obs, first)


def test_a_layer_normalised_mlp_torso_is_the_equations_and_stays_bounded_far_outside_its_inputs():
    """With layer_norm each hidden layer is dense, then (x - mean) / sqrt(var + 1e-5) * scale +
    offset over the row's features, then ReLU: checked against a NumPy loop over rows. Inputs 1e4
    times larger leave a normalised torso's output as bounded as ever; a plain one's grows with them."""
    from seedfleet.algorithms.networks import MLPTorso

    torso = MLPTorso(5, (16, 8), np.random.default_rng(1), layer_norm=True)
    for norm in torso.norms:  # away from scale 1, offset 0, so both enter the check
        norm.scale.assign(np.linspace(0.5, 1.5, norm.scale.shape[0]).astype(np.float32))
        norm.offset.assign(np.linspace(-0.2, 0.2, norm.offset.shape[0]).astype(np.float32))
    x = np.random.default_rng(2).normal(size=(4, 5)).astype(np.float32)
    expected = []
    for row in x:
        h = row.astype(np.float64)
        for layer, norm in zip(torso.layers, torso.norms, strict=True):
            h = h @ layer.w.numpy() + layer.b.numpy()
            mean = sum(h) / len(h)
            variance = sum((v - mean) ** 2 for v in h) / len(h)
            h = (h - mean) / np.sqrt(variance + 1e-5) * norm.scale.numpy() + norm.offset.numpy()
            h = np.maximum(h, 0.0)
        expected.append(h)
    np.testing.assert_allclose(torso(x).numpy(), np.array(expected), rtol=1e-4, atol=1e-5)
    last = torso.norms[-1]  # sqrt(n) max|scale| + ||offset||, per row; ReLU only shrinks it
    bound = np.sqrt(8) * np.abs(last.scale.numpy()).max() + np.linalg.norm(last.offset.numpy())
    assert np.linalg.norm(torso(1e4 * x).numpy(), axis=-1).max() <= bound
    plain = MLPTorso(5, (16, 8), np.random.default_rng(1))
    assert plain.norms is None
    assert np.linalg.norm(plain(1e4 * x).numpy(), axis=-1).max() > 1e3


def test_a_dense_layer_maps_each_row_of_a_sequence_batch_and_its_gradient_sums_them():
    """Linear on [T, B, n] (heads over an unroll's features) is x @ w + b row by row, and the
    kernel's gradient is the sum over all T x B rows of x_r^T dL/dy_r, as a NumPy loop has it."""
    rng = np.random.default_rng(4)
    layer = Linear(5, 3, 1.0, np.random.default_rng(0))
    x = rng.normal(size=(4, 2, 5)).astype(np.float32)
    upstream = rng.normal(size=(4, 2, 3)).astype(np.float32)
    with tf.GradientTape() as tape:
        y = layer(tf.constant(x))
        loss = tf.reduce_sum(y * upstream)
    w, b = layer.w.numpy(), layer.b.numpy()
    expected_w_grad = np.zeros_like(w)
    for t in range(4):
        for i in range(2):
            np.testing.assert_allclose(y[t, i].numpy(), x[t, i] @ w + b, rtol=1e-5, atol=1e-6)
            expected_w_grad += np.outer(x[t, i], upstream[t, i])
    np.testing.assert_allclose(tape.gradient(loss, layer.w).numpy(), expected_w_grad, rtol=1e-5, atol=1e-5)
