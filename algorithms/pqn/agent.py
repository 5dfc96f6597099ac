"""PQN's agent: epsilon-greedy acting and Q(lambda) learning on one set of variables.

The learner's inference calls `PQNAgent.act` on a batch of envs and keeps, beside each action,
max_a Q(x_t, a) of the acting network; complete unrolls of T + 1 rows come back to
`PQNAgent.learn` in batches, whose Q(lambda) targets (loss.py) are computed once from those
values. The batch is then cut into its B x T single transitions, each with the frames its
stack adds (`QNet.row_states`), and trained on in `epochs` passes of `minibatches` random
minibatches, one gradient step each, as PPO trains.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import EVAL_EPSILON, AgentContext, SequenceLayout, Unroll, acting_graphs, over_steps
from seedfleet.algorithms.distribute import DataParallel
from seedfleet.algorithms.graph import graph_function
from seedfleet.algorithms.impala.loss import policy_lag
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import QNet
from seedfleet.algorithms.pqn.config import PQNConfig
from seedfleet.algorithms.pqn.loss import pqn_loss, q_lambda_targets
from seedfleet.errors import UsageError


def check_config(config: PQNConfig, network: NetworkConfig) -> None:
    """The settings PQN needs, each refused in one line."""
    if network.lstm_size:
        raise UsageError("PQN trains each transition alone: it needs a network without --lstm-size")
    if config.epochs < 1 or config.minibatches < 1:
        raise UsageError(f"--epochs and --minibatches must be at least 1, got {config.epochs} and {config.minibatches}")
    if (config.batch_size * config.unroll_length) % config.minibatches:
        raise UsageError(f"a batch's {config.batch_size} x {config.unroll_length} transitions do not split into "
                         f"{config.minibatches} equal minibatches")
    if not 0.0 <= config.q_lambda <= 1.0:
        raise UsageError(f"--q-lambda is in [0, 1], got {config.q_lambda}")
    for name in ("epsilon_start", "epsilon_end"):
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise UsageError(f"--{name.replace('_', '-')} is a probability in [0, 1], got {getattr(config, name)}")


class PQNAgent(tf.Module):
    """Acting and learning for PQN on one set of variables."""

    def __init__(self, config: PQNConfig, network: NetworkConfig, env: AgentContext, decay_steps: int = 0):
        """`decay_steps`: learner steps over which the learning rate falls to 0 (0: constant)."""
        super().__init__()
        check_config(config, network)
        self.config = config
        self.updates_per_batch = config.epochs * config.minibatches
        self.devices = DataParallel(env.train_devices, config.batch_size * config.unroll_length // config.minibatches)
        with self.devices.scope():
            self.net = QNet(network, env.obs_shape, env.actions.num_actions, env.seed, env.obs_dtype)
            self.optimizer = optim.Optimizer(config.optimizer, self.net.trainable_variables, config.learning_rate,
                                             config.optimizer_epsilon, decay_steps * self.updates_per_batch)
        self.layout = SequenceLayout(config.unroll_length, overlap=1)
        self.actions = env.actions
        self.batch_size = config.batch_size
        self._rng = np.random.default_rng(env.seed)  # the order of each pass's minibatches
        # Kept beside each action: max_a Q(x_t, a) of the acting network (the targets' V_t), and
        # the optimizer's update count at acting time (the policy lag).
        self.extras_spec = {"value": ((), np.dtype(np.float32)), "policy_version": ((), np.dtype(np.int64))}
        self.evaluating = tf.Variable(np.zeros(env.max_envs, bool), trainable=False, name="evaluating")
        # frames trained on per update, so that epsilon follows the frames through the update count
        self.frames_per_update = config.batch_size * config.unroll_length * env.frame_skip / self.updates_per_batch
        self.act, self.policy = acting_graphs(self._act, self._policy, env, self.initial_state(1))
        self._step, self._gradients = self.devices.compile(self._update, self._shard_gradients,
                                                            jit_compile=network.jit_compile)
        self._row_states = graph_function(self._batch_row_states)

    def checkpointed(self) -> dict[str, tf.Module]:
        """What a checkpoint holds: the network and the optimizer's state (epsilon follows its update count)."""
        return {"net": self.net, "optimizer": self.optimizer}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.net.initial_state(batch_size)

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner: evaluation envs act with epsilon 0.001."""
        self.evaluating[lo:hi].assign(np.full(hi - lo, evaluation))

    def epsilon(self) -> tf.Tensor:
        """The training envs' exploration rate: from epsilon_start, linearly to epsilon_end once
        exploration_frames have been trained on, then flat."""
        c = self.config
        if c.exploration_frames <= 0:
            return tf.constant(c.epsilon_end, tf.float32)
        frames = tf.cast(self.optimizer.iterations, tf.float32) * self.frames_per_update
        fallen = tf.minimum(frames / c.exploration_frames, 1.0)
        return c.epsilon_start + (c.epsilon_end - c.epsilon_start) * fallen

    def _act(self, obs, reward, first, env_ids, state):
        """One step for a batch of envs: a random action with probability epsilon, else the greedy one."""
        del reward
        q, new_state = self.net(obs[None], first[None], state)
        q = q[0]
        greedy = tf.argmax(q, axis=-1, output_type=tf.int32)
        random = tf.random.uniform(tf.shape(greedy), 0, self.actions.num_actions, dtype=tf.int32)
        epsilon = tf.where(tf.gather(self.evaluating, env_ids), EVAL_EPSILON, self.epsilon())
        actions = tf.where(tf.random.uniform(tf.shape(greedy)) < epsilon, random, greedy)
        version = tf.fill(tf.shape(actions), tf.cast(self.optimizer.iterations, tf.int64))
        return actions, {"value": tf.reduce_max(q, axis=-1), "policy_version": version}, new_state

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export): returns (actions, Q values, state)."""
        del reward, env_ids
        q, new_state = self.net(obs[None], first[None], state)
        return tf.argmax(q[0], axis=-1, output_type=tf.int32), q[0], new_state

    def learn(self, batch: Unroll) -> dict[str, float]:
        """`epochs` passes over a batch of unrolls given batch-major ([B, T+1, ...]), each in
        `minibatches` random minibatches of its B x T transitions, one gradient step each,
        shared out over the training devices. The metrics are means over the first pass (its
        lag against the acting policy), with the epsilon the batch was acted with about and
        "skipped_steps" counting the steps of all passes left out for a non-finite gradient."""
        epsilon = float(self.epsilon())
        transitions = self._transitions(batch)
        size = len(transitions["action"])
        passes = []
        for _ in range(self.config.epochs):
            steps = []
            for rows in np.split(self._rng.permutation(size), self.config.minibatches):
                minibatch = tf.nest.map_structure(lambda v, rows=rows: v[rows], transitions)
                steps.append({k: float(v) for k, v in self._step(self.devices.shard(minibatch)).items()})
            passes.append(steps)
        metrics = {name: over_steps(passes[0], name) for name in passes[0][0]}
        metrics["skipped_steps"] = float(sum(step["skipped_steps"] for steps in passes for step in steps))
        metrics["learning_rate"] = float(self.optimizer.learning_rate())
        metrics["policy/epsilon"] = epsilon
        return metrics

    def _transitions(self, batch: Unroll) -> dict:
        """The batch's B x T transitions t -> t+1, unroll by unroll: x_t, first, the state before
        x_t, a_t, the target G_t, the real-transition mask and the acting policy's version."""
        targets, mask = q_lambda_targets(batch, self.config)
        states = self._row_states(batch.observation, batch.first, batch.state)

        def rows(value) -> np.ndarray:
            value = np.asarray(value)
            return value[:, : self.config.unroll_length].reshape(-1, *value.shape[2:])

        return {
            "observation": rows(batch.observation), "first": rows(batch.first),
            "state": {name: rows(value) for name, value in states.items()}, "action": rows(batch.action),
            "target": rows(targets), "mask": rows(mask), "policy_version": rows(batch.extras["policy_version"]),
        }

    def _batch_row_states(self, observation, first, state) -> dict:
        """The state before each row of a batch-major batch, batch-major [B, T+1, ...]."""
        def swap(v: tf.Tensor) -> tf.Tensor:  # [B, T+1, ...] <-> [T+1, B, ...]
            return tf.transpose(v, [1, 0, *range(2, len(v.shape))])

        states = self.net.row_states(swap(tf.convert_to_tensor(observation)), swap(tf.convert_to_tensor(first)), state)
        return {name: swap(value) for name, value in states.items()}

    def _shard_gradients(self, minibatch: dict) -> tuple[list[tf.Tensor], dict]:
        """The loss's gradients and metrics on one device's transitions, with the policy lag."""
        with tf.GradientTape() as tape:
            q, _ = self.net(minibatch["observation"][None], minibatch["first"][None], minibatch["state"])
            loss, metrics = pqn_loss(q[0], minibatch["action"], minibatch["target"], minibatch["mask"])
        lag = policy_lag(self.optimizer.iterations, minibatch["policy_version"],
                         tf.cast(minibatch["mask"], tf.float32), self.updates_per_batch)
        metrics = {**metrics, **lag}
        return tape.gradient(loss, self.net.trainable_variables), metrics

    def _update(self, minibatch: dict) -> dict:
        """One gradient step on a minibatch (one device) or its shards (several): the metrics of
        its loss (means over the devices), the gradient norm, and "skipped_steps" 1 if the
        gradient was not finite and nothing changed."""
        grads, metrics = self.devices.mean(self.devices.run(self._gradients, minibatch))
        grad_norm, applied = self.optimizer.apply_clipped(grads, self.config.max_grad_norm)
        return {**metrics, "grad_norm": grad_norm, "skipped_steps": 1.0 - tf.cast(applied, tf.float32)}
