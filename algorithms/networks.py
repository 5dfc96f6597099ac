"""Networks as plain `tf.Module`s: torsos, frame stacking, an optional LSTM core, heads.

Every network works on time-major sequences, `[T, B, ...]`, and carries an explicit
agent state between calls. Acting is the same function with T = 1, so the learner's
inference and training read one definition of the model.

Agent state (a dict of tensors with a leading batch dimension):
  "frames": the last `frame_stack - 1` frames, [B, k-1, H, W] or [B, k-1, H, W, C] in the
            observation's dtype (stacking only);
  "lstm_h", "lstm_c": the LSTM state, [B, lstm_size] (LSTM only).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.actions import BOX, DISCRETE, ActionSpec
from seedfleet.algorithms.distributions import Categorical, DiagGaussian
from seedfleet.algorithms.image_torsos import ConvTorso, PoolTorso
from seedfleet.algorithms.layers import DENSE_INITS, LayerNorm, Linear
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.pixel_normalization import PixelStatistics
from seedfleet.algorithms.value_normalization import ValueStatistics
from seedfleet.errors import UsageError

State = dict[str, tf.Tensor]
UINT8 = np.dtype(np.uint8)  # frames travel as bytes


ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.tanh}


class MLPTorso(tf.Module):
    """Dense layers, each followed by the activation; with `layer_norm`, by layer normalisation
    and then the activation."""

    def __init__(self, n_in: int, sizes: tuple[int, ...], rng, activation: str = "relu", init: str = "orthogonal",
                 layer_norm: bool = False):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise UsageError(f"--activation {activation!r}: choose from {', '.join(ACTIVATIONS)}")
        if init not in DENSE_INITS:
            raise UsageError(f"--dense-init {init!r}: choose from {', '.join(DENSE_INITS)}")
        dims = (n_in, *sizes)
        self.layers = [Linear(a, b, np.sqrt(2), rng, init=init) for a, b in zip(dims[:-1], dims[1:], strict=True)]
        # None, not an empty list, without it: checkpoints of torsos without it keep their layout
        self.norms = [LayerNorm(size) for size in sizes] if layer_norm else None
        self.activation = ACTIVATIONS[activation]
        self.out_size = dims[-1]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = self.activation(self.norms[i](x) if self.norms else x)
        return x


def is_image(obs_shape: tuple[int, ...]) -> bool:
    """[H, W] grey frames and [H, W, C] images go through a conv torso; vectors through an MLP."""
    return len(obs_shape) in (2, 3)


def stack_frames(frames: tf.Tensor, first: tf.Tensor, history: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Stacks the last k frames on the learner, so actors send one frame per step.

    Args:
      frames: [T, B, *frame] the newest frame at each step ([H, W] or [H, W, C]).
      first: [T, B] bool, true where frames[t] opens an episode.
      history: [B, k-1, *frame] the k-1 frames before frames[0] (oldest first).

    Returns:
      stacked: [T, B, k, *frame], index k-1 the current frame, index 0 the oldest.
      new_history: [B, k-1, *frame], the state for the next call.

    Frame t-j belongs in the stack at t only if no episode opened in (t-j, t], that
    is, none of first[t-j+1 .. t] is set; frames of an earlier episode are zeros. The
    history already holds zeros where it predates an episode start, so flags before
    the sequence count as false.

    The stacks are one gather of whole frames from the history, the frames and one frame of
    zeros, by an index [T, B, k] built from the flags (the zero frame's where a frame is left
    out): for 4 unrolls of 33 Atari frames 0.45 ms against 1.96 for masking each of the k-1
    older windows and stacking them (BENCHMARKS.md, "The learner step's small ops").
    """
    k = history.shape[1] + 1
    t_len, batch = tf.shape(frames)[0], tf.shape(frames)[1]
    frame_rank = len(frames.shape) - 2
    frame_shape = list(frames.shape[2:])
    older = tf.transpose(history, [1, 0, *range(2, 2 + frame_rank)])  # [k-1, B, ...]: row r * B + b
    pool = tf.concat([tf.reshape(older, [-1, *frame_shape]), tf.reshape(frames, [-1, *frame_shape]),
                      tf.zeros([1, *frame_shape], frames.dtype)], axis=0)
    zero_frame = (t_len + k - 1) * batch  # the pool's last row
    first_padded = tf.concat([tf.zeros([k - 1, batch], tf.bool), first], axis=0)
    current = (tf.range(t_len)[:, None] + k - 1) * batch + tf.range(batch)[None]  # [T, B]: frame t's row
    valid = tf.ones_like(first)
    rows = [None] * k
    rows[k - 1] = current
    for j in range(1, k):
        valid = tf.logical_and(valid, tf.logical_not(first_padded[k - j : k - j + t_len]))
        rows[k - 1 - j] = tf.where(valid, current - j * batch, zero_frame)
    stacked = tf.gather(pool, tf.stack(rows, axis=2))
    return stacked, stacked[-1, :, 1:]


