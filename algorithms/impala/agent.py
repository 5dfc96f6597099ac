"""IMPALA's agent: acting and learning on one set of variables.

The learner's inference calls `ImpalaAgent.act` on a batch of envs; complete unrolls of
T + 1 steps come back to `ImpalaAgent.learn` in batches (see loss.py for a row's layout).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from algorithms import optim
from algorithms.agent import AgentContext, SequenceLayout, Unroll, act_signature, time_major
from algorithms.distribute import DataParallel
from algorithms.impala.config import ImpalaConfig
from algorithms.impala.loss import impala_loss
from algorithms.networks import NetworkConfig, PolicyValueNet
from seedfleet.errors import UsageError


class ImpalaAgent(tf.Module):
    """Acting and learning for IMPALA on one set of variables."""

    def __init__(self, config: ImpalaConfig, network: NetworkConfig, env: AgentContext, decay_steps: int = 0):
        """`decay_steps`: learner steps over which the learning rate falls to 0 (0: constant)."""
        super().__init__()
        if config.epochs < 1:
            raise UsageError(f"epochs must be at least 1, got {config.epochs}")
        self.config = config
        self.devices = DataParallel(env.train_devices, config.batch_size)
        with self.devices.scope():
            self.net = PolicyValueNet(network, env.obs_shape, env.num_actions, env.seed, env.obs_dtype)
            self.optimizer = optim.build(
                optim.make_optimizer(config.optimizer, config.learning_rate, config.optimizer_epsilon,
                                     decay_steps * config.epochs, config.rmsprop_decay),
                self.net.trainable_variables,
            )
        self.layout = SequenceLayout(config.unroll_length, overlap=1)
        self.num_actions = env.num_actions
        self.batch_size = config.batch_size
        # Per-step outputs of `act` that unrolls keep beside the action.
        self.extras_spec = {"logits": ((env.num_actions,), np.dtype(np.float32))}
        signature = act_signature(env.obs_shape, env.obs_dtype, self.initial_state(1))
        self.act = tf.function(self._act, input_signature=signature)
        self.policy = tf.function(self._policy, input_signature=signature)
        self._step, self._gradients = self.devices.compile(self._learn, self._shard_gradients, network.jit_compile)

    def learn(self, batch: Unroll) -> dict:
        """`epochs` gradient steps on a batch of unrolls given batch-major ([B, T+1, ...]),
        shared out over the training devices (algorithms/distribute.py)."""
        return self._step(self.devices.shard(batch))

    def checkpointed(self) -> dict[str, tf.Module]:
        """What a checkpoint holds: the network and the optimizer's state."""
        return {"net": self.net, "optimizer": self.optimizer}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.net.initial_state(batch_size)

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner; every env acts from the same policy, so nothing to do."""

    def _act(self, obs, reward, first, env_ids, state):
        """One step for a batch of envs: actions sampled from pi, logits kept for V-trace."""
        del reward, env_ids  # every env follows the same stochastic policy
        logits, _, new_state = self.net(obs[None], first[None], state)
        logits = logits[0]
        actions = tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]
        return actions, {"logits": logits}, new_state

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export): the most likely action; returns (actions, logits, state)."""
        del reward, env_ids
        logits, _, new_state = self.net(obs[None], first[None], state)
        return tf.argmax(logits[0], axis=-1, output_type=tf.int32), logits[0], new_state

    def _shard_gradients(self, batch: Unroll) -> tuple[list[tf.Tensor], dict]:
        """The loss's gradients and metrics on one device's batch-major shard."""
        with tf.GradientTape() as tape:
            loss, metrics = impala_loss(self.net, self.config, time_major(batch))
        return tape.gradient(loss, self.net.trainable_variables), metrics

    def _learn(self, batch: Unroll) -> dict:
        """The learner step on a batch (one device) or its shards (several).

        The metrics are the first step's (the policy as it acted, rho against the actors'
        lag alone), with the last step's mean rho beside them when there are several, and
        "skipped_steps": the gradient steps left out for a non-finite gradient. With several
        devices each metric is the mean of the devices' values."""
        variables = self.net.trainable_variables
        skipped = tf.constant(0.0)
        for epoch in range(self.config.epochs):
            grads, step_metrics = self.devices.mean(self.devices.run(self._gradients, batch))
            grad_norm, applied = optim.apply_clipped(self.optimizer, grads, variables, self.config.max_grad_norm)
            skipped += 1.0 - tf.cast(applied, tf.float32)
            if epoch == 0:
                metrics = {**step_metrics, "grad_norm": grad_norm}
        metrics["skipped_steps"] = skipped
        if self.config.epochs > 1:
            metrics["policy/last_epoch_mean_rho"] = step_metrics["policy/mean_rho"]
        metrics["learning_rate"] = optim.current_learning_rate(self.optimizer)
        return metrics
