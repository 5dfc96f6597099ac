"""R2D2 acting and learning on one set of variables (plus the target network).

Acting is epsilon-greedy on the online network, with one epsilon per env id (Ape-X).
Sequences are stored with the agent state before their first row (stored-state
strategy); their first priority comes from the Q values seen while acting, so a new
sequence costs no extra forward pass.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import EVAL_EPSILON, AgentContext, SequenceLayout, Unroll, acting_graphs, time_major
from seedfleet.algorithms.distribute import DataParallel
from seedfleet.algorithms.graph import graph_function
from seedfleet.algorithms.layers import copy_variables
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import DuelingQNet
from seedfleet.algorithms.r2d2.config import R2D2Config
from seedfleet.algorithms.r2d2.loss import q_of_actions, r2d2_loss, sequence_priorities, sequence_td


class R2D2Agent(tf.Module):
    def __init__(self, config: R2D2Config, network: NetworkConfig, env: AgentContext):
        """One exploration rate per env id, for `env.max_envs` ids (set_epsilons sets them)."""
        super().__init__()
        self.config = config
        self.devices = DataParallel(env.train_devices, config.batch_size)
        with self.devices.scope():
            self.online = DuelingQNet(network, env.obs_shape, env.actions.num_actions, env.seed, env.obs_dtype)
            self.target = DuelingQNet(network, env.obs_shape, env.actions.num_actions, env.seed, env.obs_dtype)
            self.optimizer = optim.Optimizer("adam", self.online.trainable_variables, config.learning_rate,
                                             config.adam_epsilon)
        self.actions = env.actions
        self.layout = SequenceLayout(config.burn_in + config.unroll_length, overlap=config.burn_in + 1)
        self.batch_size = config.batch_size
        self.extras_spec = {"q": ((env.actions.num_actions,), np.dtype(np.float32))}
        self.epsilons = tf.Variable(np.zeros(env.max_envs, np.float32), trainable=False, name="epsilons")
        self.training_epsilons = np.zeros(env.max_envs, np.float32)
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="learner_steps")
        self._copy_target()
        self.act, self.policy = acting_graphs(self._act, self._policy, env, self.initial_state(1))
        self._step, self._gradients = self.devices.compile(self._learn, self._shard_gradients,
                                                            jit_compile=network.jit_compile)
        self.initial_priorities = graph_function(self._initial_priorities)

    def checkpointed(self) -> dict[str, tf.Module | tf.Variable]:
        """What a checkpoint holds: online and target networks, optimizer, learner steps
        (they time the target copies). Epsilons follow the actors, not the checkpoint."""
        return {"online": self.online, "target": self.target, "optimizer": self.optimizer, "steps": self.steps}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        state = self.online.initial_state(batch_size)
        state["prev_action"] = np.zeros(batch_size, np.int32)
        return state

    def set_epsilons(self, epsilons: np.ndarray) -> None:
        """Exploration rate per env id; ids past the array keep the last rate."""
        full = np.full(self.epsilons.shape[0], epsilons[-1], np.float32)
        full[: len(epsilons)] = epsilons[: len(full)]
        self.training_epsilons = full
        self.epsilons.assign(full)

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner: evaluation envs act with epsilon 0.001."""
        values = np.full(hi - lo, EVAL_EPSILON, np.float32) if evaluation else self.training_epsilons[lo:hi]
        self.epsilons[lo:hi].assign(values)

    def _copy_target(self) -> None:
        copy_variables(self.online.trainable_variables, self.target.trainable_variables)

    def _q(self, obs, reward, first, state):
        net_state = {k: v for k, v in state.items() if k != "prev_action"}
        q, new_state = self.online(obs[None], first[None], state["prev_action"][None], reward[None], net_state)
        return q[0], new_state

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export): returns (actions, Q values, state)."""
        del env_ids
        q, new_state = self._q(obs, reward, first, state)
        actions = tf.argmax(q, axis=-1, output_type=tf.int32)
        new_state["prev_action"] = actions
        return actions, q, new_state

    def _act(self, obs, reward, first, env_ids, state):
        q, new_state = self._q(obs, reward, first, state)
        greedy = tf.argmax(q, axis=-1, output_type=tf.int32)
        random = tf.random.uniform(tf.shape(greedy), 0, self.actions.num_actions, dtype=tf.int32)
        explore = tf.random.uniform(tf.shape(greedy)) < tf.gather(self.epsilons, env_ids)
        actions = tf.where(explore, random, greedy)
        new_state["prev_action"] = actions
        return actions, {"q": q}, new_state

    def _initial_priorities(self, batch: Unroll) -> tf.Tensor:
        """Priorities of new sequences (batch-major) from their acting-time Q values.

        The acting network's own greedy value stands in for the target network's
        double-Q estimate; the first training step replaces it.
        """
        batch = time_major(batch)
        b = self.config.burn_in
        q = tf.cast(batch.extras["q"][b:], tf.float32)
        q_taken = q_of_actions(q[:-1], batch.action[b:-1])
        td, mask = sequence_td(q_taken, tf.reduce_max(q[1:], axis=-1), batch, self.config)
        return sequence_priorities(td, mask, self.config.priority_eta)

    def learn(self, batch: Unroll, weights: np.ndarray | None = None) -> dict:
        """One step on sampled sequences (batch-major) with their importance weights (none:
        all 1), shared out over the training devices (algorithms/distribute.py); returns
        metrics, "priorities" and "skipped_steps" (1 if a non-finite gradient left the
        variables as they were: the priorities are then not to be used)."""
        if weights is None:
            weights = np.ones(self.batch_size, np.float32)
        return self._step(*self.devices.shard((batch, weights)))

    def _shard_gradients(self, batch: Unroll, weights: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor, dict]:
        """The loss's gradients, the sequences' new priorities and the metrics on one device's shard."""
        with tf.GradientTape() as tape:
            loss, priorities, metrics = r2d2_loss(self.online, self.target, self.config, time_major(batch), weights)
        return tape.gradient(loss, self.online.trainable_variables), priorities, metrics

    def _learn(self, batch: Unroll, weights: tf.Tensor) -> dict:
        """The learner step on a batch (one device) or its shards (several; each metric is
        then the mean of the devices' values)."""
        grads, priorities, metrics = self.devices.run(self._gradients, batch, weights)
        grads, metrics, priorities = self.devices.mean(grads), self.devices.mean(metrics), \
            self.devices.concat(priorities)
        metrics["grad_norm"], applied = self.optimizer.apply_clipped(grads, self.config.max_grad_norm)
        metrics["skipped_steps"] = 1.0 - tf.cast(applied, tf.float32)
        self.steps.assign_add(1)
        tf.cond(self.steps % self.config.target_update_period == 0, self._copy_target, lambda: None)
        metrics["priorities"] = priorities
        return metrics