class LSTMCore(tf.Module):
    """An LSTM whose state is zeroed where an episode starts."""

    def __init__(self, n_in: int, size: int, rng):
        super().__init__()
        self.size = size
        self.kernel = Linear(n_in + size, 4 * size, 1.0, rng)

    def __call__(self, xs: tf.Tensor, first: tf.Tensor, h: tf.Tensor, c: tf.Tensor):
        outputs = []
        for t in range(xs.shape[0]):
            keep = 1.0 - tf.cast(first[t], tf.float32)[:, None]
            h, c = h * keep, c * keep
            i, f, g, o = tf.split(self.kernel(tf.concat([xs[t], h], axis=-1)), 4, axis=-1)
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            outputs.append(h)
        return tf.stack(outputs), h, c


class RecurrentTorso(tf.Module):
    """Frame stacking, torso and optional LSTM: the part every agent shares.

    `__call__(obs [T, B, ...], first [T, B], state, extra=None) -> (features [T, B, F], new_state)`;
    `extra` ([T, B, extra_size]) joins the torso's features before the core.
    """

    def __init__(self, config: NetworkConfig, obs_shape: tuple[int, ...], seed: int = 0, extra_size: int = 0,
                 obs_dtype: np.dtype = UINT8, pixel_statistics: PixelStatistics | None = None):
        """`pixel_statistics`: what --pixel-norm standardises the pixels with, kept up to date by the
        agent; an agent that keeps none refuses --pixel-norm here."""
        super().__init__()
        if config.dense_init not in DENSE_INITS:
            raise UsageError(f"--dense-init {config.dense_init!r}: choose from {', '.join(DENSE_INITS)}")
        rng = np.random.default_rng(seed)
        self.config = config
        self.obs_shape = tuple(obs_shape)
        self.obs_dtype = np.dtype(obs_dtype)
        kind = config.torso
        self.frame_stack = config.frame_stack or (4 if len(obs_shape) == 2 else 1)
        if kind == "auto":
            kind = "mlp" if not is_image(obs_shape) else "nature" if min(obs_shape[:2]) >= 36 else "minatar"
        if kind == "mlp":
            if len(obs_shape) != 1:
                raise UsageError(f"the mlp torso takes vector observations, got shape {obs_shape}")
            if self.frame_stack != 1:
                raise UsageError("frame stacking is for image observations")
            if config.feature_norm:
                raise UsageError("--feature-norm normalises a conv torso's dense layer; --layer-norm normalises "
                                 "every layer of the mlp torso")
            self.torso = MLPTorso(obs_shape[0], tuple(config.mlp_sizes), rng, config.activation, config.dense_init,
                                  config.layer_norm)
        elif kind in (*ConvTorso.SPECS, "pool"):
            if not is_image(obs_shape):
                raise UsageError(f"the {kind} torso takes [H, W] or [H, W, C] images, got shape {obs_shape}")
            dtype = config.compute_dtype if config.compute_dtype != "auto" else "float32"
            stack_shape = (*obs_shape[:2], self.frame_stack * (obs_shape[2] if len(obs_shape) == 3 else 1))
            scale = 1.0 / 255 if self.obs_dtype == UINT8 else 1.0
            if config.pixel_norm and (pixel_statistics is None or kind == "pool"):
                raise UsageError("--pixel-norm standardises a conv torso's pixels by statistics the actor-critic "
                                 f"agents keep: the {kind} torso here has none")
            if kind == "pool" and (config.layer_norm or config.feature_norm):
                raise UsageError("--layer-norm and --feature-norm normalise a conv or mlp torso's layers: the pool "
                                 "torso has none")
            self.torso = PoolTorso(stack_shape, rng, scale) if kind == "pool" else \
                ConvTorso(kind, stack_shape, rng, tf.as_dtype(dtype), scale, config.layer_norm, config.dense_init,
                          config.conv_padding, config.feature_norm, config.conv_norm, config.dense_units,
                          pixel_statistics)
        else:
            raise UsageError(f"unknown torso {config.torso!r}")
        if config.pixel_norm and kind == "mlp":
            raise UsageError("--pixel-norm standardises image pixels; vector observations have "
                             "--normalize-observations")
        if config.conv_norm != "pixel" and not (config.layer_norm and kind in ConvTorso.SPECS):
            raise UsageError(f"--conv-norm {config.conv_norm} says what --layer-norm normalises a conv torso's "
                             "layers over: pass --layer-norm, on a conv torso")
        if config.conv_padding != "valid" and kind not in ConvTorso.SPECS:
            raise UsageError(f"--conv-padding pads a conv torso's layers: the {kind} torso has none")
        if config.dense_units and kind not in ConvTorso.SPECS:
            raise UsageError(f"--dense-units widens a conv torso's dense layer: the {kind} torso has none"
                             + (" (--mlp-sizes sets the mlp torso's layers)" if kind == "mlp" else ""))
        self.kind = kind
        core_in = self.torso.out_size + extra_size
        self.core = LSTMCore(core_in, config.lstm_size, rng) if config.lstm_size else None
        self.out_size = config.lstm_size or core_in
        self.rng = rng

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        state = {}
        if self.kind != "mlp" and self.frame_stack > 1:
            state["frames"] = np.zeros((batch_size, self.frame_stack - 1, *self.obs_shape), self.obs_dtype)
        if self.core is not None:
            state["lstm_h"] = np.zeros((batch_size, self.core.size), np.float32)
            state["lstm_c"] = np.zeros((batch_size, self.core.size), np.float32)
        return state

    def __call__(self, obs: tf.Tensor, first: tf.Tensor, state: State, extra=None) -> tuple[tf.Tensor, State]:
        new_state = {}
        if "frames" in state:
            obs, new_state["frames"] = stack_frames(obs, first, state["frames"])
        elif self.kind != "mlp":
            obs = obs[:, :, None]
        t_len, batch = obs.shape[0], tf.shape(obs)[1]
        flat = tf.reshape(obs, tf.concat([[t_len * batch], tf.shape(obs)[2:]], axis=0))
        features = tf.reshape(self.torso(flat), [t_len, batch, self.torso.out_size])
        if extra is not None:
            features = tf.concat([features, extra], axis=-1)
        if self.core is not None:
            features, new_state["lstm_h"], new_state["lstm_c"] = self.core(
                features, first, state["lstm_h"], state["lstm_c"]
            )
        return features, new_state

    def row_states(self, obs: tf.Tensor, first: tf.Tensor, state: State) -> State:
        """The agent state before each row of [T, B] sequences, [T, B, ...]: row t alone, with
        its state, gives what step t of the sequence gives. Frame stacks only (the frames before
        x_t, zeros across an episode start); an LSTM's state would depend on the weights."""
        if self.core is not None:
            raise UsageError("single-transition minibatches need a torso without an LSTM")
        if "frames" not in state:
            return {}
        stacked, _ = stack_frames(obs, first, state["frames"])
        return {"frames": stacked[:, :, :-1]}


