"""Image torsos: each conv on blocks against strided convolutions, the bfloat16 path, the pool
torso, the initialisations and the normalisations of the conv torsos."""

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.image_torsos import ConvTorso, channels_last
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet
from seedfleet.errors import UsageError
from tests.test_networks import run_both_ways


def conv_loop(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """A VALID strided convolution, one output pixel at a time: x [H, W, C], w [k, k, C, O]."""
    k = w.shape[0]
    rows, cols = (x.shape[0] - k) // stride + 1, (x.shape[1] - k) // stride + 1
    out = np.zeros((rows, cols, w.shape[3]))
    for i in range(rows):
        for j in range(cols):
            window = x[i * stride : i * stride + k, j * stride : j * stride + k]
            out[i, j] = np.tensordot(window, w, axes=3) + b
    return out


def plain_convs(torso: ConvTorso, image: np.ndarray) -> np.ndarray:
    """The torso's convs with their ReLUs, by `conv_loop`, on one [H, W, C] image in [0, 1]."""
    h = image
    for conv in torso.convs:
        h = np.maximum(conv_loop(h, conv.w.numpy(), conv.b.numpy(), conv.stride), 0.0)
    return h


@pytest.mark.parametrize(("kind", "stack", "padding"),
                         [("nature", (4, 36, 36), "valid"), ("impala_shallow", (2, 39, 38, 3), "valid"),
                          ("minatar", (1, 10, 10, 4), "valid"), ("nature", (4, 38, 37), "same"),
                          ("impala_shallow", (2, 39, 38, 3), "same")])
def test_conv_torso_on_blocks_equals_strided_convolutions(kind, stack, padding):
    """Each conv runs at stride 1 on s x s blocks of its input, odd sizes cropped to
    the pixels it reads, or zero-padded first for SAME; the features equal a loop of strided
    convolutions' over the input with TensorFlow's SAME borders written out, and every kernel's
    gradient equals that through TensorFlow's own strided convolutions."""
    rng = np.random.default_rng(3)
    k, frame = stack[0], stack[1:]
    image_shape = (*frame[:2], k * (frame[2] if len(frame) == 3 else 1))
    torso = ConvTorso(kind, image_shape, np.random.default_rng(1), padding=padding)
    x = rng.integers(0, 256, (2, *stack), dtype=np.uint8)
    images = channels_last(tf.constant(x)).numpy() / 255.0
    for n in range(2):
        h = images[n]
        for conv in torso.convs:
            kernel = conv.w.shape[0]
            if padding == "same":  # out = ceil(n / s); the pad total's smaller half goes first
                totals = [max((-(-size // conv.stride) - 1) * conv.stride + kernel - size, 0) for size in h.shape[:2]]
                h = np.pad(h, [(t // 2, t - t // 2) for t in totals] + [(0, 0)])
            h = np.maximum(conv_loop(h, conv.w.numpy(), conv.b.numpy(), conv.stride), 0.0)
        expected = np.maximum(h.reshape(-1) @ torso.fc.w.numpy() + torso.fc.b.numpy(), 0.0)
        np.testing.assert_allclose(torso(tf.constant(x[n : n + 1]))[0].numpy(), expected, rtol=1e-4, atol=1e-5)

    kernels = [conv.w for conv in torso.convs]
    with tf.GradientTape(persistent=True) as tape:
        ours = tf.reduce_sum(tf.square(torso(tf.constant(x))))
        h = tf.constant(images, tf.float32)
        for conv in torso.convs:
            h = tf.nn.relu(tf.nn.conv2d(h, conv.w, conv.stride, padding.upper()) + conv.b)
        theirs = tf.reduce_sum(tf.square(tf.nn.relu(torso.fc(tf.reshape(h, [2, -1])))))
    for mine, reference in zip(tape.gradient(ours, kernels), tape.gradient(theirs, kernels), strict=True):
        np.testing.assert_allclose(mine.numpy(), reference.numpy(), rtol=1e-4, atol=1e-4)


def test_bfloat16_torso_stays_close_to_float32():
    rng = np.random.default_rng(2)
    obs = tf.constant(rng.integers(0, 255, (2, 3, 84, 84), dtype=np.uint8))
    first = tf.constant(np.zeros((2, 3), bool))
    four = ActionSpec.discrete(4)
    nets = [PolicyValueNet(NetworkConfig(compute_dtype=d), (84, 84), four, seed=5) for d in ("float32", "bfloat16")]
    (l32, v32, _), (l16, v16, _) = (net(obs, first, net.initial_state(3)) for net in nets)
    assert l16.dtype == tf.float32 and v16.dtype == tf.float32
    np.testing.assert_allclose(v16.numpy(), v32.numpy(), rtol=0.05, atol=0.05)
    np.testing.assert_allclose(l16.numpy(), l32.numpy(), rtol=0.05, atol=0.01)


@pytest.mark.parametrize("obs_shape", [(84, 84), (10, 10, 4)])
def test_pool_torso_sees_cell_means_of_the_stack(obs_shape):
    """The near-free torso of bench.load: its features are a function of the stack's 7x7 cell
    means alone (a change inside one cell that keeps its mean changes nothing, a change of the
    mean does), and it stacks frames and unrolls like any torso."""
    rng = np.random.default_rng(4)
    T, B = 3, 2
    obs = rng.integers(0, 200, (T, B, *obs_shape), dtype=np.uint8)
    first = np.zeros((T, B), bool)
    first[0] = True
    config = NetworkConfig(torso="pool", frame_stack=4 if len(obs_shape) == 2 else 1)
    run_both_ways(config, obs_shape, obs, first)
    net = PolicyValueNet(config, obs_shape, ActionSpec.discrete(3), seed=1)
    features = lambda o: net.torso(tf.constant(o), tf.constant(first), net.initial_state(B))[0].numpy()  # noqa: E731
    base = features(obs)
    assert base.shape == (T, B, 16)
    window = net.torso.torso.window
    swapped = obs.copy()  # two pixels of one cell of the newest frame trade places: same mean
    swapped[-1, 0, 0, 0], swapped[-1, 0, window[0] - 1, window[1] - 1] = obs[-1, 0, window[0] - 1, window[1] - 1], \
        obs[-1, 0, 0, 0]
    np.testing.assert_allclose(features(swapped), base, rtol=1e-5, atol=1e-6)
    brighter = obs.copy()
    brighter[-1, 0] += 50
    assert not np.allclose(features(brighter)[-1, 0], base[-1, 0])


def test_nature_half_torso_has_natures_layers_at_half_the_width():
    config = NetworkConfig(torso="nature_half", frame_stack=4)
    net = PolicyValueNet(config, (84, 84), ActionSpec.discrete(6), seed=0)
    shapes = [tuple(conv.w.shape) for conv in net.torso.torso.convs]
    assert shapes == [(8, 8, 4, 16), (4, 4, 16, 32), (3, 3, 32, 32)]
    assert tuple(net.torso.torso.fc.w.shape) == (7 * 7 * 32, 256)
    rng = np.random.default_rng(2)
    obs = rng.integers(0, 255, (3, 2, 84, 84), dtype=np.uint8)
    first = np.zeros((3, 2), bool)
    first[0] = True
    logits, values = run_both_ways(config, (84, 84), obs, first)
    assert logits.shape == (3, 2, 3) and values.shape == (3, 2)


def test_fan_in_uniform_init_draws_weights_and_biases_within_torch_bounds():
    """`--dense-init fan_in_uniform`: every mlp layer's weights and biases lie in +-1/sqrt(fan in) and
    spread over it (a uniform's std is bound / sqrt(3)); the orthogonal default keeps zero biases."""
    from seedfleet.algorithms.networks import MLPTorso
    from seedfleet.errors import UsageError

    torso = MLPTorso(17, (256, 64), np.random.default_rng(0), init="fan_in_uniform")
    for layer, fan_in in zip(torso.layers, (17, 256), strict=True):
        bound = 1.0 / np.sqrt(fan_in)
        for values in (layer.w.numpy(), layer.b.numpy()):
            assert np.abs(values).max() <= bound
            assert abs(values.std() - bound / np.sqrt(3)) < 0.1 * bound
    orthogonal = MLPTorso(17, (256,), np.random.default_rng(0))
    assert not orthogonal.layers[0].b.numpy().any()
    with pytest.raises(UsageError, match="--dense-init"):
        MLPTorso(17, (8,), np.random.default_rng(0), init="xavier")


def test_fan_in_uniform_init_reaches_the_conv_torso_and_the_default_stays_orthogonal():
    """`--dense-init fan_in_uniform` on the Nature torso: each conv's kernel (fan in k * k * c_in)
    and the dense layer lie in +-1/sqrt(fan in), as torch's Conv2d and Linear start; by default a
    kernel, flattened to [k * k * c_in, c_out], has orthogonal columns of norm sqrt(2), zero biases."""
    from seedfleet.algorithms.networks import RecurrentTorso

    config = NetworkConfig(torso="nature", compute_dtype="float32", dense_init="fan_in_uniform")
    torso = RecurrentTorso(config, (84, 84), seed=0).torso
    for conv, fan_in in zip(torso.convs, (8 * 8 * 4, 4 * 4 * 32, 3 * 3 * 64), strict=True):
        bound = 1.0 / np.sqrt(fan_in)
        for values in (conv.w.numpy(), conv.b.numpy()):
            assert np.abs(values).max() <= bound and values.std() > 0.8 * bound / np.sqrt(3)
    assert np.abs(torso.fc.w.numpy()).max() <= 1.0 / np.sqrt(7 * 7 * 64)
    default = RecurrentTorso(NetworkConfig(torso="nature", compute_dtype="float32"), (84, 84), seed=0).torso
    for conv in default.convs:
        w = conv.w.numpy().reshape(-1, conv.w.shape[-1])
        np.testing.assert_allclose(w.T @ w, 2.0 * np.eye(w.shape[1]), atol=1e-4)
        assert not conv.b.numpy().any()
    with pytest.raises(UsageError, match="--dense-init"):
        RecurrentTorso(NetworkConfig(torso="nature", dense_init="xavier"), (84, 84))


def test_dopamines_network_same_padding_and_variance_scaling_init():
    """`--conv-padding same --dense-init variance_scaling` is Dopamine's Nature network: on 84x84
    frames the maps are 21, 11 and 11 a side, so the dense layer reads 11 * 11 * 64; every layer's
    weights lie in +-sqrt(sqrt(3) / fan in) with the std of that uniform, and biases start at zero.
    A torso without convolutions refuses the padding."""
    from seedfleet.algorithms.networks import RecurrentTorso

    config = NetworkConfig(torso="nature", compute_dtype="float32", dense_init="variance_scaling",
                           conv_padding="same")
    torso = RecurrentTorso(config, (84, 84), seed=0).torso
    assert [conv.out_size for conv in torso.convs] == [(21, 21), (11, 11), (11, 11)]
    layers = [*torso.convs, torso.fc]
    for layer, fan_in in zip(layers, (8 * 8 * 4, 4 * 4 * 32, 3 * 3 * 64, 11 * 11 * 64), strict=True):
        bound = np.sqrt(np.sqrt(3.0) / fan_in)
        w = layer.w.numpy()
        assert np.abs(w).max() <= bound and abs(w.std() - bound / np.sqrt(3)) < 0.05 * bound
        assert not layer.b.numpy().any()
    features = torso(tf.constant(np.full((2, 4, 84, 84), 200, np.uint8)))
    assert features.shape == (2, 512) and np.isfinite(features.numpy()).all()
    with pytest.raises(UsageError, match="--conv-padding"):
        RecurrentTorso(NetworkConfig(torso="mlp", conv_padding="same"), (8,))
    with pytest.raises(UsageError, match="--conv-padding"):
        RecurrentTorso(NetworkConfig(torso="nature", conv_padding="full"), (84, 84))


def test_feature_norm_normalises_the_conv_torsos_dense_layer_alone():
    """With feature_norm the convs stay plain ReLU layers and only the dense layer's output is
    (h - mean) / sqrt(var + 1e-5) * scale + offset before its ReLU: a NumPy loop of the convs, then
    the equation over each row's 256 units. An mlp torso refuses the flag."""
    torso = ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1), feature_norm=True)
    assert torso.norms is None and torso.feature_norm is not None
    norm = torso.feature_norm
    norm.scale.assign(np.linspace(0.5, 1.5, 256).astype(np.float32))
    norm.offset.assign(np.linspace(-0.2, 0.2, 256).astype(np.float32))
    x = np.random.default_rng(2).integers(0, 256, (2, 4, 36, 36), dtype=np.uint8)
    images = channels_last(tf.constant(x)).numpy() / 255.0
    for n in range(2):
        h = plain_convs(torso, images[n]).reshape(-1).astype(np.float64) @ torso.fc.w.numpy() + torso.fc.b.numpy()
        mean = sum(h) / len(h)
        variance = sum((v - mean) ** 2 for v in h) / len(h)
        expected = np.maximum((h - mean) / np.sqrt(variance + 1e-5) * norm.scale.numpy() + norm.offset.numpy(), 0)
        np.testing.assert_allclose(torso(tf.constant(x[n : n + 1]))[0].numpy(), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(UsageError, match="--feature-norm"):
        PolicyValueNet(NetworkConfig(feature_norm=True), (4,), ActionSpec.discrete(2))


def test_the_map_conv_norm_normalises_each_convs_whole_output():
    """--conv-norm map: each conv's output is (h - mean) / sqrt(var + 1e-5) * scale_c + offset_c
    with the mean and variance over all of that sample's H x W x C values, then ReLU; checked by a
    NumPy loop of the convs. A pixel's features keep their size against the other pixels'."""
    torso = ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1), layer_norm=True, conv_norm="map")
    for norm in torso.norms:
        norm.scale.assign(np.linspace(0.5, 1.5, norm.scale.shape[0]).astype(np.float32))
        norm.offset.assign(np.linspace(-0.2, 0.2, norm.offset.shape[0]).astype(np.float32))
    x = np.random.default_rng(2).integers(0, 256, (2, 4, 36, 36), dtype=np.uint8)
    images = channels_last(tf.constant(x)).numpy() / 255.0

    def normalised(h, norm):
        values = h.reshape(-1).astype(np.float64)
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / len(values)
        return np.maximum((h - mean) / np.sqrt(variance + 1e-5) * norm.scale.numpy() + norm.offset.numpy(), 0.0)

    for n in range(2):
        h = images[n]
        for conv, norm in zip(torso.convs, torso.norms, strict=False):
            h = normalised(conv_loop(h, conv.w.numpy(), conv.b.numpy(), conv.stride), norm)
        expected = normalised(h.reshape(-1) @ torso.fc.w.numpy() + torso.fc.b.numpy(), torso.norms[-1])
        np.testing.assert_allclose(torso(tf.constant(x[n : n + 1]))[0].numpy(), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(UsageError, match="--conv-norm 'rows'"):
        ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1), layer_norm=True, conv_norm="rows")
    with pytest.raises(UsageError, match="pass --layer-norm"):
        PolicyValueNet(NetworkConfig(torso="impala_shallow", conv_norm="map"), (36, 36), ActionSpec.discrete(2))


def test_dense_units_widen_the_conv_torsos_dense_layer_and_nothing_else():
    """--dense-units 512 on the shallow torso: the same convs, a dense layer of 512 units whose
    output is ReLU(h @ W + b) over the flattened last conv map (a NumPy loop of the convs), and a
    network whose heads read 512 features. 0 keeps the torso's own 256; the mlp and pool torsos,
    which have no such layer, and a negative width are refused."""
    wide = ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1), dense_units=512)
    own = ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1))
    assert wide.out_size == 512 and own.out_size == 256
    assert [c.w.shape for c in wide.convs] == [c.w.shape for c in own.convs]
    assert wide.fc.w.shape == (own.fc.w.shape[0], 512)
    x = np.random.default_rng(2).integers(0, 256, (2, 4, 36, 36), dtype=np.uint8)
    images = channels_last(tf.constant(x)).numpy() / 255.0
    for n in range(2):
        expected = np.maximum(plain_convs(wide, images[n]).reshape(-1) @ wide.fc.w.numpy() + wide.fc.b.numpy(), 0.0)
        np.testing.assert_allclose(wide(tf.constant(x[n : n + 1]))[0].numpy(), expected, rtol=1e-4, atol=1e-4)
    net = PolicyValueNet(NetworkConfig(torso="impala_shallow", dense_units=512), (36, 36), ActionSpec.discrete(3))
    assert net.torso.out_size == 512
    with pytest.raises(UsageError, match="--dense-units.*mlp torso has none.*--mlp-sizes"):
        PolicyValueNet(NetworkConfig(dense_units=512), (4,), ActionSpec.discrete(2))
    with pytest.raises(UsageError, match="--dense-units.*pool torso has none"):
        PolicyValueNet(NetworkConfig(torso="pool", dense_units=512), (36, 36), ActionSpec.discrete(2))
    with pytest.raises(UsageError, match="--dense-units -1"):
        ConvTorso("impala_shallow", (36, 36, 4), np.random.default_rng(1), dense_units=-1)
