"""IQN's agent: epsilon-greedy acting on the online network, learning from replay with a target network.

Replay (algorithms/replay_trainer.py, uniform) holds sequences of `unroll_length` transitions
that overlap by n_step rows, so every transition is the first of exactly one window of rows
t .. t+n inside one sequence. A learner step draws `batch_size` sequences and one such window
from each (uniform over sequences and offsets, so uniform over transitions), rebuilds the frame
stacks of x_t and x_{t+m} (`QuantileNet.torso.row_states`), and trains on those single rows: the
torso reads each state once.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import EVAL_EPSILON, AgentContext, SequenceLayout, Unroll, acting_graphs
from seedfleet.algorithms.distribute import DataParallel
from seedfleet.algorithms.iqn.config import IQNConfig, QuantileReplayConfig
from seedfleet.algorithms.iqn.loss import n_step_targets, quantile_huber_loss
from seedfleet.algorithms.iqn.network import FeatureNet, QuantileNet
from seedfleet.algorithms.layers import copy_variables
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.errors import UsageError

WINDOW_FIELDS = ("reward", "terminated", "truncated", "life_lost", "first")


def check_config(config: QuantileReplayConfig, network: NetworkConfig, minimums: dict[str, int]) -> None:
    """The settings IQN and QR-DQN need, each refused in one line; `minimums`: the head's own
    sizes and counts, each with its least value."""
    if network.lstm_size:
        raise UsageError("IQN trains on single transitions: it needs a network without --lstm-size")
    if not 1 <= config.n_step <= config.unroll_length:
        raise UsageError(f"--n-step must be in 1..--unroll-length ({config.unroll_length}), got {config.n_step}")
    for name, least in {"batch_size": 1, **minimums}.items():
        if getattr(config, name) < least:
            bound = f"at least {least}" if least else "0 or more"
            raise UsageError(f"--{name.replace('_', '-')} must be {bound}, got {getattr(config, name)}")
    if config.kappa <= 0:
        raise UsageError(f"--kappa must be positive, got {config.kappa}")
    for name in ("epsilon_start", "epsilon_end"):
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise UsageError(f"--{name.replace('_', '-')} is a probability in [0, 1], got {getattr(config, name)}")


class IQNAgent(tf.Module):
    """IQN's agent, and QR-DQN's (algorithms/qrdqn/agent.py), which changes only its head:
    `HEAD_MINIMUMS` and `make_network`."""

    HEAD_MINIMUMS = {"num_tau_samples": 1, "num_tau_prime_samples": 1, "num_quantile_samples": 1,
                     "quantile_embedding": 1, "quantile_hidden": 0}  # 0: --quantile-hidden 0 is no layer

    def __init__(self, config: QuantileReplayConfig, network: NetworkConfig, env: AgentContext):
        super().__init__()
        check_config(config, network, self.HEAD_MINIMUMS)
        self.config = config
        self.devices = DataParallel(env.train_devices, config.batch_size)
        with self.devices.scope():
            self.online, self.target = self.make_network(network, env), self.make_network(network, env)
            self.optimizer = optim.Optimizer("adam", self.online.trainable_variables, config.learning_rate,
                                             config.adam_epsilon)
        self.actions = env.actions
        self.layout = SequenceLayout(config.unroll_length, overlap=config.n_step)
        self.batch_size = config.batch_size
        self.extras_spec: dict = {}
        self.evaluating = tf.Variable(np.zeros(env.max_envs, bool), trainable=False, name="evaluating")
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")  # training envs' steps
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="learner_steps")
        self._rng = np.random.default_rng(env.seed)  # each draw's window in its sequence
        self._stacks = "frames" in self.initial_state(1)  # frames are stacked on the learner
        self._copy_target()
        self.act, self.policy = acting_graphs(self._act, self._policy, env, self.initial_state(1))
        self._step, self._gradients = self.devices.compile(self._learn, self._shard_gradients,
                                                            jit_compile=network.jit_compile)

    def make_network(self, network: NetworkConfig, env: AgentContext) -> FeatureNet:
        """The online network, and the target (a second call)."""
        c: IQNConfig = self.config
        return QuantileNet(network, env.obs_shape, env.actions.num_actions, c.quantile_embedding, c.quantile_hidden,
                           (c.num_tau_samples, c.num_tau_prime_samples, c.num_quantile_samples), env.seed,
                           env.obs_dtype)

    def checkpointed(self) -> dict[str, tf.Module | tf.Variable]:
        """Online and target networks, the optimizer, the learner steps (they time the target
        copies) and the env steps (they time epsilon)."""
        return {"online": self.online, "target": self.target, "optimizer": self.optimizer, "steps": self.steps,
                "env_steps": self.env_steps}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.online.initial_state(batch_size)

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner: evaluation envs act with epsilon 0.001."""
        self.evaluating[lo:hi].assign(np.full(hi - lo, evaluation))

    def epsilon(self) -> tf.Tensor:
        """The training envs' exploration rate: epsilon_start until replay holds min_replay_size
        transitions, then linearly down to epsilon_end over exploration_steps (Dopamine's
        linearly_decaying_epsilon), counted in the training envs' steps."""
        c = self.config
        after_warmup = tf.cast(self.env_steps, tf.float32) - float(c.min_replay_size)
        fallen = tf.clip_by_value(after_warmup / max(c.exploration_steps, 1), 0.0, 1.0)
        return c.epsilon_start + (c.epsilon_end - c.epsilon_start) * fallen

    def _copy_target(self) -> None:
        copy_variables(self.online.trainable_variables, self.target.trainable_variables)

    def _greedy(self, obs, first, state, spread: bool = False):
        features, new_state = self.online.features(obs, first, state)
        q = self.online.q_values(features, spread)
        return tf.argmax(q, axis=-1, output_type=tf.int32), q, new_state

    def _act(self, obs, reward, first, env_ids, state):
        """One step for a batch of envs: a random action with probability epsilon, else the greedy one."""
        del reward
        greedy, _, new_state = self._greedy(obs, first, state)
        evaluating = tf.gather(self.evaluating, env_ids)
        epsilon = tf.where(evaluating, EVAL_EPSILON, self.epsilon())
        random = tf.random.uniform(tf.shape(greedy), 0, self.actions.num_actions, dtype=tf.int32)
        actions = tf.where(tf.random.uniform(tf.shape(greedy)) < epsilon, random, greedy)
        self.env_steps.assign_add(tf.reduce_sum(tf.cast(~evaluating, tf.int64)))
        return actions, {}, new_state

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export) on Q at fixed fractions, so the same state gets
        the same action: returns (actions, Q values, state)."""
        del reward, env_ids
        return self._greedy(obs, first, state, spread=True)

    def initial_priorities(self, chunk: Unroll) -> tf.Tensor:
        """Replay is uniform: every sequence alike."""
        return tf.ones([chunk.size])

    def learn(self, batch: Unroll, weights: np.ndarray | None = None) -> dict:
        """One step on one window from each sampled sequence (batch-major); the importance
        weights of a uniform replay are all 1 and are not used."""
        del weights
        windows = self.windows(batch)
        targets = n_step_targets(windows, self.config.n_step, self.config.discount, self.config.reward_clip,
                                 self.config.life_loss_terminal)
        inputs = {"frames": windows["frames"], "first": windows["first"], "history": windows["history"],
                  "action": windows["action"], **targets._asdict()}
        metrics = self._step(self.devices.shard(inputs))
        metrics["policy/epsilon"] = self.epsilon()
        metrics["priorities"] = tf.ones([self.batch_size])
        return metrics

    def windows(self, batch: Unroll) -> dict[str, np.ndarray]:
        """Rows t .. t+n of each sequence at a random offset t in 0 .. T-n: the fields
        `n_step_targets` reads, and the frames, episode starts, frame history before row t
        (zeros across an episode start) and a_t that the learner step reads."""
        n, size = self.config.n_step, batch.size
        offsets = self._rng.integers(0, self.layout.new_steps, size)
        rows = offsets[:, None] + np.arange(n + 1)
        take = lambda value: np.asarray(value)[np.arange(size)[:, None], rows]  # noqa: E731
        windows = {name: take(getattr(batch, name)) for name in WINDOW_FIELDS}
        windows["frames"] = take(batch.observation)
        windows["action"] = np.asarray(batch.action)[np.arange(size), offsets]
        windows["history"] = self._history(batch, offsets)
        return windows

    @staticmethod
    def _history(batch: Unroll, offsets: np.ndarray) -> np.ndarray:
        """The k-1 frames before row t of each sequence, oldest first, [B, k-1, ...]: from the
        stored state before row 0 where t < k-1, else from the rows. As in `stack_frames`, frame
        t-j stays only if no episode opened in (t-j, t], so rows before the last episode start at
        or before row t are zeros (the stored state already is, for starts before row 0)."""
        if "frames" not in batch.state:
            return np.zeros((batch.size, 0), np.uint8)
        stored = np.asarray(batch.state["frames"])
        size, depth = stored.shape[:2]
        everyone = np.arange(size)[:, None]
        positions = offsets[:, None] + np.arange(-depth, 0)  # the history's rows; negative: the stored state
        from_rows = np.asarray(batch.observation)[everyone, np.maximum(positions, 0)]
        from_state = stored[everyone, np.minimum(positions + depth, depth - 1)]
        row = np.arange(np.shape(batch.first)[1])
        opened = np.asarray(batch.first, bool) & (row[None] <= offsets[:, None])
        last_start = np.where(opened, row[None], -depth - 1).max(axis=1)  # -depth-1: none at or before t
        frame_axes = (1,) * (stored.ndim - 2)
        history = np.where((positions >= 0).reshape(*positions.shape, *frame_axes), from_rows, from_state)
        cleared = (positions < last_start[:, None]).reshape(*positions.shape, *frame_axes)
        return np.where(cleared, 0, history).astype(stored.dtype)

    def _rows(self, inputs: dict, *indices: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor, dict]]:
        """Rows `index` ([B]) of each window, for each index given, with their first flags and the
        states before them; the window's frame stacks are rebuilt once for all of them."""
        def swap(value: tf.Tensor) -> tf.Tensor:  # [B, n+1, ...] <-> [n+1, B, ...]
            return tf.transpose(value, [1, 0, *range(2, len(value.shape))])

        frames, first = inputs["frames"], inputs["first"]
        state = {"frames": inputs["history"]} if self._stacks else {}
        states = {name: swap(value) for name, value in
                  self.online.torso.row_states(swap(frames), swap(first), state).items()}
        rows = []
        for index in indices:
            pick = lambda value, index=index: tf.gather(value, index, batch_dims=1)  # noqa: E731
            rows.append((pick(frames), pick(first), {name: pick(value) for name, value in states.items()}))
        return rows

    def _shard_gradients(self, inputs: dict) -> tuple[list[tf.Tensor], dict]:
        """The loss's gradients and metrics on one device's windows."""
        c = self.config
        batch = tf.shape(inputs["action"])[0]
        row, bootstrap = self._rows(inputs, tf.zeros([batch], tf.int32), tf.cast(inputs["bootstrap_rows"], tf.int32))
        features = self.target.features(*bootstrap)[0]
        best = tf.argmax(self.target.q_values(features), axis=-1, output_type=tf.int32)
        following = self.target.quantiles(features, self.target.target_fractions(batch))
        following = tf.gather(tf.transpose(following, [0, 2, 1]), best, batch_dims=1)  # [B, N']
        targets = inputs["returns"][:, None] + inputs["discounts"][:, None] * following
        taus = self.online.trained_fractions(batch)
        with tf.GradientTape() as tape:
            features = self.online.features(*row)[0]
            quantiles = tf.transpose(self.online.quantiles(features, taus), [0, 2, 1])  # [B, A, N]
            chosen = tf.gather(quantiles, tf.cast(inputs["action"], tf.int32), batch_dims=1)  # [B, N]
            loss, metrics = quantile_huber_loss(chosen, taus, targets, inputs["mask"], c.kappa)
        return tape.gradient(loss, self.online.trainable_variables), metrics

    def _learn(self, inputs: dict) -> dict:
        """The learner step on the windows (one device) or their shards (several; each metric is
        then the mean of the devices' values); the target network is copied every
        target_update_period steps. "skipped_steps" is 1 if a non-finite gradient left the
        variables as they were."""
        grads, metrics = self.devices.mean(self.devices.run(self._gradients, inputs))
        metrics["grad_norm"], applied = self.optimizer.apply_clipped(grads, self.config.max_grad_norm or None)
        metrics["skipped_steps"] = 1.0 - tf.cast(applied, tf.float32)
        self.steps.assign_add(1)
        tf.cond(self.steps % self.config.target_update_period == 0, self._copy_target, lambda: None)
        return metrics