class CategoricalHead(Linear):
    """The logits of a categorical policy over `actions.num_actions` actions (a small gain:
    nearly uniform at first)."""

    distribution = Categorical

    def __init__(self, n_in: int, actions: ActionSpec, rng: np.random.Generator, initial_log_std: float = 0.0):
        del initial_log_std  # a Gaussian's
        super().__init__(n_in, actions.num_actions, 0.01, rng)


class GaussianHead(Linear):
    """[mean, log std] of a diagonal Gaussian over a Box's `actions.size` values: the mean from
    the features (small gain: near 0 at first), the log std a variable of its own, the same in
    every state (PPO's MuJoCo setups), starting at `initial_log_std` (0: std 1)."""

    distribution = DiagGaussian

    def __init__(self, n_in: int, actions: ActionSpec, rng: np.random.Generator, initial_log_std: float = 0.0):
        super().__init__(n_in, actions.size, 0.01, rng)
        self.log_std = tf.Variable(tf.fill([actions.size], float(initial_log_std)), name="log_std")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        mean = super().__call__(x)
        return tf.concat([mean, tf.broadcast_to(tf.cast(self.log_std, mean.dtype), tf.shape(mean))], axis=-1)


POLICY_HEADS = {DISCRETE: CategoricalHead, BOX: GaussianHead}  # by kind of actions (seedfleet/actions.py)


