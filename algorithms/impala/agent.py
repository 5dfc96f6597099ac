"""IMPALA's agent: acting and learning on one set of variables.

The learner's inference calls `ImpalaAgent.act` on a batch of envs; complete unrolls of
T + 1 steps come back to `ImpalaAgent.learn` in batches (see loss.py for a row's layout).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import AgentContext, SequenceLayout, Unroll, acting_graphs, over_steps, time_major
from seedfleet.algorithms.augmentation import shift_transitions, shift_unrolls
from seedfleet.algorithms.distribute import DataParallel
from seedfleet.algorithms.graph import graph_function
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.impala.distillation import OLD_POLICY, VALUE_TARGET, distillation_loss
from seedfleet.algorithms.impala.loss import impala_loss, policy_lag, pooled_explained_variance, pooled_moments
from seedfleet.algorithms.impala.transition_minibatches import (
    Transitions,
    check_transition_minibatches,
    flatten,
    transition_loss,
    unroll_targets,
)
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import PolicyValueNet, is_image
from seedfleet.algorithms.value_normalization import ValueStatistics
from seedfleet.errors import UsageError


class ImpalaAgent(tf.Module):
    """Acting and learning for IMPALA on one set of variables."""

    def __init__(self, config: ImpalaConfig, network: NetworkConfig, env: AgentContext, decay_steps: int = 0):
        """`decay_steps`: learner steps over which the learning rate falls to 0 (0: constant)."""
        super().__init__()
        if config.epochs < 1 or config.minibatches < 1:
            raise UsageError(f"epochs and minibatches must be at least 1, got {config.epochs} and "
                             f"{config.minibatches}")
        if config.batch_size % config.minibatches:
            raise UsageError(f"--batch-size {config.batch_size} does not split into {config.minibatches} minibatches")
        if config.proximal_clip and config.clip_ratio <= 0:
            raise UsageError("--proximal-clip clips the surrogate's ratio: it needs --clip-ratio above 0")
        if not 0.0 <= config.advantage_lambda <= 1.0:
            raise UsageError(f"--advantage-lambda is a trace's lambda in [0, 1] (0: --vtrace-lambda's), got "
                             f"{config.advantage_lambda}")
        if config.value_clip < 0:
            raise UsageError(f"--value-clip is how far a value may move from the step start's (0: off), got "
                             f"{config.value_clip}")
        if config.shuffle_transitions:
            check_transition_minibatches(config, network)
        if config.advantage_moments not in ("minibatch", "running"):
            raise UsageError(f"--advantage-moments is minibatch or running, got {config.advantage_moments!r}")
        if config.advantage_moments == "running" and (config.shuffle_transitions or not config.normalize_advantages):
            raise UsageError("--advantage-moments running scales normalised advantages (--normalize-advantages) on "
                             "minibatches of whole unrolls; --shuffle-transitions' minibatches draw from every unroll")
        if not 0.0 <= config.entropy_floor < 1.0 or config.entropy_floor_cost < 0:
            raise UsageError(f"--entropy-floor is a share of the largest entropy in [0, 1) and --entropy-floor-cost "
                             f"a weight of at least 0, got {config.entropy_floor} and {config.entropy_floor_cost}")
        if not config.normalize_values and config.value_normalization_rate != ImpalaConfig.value_normalization_rate:
            raise UsageError("--value-normalization-rate sets the rate of --normalize-values' statistics: "
                             "it needs --normalize-values")
        if config.random_shift and (config.random_shift < 0 or not is_image(env.obs_shape)
                                    or 2 * config.random_shift >= min(env.obs_shape[:2])):
            raise UsageError(f"--random-shift moves image observations by at most that many pixels, under half "
                             f"their side (0: off), got {config.random_shift} for observations of {env.obs_shape}")
        if config.distill_epochs < 0 or config.distill_beta < 0:
            raise UsageError(f"--distill-epochs counts passes (0: off) and --distill-beta weighs a KL term: both at "
                             f"least 0, got {config.distill_epochs} and {config.distill_beta}")
        self.config = config
        self.updates_per_batch = config.epochs * config.minibatches
        self.devices = DataParallel(env.train_devices, config.batch_size // config.minibatches)
        with self.devices.scope():
            statistics = ValueStatistics(config.value_normalization_rate) if config.normalize_values else None
            self.net = PolicyValueNet(network, env.obs_shape, env.actions, env.seed, env.obs_dtype, statistics,
                                      auxiliary_value=config.distill_epochs > 0)
            self.optimizer = optim.Optimizer(config.optimizer, self.net.loss_variables, config.learning_rate,
                                             config.optimizer_epsilon, decay_steps * self.updates_per_batch,
                                             config.rmsprop_decay, config.adam_relative_steps)
            # distillation's own optimizer over the policy's side, on the same schedule per update
            self.distill_optimizer = optim.Optimizer(
                config.optimizer, self.net.policy_variables, config.learning_rate, config.optimizer_epsilon,
                decay_steps * config.distill_epochs * config.minibatches, config.rmsprop_decay,
                config.adam_relative_steps) if config.distill_epochs else None
        self.layout = SequenceLayout(config.unroll_length, overlap=1)
        self.actions = env.actions
        self.batch_size = config.batch_size
        self._rng = np.random.default_rng(env.seed)  # the order of each pass's minibatches
        # the running advantage moments' (s1, s2, w) (loss.running_moments), carried from step to step;
        # not checkpointed: a resumed run starts them afresh, as a new run does, and they forget in about a pass
        self._advantage_state = np.zeros(3, np.float32)
        # Per-step outputs of `act` that unrolls keep beside the action: the behaviour policy's
        # params (algorithms/distributions.py), and the optimizer's update count at acting time
        # (the policy lag, measured in training).
        params = self.net.distribution.params_size(env.actions.size)
        if config.entropy_floor and self.net.distribution(tf.zeros([1, params])).largest_entropy() is None:
            raise UsageError("--entropy-floor is a share of the policy's largest entropy, and these actions' "
                             "distribution has none (discrete actions only)")
        self.extras_spec = {"policy": ((params,), np.dtype(np.float32)),
                            "policy_version": ((), np.dtype(np.int64))}
        self.act, self.policy = acting_graphs(self._act, self._policy, env, self.initial_state(1))
        gradients = self._shard_transition_gradients if config.shuffle_transitions else self._shard_gradients
        self._step, self._gradients = self.devices.compile(self._update, gradients, jit_compile=network.jit_compile)
        self._outputs = graph_function(lambda shards: self.devices.run(self._shard_outputs, shards))
        if config.distill_epochs:
            self._distill_step, self._distill_gradients = self.devices.compile(
                self._distill_update, self._shard_distill_gradients, jit_compile=network.jit_compile)
        self._targets = graph_function(lambda shards: self.devices.run(self._shard_targets, shards))

    def learn(self, batch: Unroll) -> dict[str, float]:
        """`epochs` passes over a batch of unrolls given batch-major ([B, T+1, ...]), each cut
        into `minibatches` random minibatches of whole unrolls, one gradient step per minibatch
        (PPO's and APPO's schedule; one pass of one minibatch is IMPALA's single step), or with
        `shuffle_transitions` of single transitions drawn across all unrolls
        (transition_minibatches.py). Each minibatch is shared out over the training devices
        (algorithms/distribute.py).

        The metrics are means (maxima for "..._max") over the first pass, whose steps see the batch as it was acted
        (lag and approx KL against the actors' policy), apart from explained variance, taken over
        the whole batch from the first pass's sums; with several passes the last pass's
        mean rho, approx KL and clip fraction come beside them (how far the passes moved pi),
        and "skipped_steps" counts the steps of all passes left out for a non-finite gradient.
        """
        data: Unroll | Transitions = batch
        self.optimizer.start_objective()
        if self.net.pixel_statistics is not None:  # before the passes, which train on what acting will see
            self.net.pixel_statistics.update(batch.observation)
        if self.config.shuffle_transitions:
            data = flatten(batch, self._by_minibatch(self._targets, batch))
        elif self.config.proximal_clip or self.config.fixed_targets or self.config.value_clip:
            params, values = self._step_start(batch)
            data = batch._replace(extras={**batch.extras, "proximal_policy": params, "start_value": values})
        passes = [[self._train_on(minibatch) for minibatch in self._one_pass(data)]
                  for _ in range(self.config.epochs)]
        metrics = {name: over_steps(passes[0], name) for name in passes[0][0]}
        metrics["value/explained_variance"] = pooled_explained_variance(metrics)
        if self.net.value_statistics is not None:  # from the first pass's targets, for the next learner step
            self.net.value_statistics.update(*pooled_moments(metrics, "target"), self.net.value)
            metrics["value/normalization_mean"] = float(self.net.value_statistics.mean.numpy())
            metrics["value/normalization_std"] = float(self.net.value_statistics.std.numpy())
        metrics["skipped_steps"] = float(sum(step["skipped_steps"] for steps in passes for step in steps))
        if self.config.epochs > 1:
            for name in ("mean_rho", "approx_kl", "clip_fraction"):
                metrics[f"policy/last_epoch_{name}"] = over_steps(passes[-1], f"policy/{name}")
        metrics["learning_rate"] = float(self.optimizer.learning_rate())
        if self.config.distill_epochs:
            metrics.update(self._distill(batch))
        return metrics

    def _distill(self, batch: Unroll) -> dict[str, float]:
        """PPO-DNA's distillation passes (distillation.py) over the batch, in minibatches of whole
        unrolls as the passes cut them; pi_old and V are the network's as they begin. Metrics are
        means over its steps (skipped steps summed), the last pass's KL beside them."""
        params, values = self._by_minibatch(self._outputs, batch)  # the network as the passes left it
        data = batch._replace(extras={**batch.extras, OLD_POLICY: params, VALUE_TARGET: values})
        self.distill_optimizer.start_objective()
        passes = [[{k: float(v) for k, v in self._distill_step(self.devices.shard(minibatch)).items()}
                   for minibatch in self._one_pass(data)] for _ in range(self.config.distill_epochs)]
        steps = [step for steps in passes for step in steps]
        metrics = {name: over_steps(steps, name) for name in steps[0]}
        metrics["distill/skipped_steps"] = float(sum(step["distill/skipped_steps"] for step in steps))
        metrics["distill/last_epoch_kl"] = over_steps(passes[-1], "distill/kl")
        return metrics

    def _one_pass(self, data: Unroll | Transitions):
        """One pass's minibatches: the batch's rows in a new random order, cut into `minibatches`
        parts (the whole batch when there is one)."""
        for part in np.array_split(self._rng.permutation(data.size), self.config.minibatches):
            yield data if self.config.minibatches == 1 else tf.nest.map_structure(lambda v, rows=part: v[rows], data)

    def _train_on(self, minibatch: Unroll | Transitions) -> dict[str, float]:
        """One gradient step's metrics; the running advantage moments it returns are kept for the next."""
        step = {k: float(v) for k, v in self._step(self.devices.shard(minibatch), self._advantage_state).items()}
        if "advantage/running_weight" in step:
            self._advantage_state = np.array([step.pop(f"advantage/running_{name}")
                                              for name in ("sum", "square_sum", "weight")], np.float32)
        return step

    def checkpointed(self) -> dict[str, tf.Module]:
        """What a checkpoint holds: the network and the optimizers' state."""
        if self.distill_optimizer is None:
            return {"net": self.net, "optimizer": self.optimizer}
        return {"net": self.net, "optimizer": self.optimizer, "distill_optimizer": self.distill_optimizer}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return self.net.initial_state(batch_size)

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner; every env acts from the same policy, so nothing to do."""

    def _act(self, obs, reward, first, env_ids, state):
        """One step for a batch of envs: actions sampled from pi, its params kept for V-trace
        (a Gaussian's sample unclipped: the actor clips it to the env's bounds)."""
        del reward, env_ids  # every env follows the same stochastic policy
        params, _, new_state = self.net(obs[None], first[None], state)
        params = tf.cast(params[0], tf.float32)
        actions = self.net.distribution(params).sample()
        version = tf.fill(tf.shape(actions)[:1], tf.cast(self.optimizer.iterations, tf.int64))
        return actions, {"policy": params, "policy_version": version}, new_state

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export): the most likely action (a Gaussian's mean,
        clipped to the env's bounds as the actor would); returns (actions, policy params, state)."""
        del reward, env_ids
        params, _, new_state = self.net(obs[None], first[None], state)
        params = tf.cast(params[0], tf.float32)
        actions = tf.clip_by_value(self.net.distribution(params).mode(), self.actions.low, self.actions.high)
        return actions, params, new_state

    def _step_start(self, batch: Unroll) -> tuple[np.ndarray, np.ndarray]:
        """The learner's network on every row of the batch as this learner step begins: its
        policy params [B, T+1, P] (pi_prox of `proximal_clip`) and values [B, T+1] (the
        `fixed_targets`' V); a minibatch at a time, the shapes its steps take. One more forward
        pass per batch: about a twelfth of 4 passes' forward and backward."""
        return self._by_minibatch(self._outputs, batch)

    def _by_minibatch(self, outputs, batch: Unroll):
        """`outputs` (a compiled function of the devices' shards, batch-major outputs) over the
        batch a minibatch of unrolls at a time, the shapes its steps take; joined in NumPy."""
        parts = []
        for rows in np.array_split(np.arange(batch.size), self.config.minibatches):
            shards = self.devices.shard(batch.map(lambda v, rows=rows: v[rows]))
            parts.append(tf.nest.map_structure(np.asarray, self.devices.concat(outputs(shards))))
        return tf.nest.map_structure(lambda *values: np.concatenate(values), *parts)

    def _shard_outputs(self, batch: Unroll) -> tuple[tf.Tensor, tf.Tensor]:
        """The learner's policy params [B, T+1, P] and values [B, T+1] on one device's
        batch-major shard."""
        batch = time_major(batch)
        params, values, _ = self.net(batch.observation, batch.first, batch.state)
        return tf.transpose(tf.cast(params, tf.float32), [1, 0, 2]), tf.transpose(tf.cast(values, tf.float32))

    def _shard_targets(self, batch: Unroll) -> dict:
        """`unroll_targets` on one device's batch-major shard, batch-major ([B, T, ...])."""
        targets = unroll_targets(self.net, self.config, time_major(batch))
        return tf.nest.map_structure(lambda v: tf.transpose(v, [1, 0, *range(2, len(v.shape))]), targets)

    def _shard_gradients(self, batch: Unroll, advantage_state: tf.Tensor) -> tuple[list[tf.Tensor], dict]:
        """The loss's gradients and metrics on one device's batch-major shard, with the policy lag;
        `advantage_state` the running advantage moments before this step."""
        batch = time_major(batch)
        if self.config.random_shift:
            batch = shift_unrolls(batch, self.config.random_shift)
        with tf.GradientTape() as tape:
            loss, metrics = impala_loss(self.net, self.config, batch, advantage_state)
        lag = self._lag(batch.extras["policy_version"][:-1], tf.cast(tf.logical_not(batch.first[1:]), tf.float32))
        return tape.gradient(loss, self.net.loss_variables), {**metrics, **lag}

    def _shard_transition_gradients(self, minibatch: Transitions, advantage_state: tf.Tensor) -> tuple[list, dict]:
        """`transition_loss`'s gradients and metrics on one device's shard, with the policy lag (its
        advantages are the whole batch's, normalised once: no running moments)."""
        del advantage_state
        if self.config.random_shift:
            observation, state = shift_transitions(minibatch.observation, minibatch.state, self.config.random_shift)
            minibatch = minibatch._replace(observation=observation, state=state)
        with tf.GradientTape() as tape:
            loss, metrics = transition_loss(self.net, self.config, minibatch)
        lag = self._lag(minibatch.policy_version, tf.cast(minibatch.mask, tf.float32))
        return tape.gradient(loss, self.net.loss_variables), {**metrics, **lag}

    def _lag(self, policy_version: tf.Tensor, mask: tf.Tensor) -> dict:
        """The policy lag of these transitions against the learner's update count (loss.policy_lag)."""
        return policy_lag(self.optimizer.iterations, policy_version, mask, self.updates_per_batch)

    def _shard_distill_gradients(self, minibatch: Unroll) -> tuple[list[tf.Tensor], dict]:
        """The distillation loss's gradients on the policy's side, and its metrics, on one device's
        batch-major shard."""
        with tf.GradientTape() as tape:
            loss, metrics = distillation_loss(self.net, self.config.distill_beta, time_major(minibatch))
        return tape.gradient(loss, self.net.policy_variables), metrics

    def _distill_update(self, minibatch: Unroll) -> dict:
        """One distillation step (its gradients clipped as the passes' are), with its gradient norm."""
        grads, metrics = self.devices.mean(self.devices.run(self._distill_gradients, minibatch))
        grad_norm, applied = self.distill_optimizer.apply_clipped(grads, self.config.max_grad_norm)
        return {**metrics, "distill/grad_norm": grad_norm, "distill/skipped_steps": 1.0 - tf.cast(applied, tf.float32)}

    def _update(self, minibatch: Unroll, advantage_state: tf.Tensor) -> dict:
        """One gradient step on a minibatch (one device) or its shards (several): the metrics
        of its loss (means over the devices), the gradient norm, and "skipped_steps" 1 if the
        gradient was not finite and nothing changed."""
        grads, metrics = self.devices.mean(self.devices.run(self._gradients, minibatch, advantage_state))
        grad_norm, applied = self.optimizer.apply_clipped(grads, self.config.max_grad_norm)
        return {**metrics, "grad_norm": grad_norm, "skipped_steps": 1.0 - tf.cast(applied, tf.float32)}
