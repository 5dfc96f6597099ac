"""SAC acting and learning on one set of variables: a tanh-squashed Gaussian actor, twin
critics and their Polyak-averaged targets, and the entropy temperature (loss.py has the
equations).

The learner's inference calls `act`: uniform random actions in the env's bounds for the
first `learning_starts` training steps, then samples of the actor; evaluation envs act with
its mean. Both draws come from one N(0, 1) noise per env and action dimension, which
`exploration_correlation` makes an AR(1) process (temporally correlated exploration):

    e_t = c e_{t-1} + sqrt(1 - c^2) z_t,  z_t ~ N(0, 1),  e_0 = z_0 at each episode's first step,

so e_t is N(0, 1) at every step whatever c, and corr(e_t, e_{t+k}) = c^k. With the bounds'
midpoint m and half-range h, the actor's sample is m + h tanh(mean + std e_t) and the random
phase's m + h erf(e_t / sqrt 2), uniform on the bounds since erf(e / sqrt 2) = 2 Phi(e) - 1.
With c = 0 both are the references' white draws. Learning draws its own independent noise:
replay is off-policy, and the noise only picks the data.

Replay (algorithms/replay_trainer.py) keeps one sequence of `n_step` transitions (n + 1 rows)
starting at every env step, and `learn` takes `updates_per_call` gradient steps of each part
in one compiled call, each on its own uniform batch of them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.actions import BOX
from seedfleet.algorithms import optim
from seedfleet.algorithms.agent import AgentContext, SequenceLayout, Unroll, acting_graphs
from seedfleet.algorithms.distribute import DataParallel
from seedfleet.algorithms.layers import Linear, copy_variables
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.networks import MLPTorso
from seedfleet.algorithms.sac.config import SACConfig
from seedfleet.algorithms.sac.loss import (
    actor_loss,
    bounded_log_std,
    critic_loss,
    critic_targets,
    masked_mean,
    n_step_returns,
    polyak_update,
    squashed_sample,
    temperature_loss,
)
from seedfleet.errors import UsageError

ADAM_EPSILON = 1e-8  # PyTorch's default, which SAC's reference implementations train with


class SquashedGaussianActor(tf.Module):
    """Observations -> (mean, log std) of the Gaussian under the tanh, [B, D] each."""

    def __init__(self, network: NetworkConfig, obs_size: int, action_size: int, rng: np.random.Generator):
        super().__init__()
        self.torso = MLPTorso(obs_size, tuple(network.mlp_sizes), rng, network.activation, network.dense_init)
        self.mean = Linear(self.torso.out_size, action_size, 0.01, rng, init=network.dense_init)
        self.log_std = Linear(self.torso.out_size, action_size, 0.01, rng, init=network.dense_init)

    def __call__(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = self.torso(obs)
        return self.mean(features), bounded_log_std(self.log_std(features))


class Critic(tf.Module):
    """(observations, actions scaled to [-1, 1]) -> Q, [B]."""

    def __init__(self, network: NetworkConfig, obs_size: int, action_size: int, rng: np.random.Generator,
                 layer_norm: bool):
        super().__init__()
        self.torso = MLPTorso(obs_size + action_size, tuple(network.mlp_sizes), rng, network.activation,
                              network.dense_init, layer_norm)
        self.head = Linear(self.torso.out_size, 1, 1.0, rng, init=network.dense_init)

    def __call__(self, obs: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        return tf.squeeze(self.head(self.torso(tf.concat([obs, actions], axis=-1))), -1)


class SACAgent(tf.Module):
    def __init__(self, config: SACConfig, network: NetworkConfig, env: AgentContext):
        super().__init__()
        if env.actions.kind != BOX:
            raise UsageError(f"--algo sac acts in Box actions, not {env.actions.describe()}")
        if len(env.obs_shape) != 1:
            raise UsageError(f"--algo sac takes vector observations, got shape {env.obs_shape}")
        if config.batch_size < 1 or config.replay_ratio <= 0 or config.updates_per_call < 1 or config.n_step < 1:
            raise UsageError("--batch-size, --updates-per-call and --n-step must be at least 1 "
                             "and --replay-ratio above 0")
        if not 0.0 <= config.exploration_correlation < 1.0:
            raise UsageError(f"--exploration-correlation must be in [0, 1), got {config.exploration_correlation}")
        if network.layer_norm or network.feature_norm or network.conv_norm != "pixel" or network.dense_units:
            raise UsageError("--algo sac normalises its critics' layers with --critic-layer-norm; --layer-norm, "
                             "--conv-norm, --feature-norm and --dense-units are for the other algorithms' torsos")
        self.config = config
        self.actions = env.actions
        low, high = np.asarray(env.actions.low, np.float32), np.asarray(env.actions.high, np.float32)
        self.center, self.half_range = tf.constant((high + low) / 2), tf.constant((high - low) / 2)
        self.target_entropy = -config.target_entropy_scale * env.actions.size
        self.devices = DataParallel(env.train_devices, config.batch_size)
        rng = np.random.default_rng(env.seed)
        obs_size, size = env.obs_shape[0], env.actions.size
        with self.devices.scope():
            self.actor = SquashedGaussianActor(network, obs_size, size, rng)
            norm = config.critic_layer_norm
            self.critics = [Critic(network, obs_size, size, rng, norm) for _ in range(2)]
            self.targets = [Critic(network, obs_size, size, rng, norm) for _ in range(2)]
            self.log_alpha = tf.Variable(np.log(config.initial_alpha), dtype=tf.float32, name="log_alpha")
            self.critic_variables = [v for critic in self.critics for v in critic.trainable_variables]
            self.target_variables = [v for critic in self.targets for v in critic.trainable_variables]
            self.actor_optimizer = optim.Optimizer("adam", self.actor.trainable_variables,
                                                   config.policy_learning_rate, ADAM_EPSILON)
            self.critic_optimizer = optim.Optimizer("adam", self.critic_variables, config.q_learning_rate, ADAM_EPSILON)
            self.alpha_optimizer = optim.Optimizer("adam", [self.log_alpha], config.q_learning_rate, ADAM_EPSILON)
        copy_variables(self.critic_variables, self.target_variables)
        # rows x_t .. x_{t+n}; consecutive sequences of an env share n rows, so one starts at each step
        self.layout = SequenceLayout(config.n_step, overlap=config.n_step)
        self.updates = config.updates_per_call
        self.batch_size = config.batch_size * self.updates  # transitions per learner step, from replay
        self.extras_spec: dict = {}
        self._rng = np.random.default_rng(env.seed)  # the learner step's noise, drawn here and sharded with its batch
        self.evaluation = tf.Variable(np.zeros(env.max_envs, bool), trainable=False, name="evaluation")
        self.acted = tf.Variable(0, dtype=tf.int64, trainable=False, name="acted")  # training env steps
        self.noise = tf.Variable(np.zeros((env.max_envs, size), np.float32), trainable=False, name="noise")
        self.act, self.policy = acting_graphs(self._act, self._policy, env, {})
        self._step, self._critic_gradients, self._actor_gradients = self.devices.compile(
            self._update, self._shard_critic_gradients, self._shard_actor_gradients, jit_compile=network.jit_compile)

    def checkpointed(self) -> dict[str, tf.Module | tf.Variable]:
        """The actor, both critics and their targets, the temperature, the three optimizers, and
        the training steps acted (so a resumed run does not start its random phase again)."""
        return {"actor": self.actor, "critic1": self.critics[0], "critic2": self.critics[1],
                "target1": self.targets[0], "target2": self.targets[1], "log_alpha": self.log_alpha,
                "actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer,
                "alpha_optimizer": self.alpha_optimizer, "acted": self.acted}

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]:
        return {}

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None:
        """Env ids lo..hi-1 have a new owner: evaluation envs act with the actor's mean."""
        self.evaluation[lo:hi].assign(np.full(hi - lo, evaluation))

    def initial_priorities(self, chunk: Unroll) -> tf.Tensor:
        """Uniform replay: every transition weighs the same."""
        return tf.ones(chunk.size)

    def _scaled(self, actions: tf.Tensor) -> tf.Tensor:
        """Env-unit actions to [-1, 1], as the critics read them."""
        return (actions - self.center) / self.half_range

    def _exploration_noise(self, first: tf.Tensor, env_ids: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
        """Each env's next e_t (module docstring), kept per env id."""
        c = self.config.exploration_correlation
        fresh = tf.random.normal(shape)
        drifted = c * tf.gather(self.noise, env_ids) + np.sqrt(1.0 - c * c) * fresh
        noise = tf.where(first[:, None], fresh, drifted)
        self.noise.scatter_nd_update(env_ids[:, None], noise)
        return noise

    def _act(self, obs, reward, first, env_ids, state):
        del reward, state
        mean, log_std = self.actor(tf.cast(obs, tf.float32))
        noise = self._exploration_noise(first, env_ids, tf.shape(mean))
        sampled, _ = squashed_sample(mean, log_std, noise, self.center, self.half_range)
        uniform = self.center + self.half_range * tf.math.erf(noise / np.sqrt(2.0))
        warming_up = self.acted < self.config.learning_starts
        evaluating = tf.gather(self.evaluation, env_ids)
        actions = tf.where(evaluating[:, None], self.center + self.half_range * tf.tanh(mean),
                           tf.where(warming_up, uniform, sampled))
        self.acted.assign_add(tf.reduce_sum(tf.cast(tf.logical_not(evaluating), tf.int64)))
        return actions, {}, {}

    def _policy(self, obs, reward, first, env_ids, state):
        """The greedy policy (evaluation, export): c + s tanh(mean); returns (actions, [mean, log std], state)."""
        del reward, first, env_ids, state
        mean, log_std = self.actor(tf.cast(obs, tf.float32))
        return self.center + self.half_range * tf.tanh(mean), tf.concat([mean, log_std], axis=-1), {}

    def learn(self, batch: Unroll, weights: np.ndarray | None = None) -> dict:
        """`updates_per_call` updates of the critics, the actor and the temperature, one after
        the other, each on its own `batch_size` of the sequences (batch-major, n + 1 rows each)
        and shared out over the training devices; uniform replay, so `weights` are all 1 and
        the priorities it returns too. The metrics are the updates' means, and "skipped_steps"
        counts the updates a non-finite gradient left out."""
        del weights  # uniform replay
        # [K B, ...] -> [B, K, ...]: column k is update k's batch, and the devices split B. The K B
        # transitions are drawn independently, so any K-way split of them is K uniform batches.
        split = batch.map(lambda a: np.reshape(a, (self.config.batch_size, self.updates, *np.shape(a)[1:])))
        # N(0, 1) under the next action a' (index 0) and the actor's a~ (index 1), per transition:
        # drawn with the batch, so a step on several devices draws what one device would
        noise = self._rng.standard_normal((self.config.batch_size, self.updates, 2, self.actions.size))
        out = self._step(*self.devices.shard((split, noise.astype(np.float32))))
        return {**out, "priorities": tf.ones(self.batch_size)}

    def _transitions(self, batch: Unroll, noise: tf.Tensor, k: tf.Tensor) -> tuple:
        """Update k's sequences on one device's shard: (x_0, a_0, G, gamma_t, x_m, mask, noise)
        (loss.py, `n_step_returns`)."""
        batch, noise = batch.map(lambda rows: tf.gather(rows, k, axis=1)), tf.gather(noise, k, axis=1)
        returns, discounts, last, mask = n_step_returns(tf.cast(batch.reward[:, 1:], tf.float32), batch.first[:, 1:],
                                                        batch.terminated, self.config.discount)
        obs = tf.cast(batch.observation[:, 0], tf.float32)
        bootstrap_obs = tf.cast(tf.gather(batch.observation, last, batch_dims=1), tf.float32)
        return obs, batch.action[:, 0], returns, discounts, bootstrap_obs, mask, noise

    def q_values(self, obs: tf.Tensor, actions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(Q_1(x, a), Q_2(x, a)) of the online critics, actions in env units; [B] each."""
        scaled = self._scaled(actions)
        return self.critics[0](obs, scaled), self.critics[1](obs, scaled)

    def soft_targets(self, rewards: tf.Tensor, discounts: tf.Tensor, next_obs: tf.Tensor,
                     next_noise: tf.Tensor) -> tf.Tensor:
        """The critics' targets y (loss.py) with a' = the actor's sample at x_m (`next_obs`) under
        `next_noise`, [B]."""
        next_mean, next_log_std = self.actor(next_obs)
        next_actions, next_log_prob = squashed_sample(next_mean, next_log_std, next_noise, self.center,
                                                      self.half_range)
        next_scaled = self._scaled(next_actions)
        return critic_targets(rewards, discounts, self.targets[0](next_obs, next_scaled),
                              self.targets[1](next_obs, next_scaled), next_log_prob, tf.exp(self.log_alpha))

    def _shard_critic_gradients(self, batch: Unroll, noise: tf.Tensor, k: tf.Tensor) -> tuple[list, dict]:
        """The critics' gradients and metrics of update k on one device's shard of transitions."""
        obs, actions, rewards, discounts, next_obs, mask, noise = self._transitions(batch, noise, k)
        targets = self.soft_targets(rewards, discounts, next_obs, noise[:, 0])
        with tf.GradientTape() as tape:
            q1, q2 = self.q_values(obs, actions)
            loss_critic = critic_loss(q1, q2, targets, mask)
        metrics = {"loss/critic": loss_critic, "sac/alpha": tf.exp(self.log_alpha),
                   "q/mean": masked_mean(0.5 * (q1 + q2), mask), "sac/target": masked_mean(targets, mask)}
        return tape.gradient(loss_critic, self.critic_variables), metrics

    def _shard_actor_gradients(self, batch: Unroll, noise: tf.Tensor, k: tf.Tensor) -> tuple[list, list, dict]:
        """The actor's and the temperature's gradients and metrics of update k on one device's
        shard, against the critics as they stand when it runs (`_one_update` orders it)."""
        obs, _, _, _, _, mask, noise = self._transitions(batch, noise, k)
        alpha = tf.exp(self.log_alpha)
        with tf.GradientTape(persistent=True) as tape:
            mean, log_std = self.actor(obs)
            pi_actions, log_prob = squashed_sample(mean, log_std, noise[:, 1], self.center, self.half_range)
            pi_scaled = self._scaled(pi_actions)
            loss_actor = actor_loss(log_prob, self.critics[0](obs, pi_scaled), self.critics[1](obs, pi_scaled),
                                    alpha, mask)
            loss_alpha = temperature_loss(self.log_alpha, log_prob, self.target_entropy, mask)
        metrics = {"loss/actor": loss_actor, "loss/temperature": loss_alpha,
                   "policy/entropy": -masked_mean(log_prob, mask), "policy/action_std": tf.reduce_mean(tf.exp(log_std))}
        return (tape.gradient(loss_actor, self.actor.trainable_variables),
                tape.gradient(loss_alpha, [self.log_alpha]), metrics)

    def _update(self, batch: Unroll, noise: tf.Tensor) -> dict:
        """The learner step: `updates_per_call` updates in a graph loop, their metrics' means."""
        def update(k: tf.Tensor, totals: dict) -> tuple[tf.Tensor, dict]:
            metrics = self._one_update(batch, noise, k)
            return k + 1, {key: totals[key] + metrics[key] for key in self.METRICS}

        _, totals = tf.while_loop(lambda k, _: k < self.updates, update,
                                  (tf.constant(0), {key: tf.constant(0.0) for key in self.METRICS}))
        means = {key: value / self.updates for key, value in totals.items()}
        return {**means, "skipped_steps": totals["skipped_steps"]}

    METRICS = ("loss/critic", "loss/actor", "loss/temperature", "sac/alpha", "q/mean", "sac/target",
               "policy/entropy", "policy/action_std", "grad_norm/critic", "grad_norm/actor", "skipped_steps")

    def _one_update(self, batch: Unroll, noise: tf.Tensor, k: tf.Tensor) -> dict:
        """Update k on its batch (one device) or its shards (several: the devices' mean
        gradients): the critics' step and the actor's and the temperature's, the latter two
        taken against the critics before or after the former (`actor_after_critics`; the graph
        keeps the order the code gives reads and writes of a variable), then the targets'
        Polyak step."""
        def actor_part() -> tuple[list, list, dict]:
            return self.devices.mean(self.devices.run(self._actor_gradients, batch, noise, k))

        critic_grads, critic_metrics = self.devices.mean(self.devices.run(self._critic_gradients, batch, noise, k))
        if not self.config.actor_after_critics:
            actor_grads, alpha_grads, metrics = actor_part()
        critic_norm, critic_ok = self.critic_optimizer.apply_clipped(critic_grads)
        if self.config.actor_after_critics:
            actor_grads, alpha_grads, metrics = actor_part()
        metrics = {**metrics, **critic_metrics, "grad_norm/critic": critic_norm}
        metrics["grad_norm/actor"], actor_ok = self.actor_optimizer.apply_clipped(actor_grads)
        if self.config.autotune_alpha:
            self.alpha_optimizer.apply_clipped(alpha_grads)
        polyak_update(self.target_variables, self.critic_variables, self.config.tau)
        metrics["skipped_steps"] = 1.0 - tf.cast(tf.logical_and(critic_ok, actor_ok), tf.float32)
        return metrics