class PolicyValueNet(tf.Module):
    """Actor-critic network: the policy's distribution parameters and a state value, read off
    one torso, or (`shared_torso` off, as PPO's MuJoCo setups and PPO-DNA's Atari networks have
    it) the value off a torso of its own, so the value loss does not pull on the policy's
    features. A frame stack is input, not memory: the value's torso reads the stack the
    policy's keeps in the state. With `value_statistics` the value head's output is a normalised
    value and the net returns its denormalisation (algorithms/value_normalization.py). With
    `auxiliary_value` (a value torso of its own only) the policy's torso carries a value head
    too, which only PPO-DNA's distillation reads and trains (algorithms/impala/distillation.py)."""

    def __init__(self, config: NetworkConfig, obs_shape: tuple[int, ...], actions: ActionSpec, seed=0,
                 obs_dtype: np.dtype = UINT8, value_statistics: ValueStatistics | None = None,
                 auxiliary_value: bool = False):
        super().__init__()
        self.value_statistics = value_statistics
        # --pixel-norm's statistics, shared by the policy's torso and the value's; the agent updates them
        self.pixel_statistics = PixelStatistics(tuple(obs_shape), 1.0 / 255 if np.dtype(obs_dtype) == UINT8 else 1.0) \
            if config.pixel_norm else None
        self.torso = RecurrentTorso(config, obs_shape, seed, obs_dtype=obs_dtype,
                                    pixel_statistics=self.pixel_statistics)
        self.policy = POLICY_HEADS[actions.kind](self.torso.out_size, actions, self.torso.rng, config.initial_log_std)
        self.value_torso = None
        if not config.shared_torso:
            if config.lstm_size:
                raise UsageError("--lstm-size needs --shared-torso: a value torso of its own (--no-shared-torso, "
                                 "the default on Box envs) keeps no memory")
            self.value_torso = RecurrentTorso(config, obs_shape, seed + 1, obs_dtype=obs_dtype,
                                              pixel_statistics=self.pixel_statistics)
        self.value = Linear(self.torso.out_size, 1, 1.0, self.torso.rng)
        self.distribution = self.policy.distribution  # reads the policy's params
        self.auxiliary_value = None
        if auxiliary_value:
            if self.value_torso is None:
                raise UsageError("an auxiliary value head on the policy's torso is distilled from a value torso of "
                                 "its own: it needs --no-shared-torso")
            self.auxiliary_value = Linear(self.torso.out_size, 1, 1.0, self.torso.rng)

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.torso.initial_state(batch_size)

    def __call__(self, obs, first, state: State):
        """Returns (policy params [T, B, P], values [T, B], new_state)."""
        features, new_state = self.torso(obs, first, state)
        value_features = features if self.value_torso is None else self.value_torso(obs, first, state)[0]
        values = tf.squeeze(self.value(value_features), -1)
        if self.value_statistics is not None:
            values = self.value_statistics.denormalize(values)
        return self.policy(features), values, new_state

    def policy_side(self, obs, first, state: State) -> tuple[tf.Tensor, tf.Tensor]:
        """The policy's torso alone: (policy params [T, B, P], auxiliary values [T, B]), in float32."""
        features, _ = self.torso(obs, first, state)
        auxiliary = tf.squeeze(self.auxiliary_value(features), -1)
        return tf.cast(self.policy(features), tf.float32), tf.cast(auxiliary, tf.float32)

    @property
    def loss_variables(self) -> list[tf.Variable]:
        """What the actor-critic losses train: every trainable variable but the auxiliary value head's."""
        if self.auxiliary_value is None:
            return list(self.trainable_variables)
        auxiliary = {id(v) for v in self.auxiliary_value.trainable_variables}
        return [v for v in self.trainable_variables if id(v) not in auxiliary]

    @property
    def policy_variables(self) -> list[tf.Variable]:
        """What distillation trains: the policy's torso, its head and the auxiliary value head."""
        return [*self.torso.trainable_variables, *self.policy.trainable_variables,
                *self.auxiliary_value.trainable_variables]

    def value_scale(self) -> tf.Tensor:
        """sigma, the spread the value head's output is in units of (1 without normalisation)."""
        return tf.constant(1.0) if self.value_statistics is None else tf.identity(self.value_statistics.std)

    def row_states(self, obs, first, state: State) -> State:
        """The state before each row, [T, B, ...] (RecurrentTorso.row_states)."""
        return self.torso.row_states(obs, first, state)


