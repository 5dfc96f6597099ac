"""--pixel-norm (algorithms/pixel_normalization.py): running per-pixel statistics against plain
loops over every frame seen, the torso reading standardised pixels, and the agent keeping them."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.image_torsos import ConvTorso, channels_last
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet, QNet
from seedfleet.algorithms.pixel_normalization import PixelStatistics
from seedfleet.errors import UsageError
from tests.test_image_torsos import plain_convs


def loop_statistics(frames: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each pixel's mean and population variance of x / 255 over every frame, one pixel at a time."""
    stacked = np.concatenate([f.reshape(-1, *f.shape[-2:]) for f in frames]).astype(np.float64) / 255
    mean, variance = np.zeros(stacked.shape[1:]), np.zeros(stacked.shape[1:])
    for i in range(stacked.shape[1]):
        for j in range(stacked.shape[2]):
            values = stacked[:, i, j]
            mean[i, j] = sum(values) / len(values)
            variance[i, j] = sum((v - mean[i, j]) ** 2 for v in values) / len(values)
    return mean, variance


def standardised(x: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """clip((x / 255 - mu) / sqrt(s2 + 1e-5), -5, 5), element by element."""
    return np.clip((x / 255.0 - mean) / np.sqrt(variance + 1e-5), -5.0, 5.0)


def test_the_statistics_are_those_of_every_frame_seen_and_standardise_with_a_clip():
    """Three batches of 7, 1 and 12 frames merged one after another equal the loop over all 20; a
    pixel that never moved (always 10) sends a change to 200 to the clip, not to 1e5."""
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((7, 5, 6), (1, 5, 6), (3, 4, 5, 6))]
    for batch in batches:
        batch[..., 0, 0] = 10
    stats = PixelStatistics((5, 6))
    np.testing.assert_allclose(stats.normalize(tf.constant(batches[0])).numpy(), batches[0] / 255.0, rtol=1e-6)
    for n, batch in enumerate(batches, start=1):
        stats.update(batch)
        mean, variance = loop_statistics(batches[:n])
        np.testing.assert_allclose(stats.mean.numpy(), mean, rtol=1e-5, atol=1e-7, err_msg=f"after batch {n}")
        np.testing.assert_allclose(stats.variance.numpy(), variance, rtol=1e-4, atol=1e-7, err_msg=f"after batch {n}")
    assert float(stats.count.numpy()) == 20
    probe = rng.integers(0, 256, (2, 3, 5, 6), dtype=np.uint8)
    probe[0, 0, 0, 0] = 200
    out = stats.normalize(tf.constant(probe)).numpy()
    np.testing.assert_allclose(out, standardised(probe, mean, variance), rtol=1e-4, atol=1e-5)
    assert out[0, 0, 0, 0] == 5.0 and np.abs(out).max() <= 5.0


@pytest.mark.parametrize("kind", ["impala_shallow", "nature"])
def test_the_conv_torso_reads_standardised_pixels_and_fresh_statistics_change_nothing(kind):
    """A NumPy loop of the convs over the standardised stack (every frame of the stack by the
    same statistics); with statistics not yet updated the torso is the plain one (x / 255)."""
    stats = PixelStatistics((36, 36))
    plain = ConvTorso(kind, (36, 36, 4), np.random.default_rng(1))
    torso = ConvTorso(kind, (36, 36, 4), np.random.default_rng(1), pixel_statistics=stats)
    x = np.random.default_rng(2).integers(0, 256, (2, 4, 36, 36), dtype=np.uint8)
    np.testing.assert_allclose(torso(tf.constant(x)).numpy(), plain(tf.constant(x)).numpy(), rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(3)
    stats.mean.assign(rng.uniform(0.2, 0.6, (36, 36)).astype(np.float32))
    stats.variance.assign(rng.uniform(0.0, 0.05, (36, 36)).astype(np.float32))
    images = channels_last(tf.constant(standardised(x, stats.mean.numpy(), stats.variance.numpy()))).numpy()
    for n in range(2):
        expected = np.maximum(plain_convs(torso, images[n]).reshape(-1) @ torso.fc.w.numpy() + torso.fc.b.numpy(), 0)
        np.testing.assert_allclose(torso(tf.constant(x[n : n + 1]))[0].numpy(), expected, rtol=1e-4, atol=1e-4)


def frame_batch(rng, batch: int = 4, length: int = 6, actions: int = 2) -> Unroll:
    """Batch-major unrolls of [36, 36] frames, as the learner's queue hands them out."""
    rows = (batch, length + 1)
    first = np.zeros(rows, bool)
    first[:, 0] = True
    return Unroll(observation=rng.integers(0, 256, (*rows, 36, 36), dtype=np.uint8), first=first,
                  reward=rng.normal(size=rows).astype(np.float32), terminated=np.zeros(rows, bool),
                  truncated=np.zeros(rows, bool), life_lost=np.zeros(rows, bool),
                  action=rng.integers(0, actions, rows).astype(np.int32),
                  extras={"policy": np.zeros((*rows, actions), np.float32),
                          "policy_version": np.zeros(rows, np.int64)},
                  state={"frames": np.zeros((batch, 3, 36, 36), np.uint8)})


def test_the_actor_critic_agent_updates_them_from_each_batch_before_training_on_it():
    """After two learner steps the statistics are those of both batches' frames; the policy's and
    the value's torsos read the one set, which the net (so its checkpoint) holds."""
    config = NetworkConfig(torso="impala_shallow", pixel_norm=True, shared_torso=False)
    agent = ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4, epochs=2, minibatches=2, clip_ratio=0.1),
                        config, AgentContext((36, 36), np.dtype(np.uint8), ActionSpec.discrete(2), seed=0))
    rng = np.random.default_rng(4)
    batches = [frame_batch(rng), frame_batch(rng)]
    for batch in batches:
        agent.learn(batch)
    mean, variance = loop_statistics([b.observation for b in batches])
    stats = agent.net.pixel_statistics
    np.testing.assert_allclose(stats.mean.numpy(), mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(stats.variance.numpy(), variance, rtol=1e-4, atol=1e-7)
    assert agent.net.torso.torso.pixel_statistics is stats and agent.net.value_torso.torso.pixel_statistics is stats
    held = {id(v) for v in agent.checkpointed()["net"].variables}
    assert {id(stats.mean), id(stats.variance), id(stats.count)} <= held
    assert not {id(v) for v in stats.variables} & {id(v) for v in agent.net.trainable_variables}


def test_networks_without_statistics_refuse_the_flag():
    with pytest.raises(UsageError, match="--pixel-norm standardises a conv torso's pixels"):
        QNet(NetworkConfig(torso="nature", pixel_norm=True), (36, 36), 2)
    with pytest.raises(UsageError, match="--pixel-norm standardises a conv torso's pixels"):
        PolicyValueNet(NetworkConfig(torso="pool", pixel_norm=True), (36, 36), ActionSpec.discrete(2))
    with pytest.raises(UsageError, match="--pixel-norm standardises image pixels"):
        PolicyValueNet(NetworkConfig(pixel_norm=True), (4,), ActionSpec.discrete(2))
