"""`random_shift`: training frames padded by p of their own edge pixels and cropped back at a
random offset (DrQ's augmentation), checked against a NumPy pad-and-crop written here; one
offset per unroll, its frame history included; acting untouched."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.augmentation import shift_images, shift_transitions, shift_unrolls
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError
from tests.test_impala import make_batch, time_major

PAD, SIDE = 2, 10
FOUR_ACTIONS = ActionSpec.discrete(4)


def numpy_shift(image: np.ndarray, dy: int, dx: int, pad: int = PAD) -> np.ndarray:
    """[H, W(, C)] image padded by `pad` edge pixels on every side, cropped at (pad + dy, pad + dx)."""
    height, width = image.shape[:2]
    spec = [(pad, pad), (pad, pad)] + [(0, 0)] * (image.ndim - 2)
    padded = np.pad(image, spec, mode="edge")
    return padded[pad + dy:pad + dy + height, pad + dx:pad + dx + width]


def offset_of(shifted: np.ndarray, image: np.ndarray) -> tuple[int, int]:
    """The one (dy, dx) in [-PAD, PAD]^2 whose NumPy shift of `image` is `shifted`."""
    found = [(dy, dx) for dy in range(-PAD, PAD + 1) for dx in range(-PAD, PAD + 1)
             if np.array_equal(numpy_shift(image, dy, dx), shifted)]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("channels", [(), (3,)])
def test_each_row_moves_by_its_offset_with_edge_pixels_filling_in(channels):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 3, SIDE, SIDE + 2, *channels), dtype=np.uint8)
    offsets = np.array([[0, 0], [-2, 2], [1, -1], [2, 0], [-1, -2]], np.int32)
    shifted = shift_images(tf.constant(images), tf.constant(offsets)).numpy()
    assert shifted.shape == images.shape and shifted.dtype == np.uint8
    for b, (dy, dx) in enumerate(offsets):
        for s in range(3):
            np.testing.assert_array_equal(shifted[b, s], numpy_shift(images[b, s], dy, dx))
    np.testing.assert_array_equal(shifted[0], images[0])


def image_unrolls(rng, t_len: int = 6, batch: int = 8) -> Unroll:
    """Batch-major unrolls of [SIDE, SIDE] uint8 frames with a 3-frame history in their state."""
    vector = make_batch(rng, T=t_len, B=batch, num_actions=4)
    return vector._replace(observation=rng.integers(0, 256, (batch, t_len + 1, SIDE, SIDE), dtype=np.uint8),
                           state={"frames": rng.integers(0, 256, (batch, 3, SIDE, SIDE), dtype=np.uint8)})


def test_an_unroll_and_its_frame_history_move_together_by_one_offset_of_at_most_pad():
    tf.random.set_seed(1)
    batch = time_major(image_unrolls(np.random.default_rng(1)))
    out = shift_unrolls(batch._replace(observation=tf.constant(batch.observation)), PAD)
    observation, history = out.observation.numpy(), out.state["frames"].numpy()
    offsets = []
    for b in range(observation.shape[1]):
        offset = offset_of(observation[0, b], batch.observation[0, b])
        for t in range(observation.shape[0]):
            np.testing.assert_array_equal(observation[t, b], numpy_shift(batch.observation[t, b], *offset))
        for k in range(3):
            np.testing.assert_array_equal(history[b, k], numpy_shift(batch.state["frames"][b, k], *offset))
        offsets.append(offset)
    assert len(set(offsets)) > 1  # drawn per unroll, not once for the batch
    np.testing.assert_array_equal(out.action, batch.action)


def test_each_transition_and_its_history_move_by_their_own_offset():
    tf.random.set_seed(2)
    rng = np.random.default_rng(2)
    observation = rng.integers(0, 256, (16, SIDE, SIDE), dtype=np.uint8)
    history = rng.integers(0, 256, (16, 3, SIDE, SIDE), dtype=np.uint8)
    shifted, state = shift_transitions(tf.constant(observation), {"frames": tf.constant(history)}, PAD)
    offsets = [offset_of(shifted.numpy()[n], observation[n]) for n in range(16)]
    for n, offset in enumerate(offsets):
        for k in range(3):
            np.testing.assert_array_equal(state["frames"].numpy()[n, k], numpy_shift(history[n, k], *offset))
    assert len(set(offsets)) > 1


def image_agent(shift: int, **overrides) -> ImpalaAgent:
    config = ImpalaConfig(unroll_length=6, batch_size=8, minibatches=2, epochs=2, clip_ratio=0.1,
                          random_shift=shift, **overrides)
    return ImpalaAgent(config, NetworkConfig(torso="minatar", jit_compile=False),
                       AgentContext((SIDE, SIDE), np.dtype(np.uint8), FOUR_ACTIONS, seed=3))


@pytest.mark.parametrize("overrides", [{}, {"shuffle_transitions": True}])
def test_the_learner_trains_on_shifted_frames_and_acts_on_the_frames_as_they_are(overrides):
    batch = image_unrolls(np.random.default_rng(5))
    tf.random.set_seed(5)
    plain, shifted = image_agent(0, **overrides), image_agent(PAD, **overrides)
    obs = tf.constant(batch.observation[:, 0])
    first = tf.zeros([8], tf.bool)
    state = {"frames": tf.constant(batch.state["frames"])}
    args = (obs, tf.zeros([8]), first, tf.range(8), state)
    np.testing.assert_array_equal(plain.policy(*args)[1].numpy(), shifted.policy(*args)[1].numpy())
    plain_metrics, shifted_metrics = plain.learn(batch), shifted.learn(batch)
    assert np.isfinite(shifted_metrics["loss/total"]) and shifted_metrics["skipped_steps"] == 0
    # the same weights and batch: only the frames the loss saw differ
    assert shifted_metrics["loss/total"] != pytest.approx(plain_metrics["loss/total"], rel=1e-6)


@pytest.mark.parametrize(("shift", "obs_shape", "dtype"), [
    (2, (3,), np.float32),  # vectors have no pixels to move
    (5, (SIDE, SIDE), np.uint8),  # half the side
    (-1, (SIDE, SIDE), np.uint8),
])
def test_shifts_that_cannot_apply_are_refused_in_one_line(shift, obs_shape, dtype):
    with pytest.raises(UsageError, match="--random-shift"):
        ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, random_shift=shift), NetworkConfig(),
                    AgentContext(obs_shape, np.dtype(dtype), FOUR_ACTIONS))