class QNet(tf.Module):
    """A Q network: the torso (frame stacking, optional LSTM), then one linear layer of
    Q(x, a) for each action (PQN's)."""

    def __init__(self, config: NetworkConfig, obs_shape: tuple[int, ...], num_actions: int, seed=0,
                 obs_dtype: np.dtype = UINT8):
        super().__init__()
        self.torso = RecurrentTorso(config, obs_shape, seed, obs_dtype=obs_dtype)
        self.head = Linear(self.torso.out_size, num_actions, 1.0, self.torso.rng)

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.torso.initial_state(batch_size)

    def __call__(self, obs, first, state: State):
        """Returns (q [T, B, A] in float32, new_state)."""
        features, new_state = self.torso(obs, first, state)
        return tf.cast(self.head(features), tf.float32), new_state

    def row_states(self, obs, first, state: State) -> State:
        """The state before each row, [T, B, ...] (RecurrentTorso.row_states)."""
        return self.torso.row_states(obs, first, state)


class DuelingQNet(tf.Module):
    """R2D2's network: torso, then [previous action one-hot, previous reward], LSTM, dueling heads.

    Q(x, a) = V(x) + A(x, a) - mean_a' A(x, a') (Wang et al., 2016). Where an episode
    opens, the previous action and reward are zeroed: they belong to another episode.
    The previous reward is clipped to [-1, 1] as an input only.
    """

    def __init__(self, config: NetworkConfig, obs_shape: tuple[int, ...], num_actions: int, seed=0,
                 obs_dtype: np.dtype = UINT8):
        super().__init__()
        self.torso = RecurrentTorso(config, obs_shape, seed, extra_size=num_actions + 1, obs_dtype=obs_dtype)
        self.value = Linear(self.torso.out_size, 1, 1.0, self.torso.rng)
        self.advantage = Linear(self.torso.out_size, num_actions, 1.0, self.torso.rng)
        self.num_actions = num_actions

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.torso.initial_state(batch_size)

    def __call__(self, obs, first, prev_action, prev_reward, state: State):
        """Returns (q [T, B, A], new_state)."""
        keep = 1.0 - tf.cast(first, tf.float32)
        extra = tf.concat(
            [
                tf.one_hot(prev_action, self.num_actions) * keep[..., None],
                (tf.clip_by_value(tf.cast(prev_reward, tf.float32), -1.0, 1.0) * keep)[..., None],
            ],
            axis=-1,
        )
        features, new_state = self.torso(obs, first, state, extra)
        advantage = self.advantage(features)
        q = self.value(features) + advantage - tf.reduce_mean(advantage, axis=-1, keepdims=True)
        return q, new_state
