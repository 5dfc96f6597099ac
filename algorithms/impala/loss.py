"""The IMPALA loss (Espeholt et al., 2018): an actor-critic trained with V-trace targets.

One flow: the learner's inference calls `ImpalaAgent.act` on a batch of envs; complete
unrolls of T + 1 steps come back to `ImpalaAgent.learn` in batches.

An unroll row t holds what the env returned at t (observation x_t, the reward and
termination flags of the transition into x_t, `first` where x_t opens an episode) and
what the agent did at x_t (action a_t, the behaviour policy's params). The transition t -> t+1 thus
reads reward[t+1], terminated[t+1] and first[t+1]:

  * terminated[t+1]: x_{t+1} is terminal, so gamma_t = 0 and nothing is bootstrapped;
  * truncated[t+1] (time limit): x_{t+1} is the last observation of an unfinished
    episode; gamma_t = gamma and the target bootstraps from V(x_{t+1});
  * first[t+1]: x_{t+1} is a reset observation, so t -> t+1 is not a real transition
    (its action was never applied to a live episode). It is cut: gamma_t = 0 and an
    importance weight of zero, so v_t = V(x_t), its advantage is zero, and the traces of
    the steps before it stop there. It also carries no loss (the mask below).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.distributions import Distribution
from seedfleet.algorithms.impala import vtrace
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.networks import PolicyValueNet


def transitions(batch: Unroll, config: ImpalaConfig) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Rewards, discounts and the real-transition mask for t -> t+1, each [T, B].

    Truncation needs nothing here: its discount stays gamma, so the target bootstraps.
    With `life_loss_terminal` a transition that lost a life counts as terminal for the
    targets (DeepMind's Atari setting: nothing is bootstrapped across a lost life), while
    the game, its next observation and the reported return go on.
    """
    rewards = tf.cast(batch.reward[1:], tf.float32)
    if config.reward_clip > 0:
        rewards = tf.clip_by_value(rewards, -config.reward_clip, config.reward_clip)
    real = tf.logical_not(batch.first[1:])
    terminal = batch.terminated[1:]
    if config.life_loss_terminal:
        terminal = tf.logical_or(terminal, batch.life_lost[1:])
    not_terminal = 1.0 - tf.cast(terminal, tf.float32)
    discounts = config.discount * not_terminal * tf.cast(real, tf.float32)
    return rewards, discounts, real


def masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """The mean of x over the transitions where mask is 1 (0 when there are none)."""
    return tf.reduce_sum(mask * x) / tf.maximum(tf.reduce_sum(mask), 1.0)


def policy_lag(iterations: tf.Tensor, policy_version: tf.Tensor, mask: tf.Tensor, updates_per_batch: int) -> dict:
    """The policy lag: learner steps (batches of `updates_per_batch` updates) between the policy
    that acted (the optimizer's update count then) and this one, mean and max over the real
    transitions (mask 1)."""
    lag = tf.cast(iterations - policy_version, tf.float32) / updates_per_batch
    return {"policy/lag": masked_mean(lag, mask), "policy/lag_max": tf.reduce_max(tf.where(mask > 0, lag, 0.0))}


def masked_moments(x: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean and (population) variance of x over the transitions where mask is 1."""
    mean = masked_mean(x, mask)
    return mean, masked_mean(tf.square(x - mean), mask)


def normalized(advantages: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """(A - mean) / (std + 1e-8) over the real transitions of the batch (PPO's and Sample
    Factory's advantage normalisation). With sparse rewards (Pong pays every few hundred
    steps) raw advantages are small beside the value loss in the shared torso's gradient;
    normalised, the policy gradient has the same scale on every task, whatever its rewards."""
    return standardized(advantages, *masked_moments(advantages, mask))


def standardized(x: tf.Tensor, mean: tf.Tensor, variance: tf.Tensor) -> tf.Tensor:
    """(x - mean) / (std + 1e-8)."""
    return (x - mean) / (tf.sqrt(variance) + 1e-8)


def running_moments(state: tf.Tensor, mean: tf.Tensor, variance: tf.Tensor, rate: float) -> tuple:
    """Moving averages of the minibatches' advantage moments, with this minibatch's taken in.

    `state` holds (s1, s2, w), sums kept as exponential moving averages at rate beta of each
    minibatch's mean a, mean square a^2 (its variance plus its mean squared) and 1:

      s1 <- (1 - beta) s1 + beta a,   s2 <- (1 - beta) s2 + beta a^2,   w <- (1 - beta) w + beta,

    so s1 / w and s2 / w are averages whose weights sum to 1 (debiased, as Adam's moments are:
    from (0, 0, 0) the first minibatch's own moments come back exactly). Returns the running
    mean s1 / w, variance s2 / w - (s1 / w)^2 and the new state."""
    keep = 1.0 - rate
    state = tf.stack([keep * state[0] + rate * mean, keep * state[1] + rate * (variance + tf.square(mean)),
                      keep * state[2] + rate])
    running_mean = state[0] / state[2]
    return running_mean, tf.maximum(state[1] / state[2] - tf.square(running_mean), 0.0), state


def advantage_scale(config: ImpalaConfig, mean, variance, state) -> tuple[tf.Tensor, tf.Tensor, dict]:
    """The moments that `normalize_advantages` scales a minibatch's advantages by, and the running
    moments' metrics: with `advantage_moments` "minibatch" (or no `state`) the minibatch's own
    `mean` and `variance`; with "running" those of `running_moments` over about one pass (beta =
    1 / minibatches). A minibatch of a few unrolls, a few envs' consecutive steps, may hold no
    reward at all on a game that pays rarely: its advantages are then the value's small errors,
    which its own std scales up to the size of a minibatch that saw the game pay. The running
    moments keep such a minibatch small, as the batch-wide moments of PPO's shuffled minibatches
    do. Given a `state`, the metrics carry the new one ("advantage/running_*", for the next step)
    and "advantage/quiet", 1 when this minibatch's own std is below half the running one (a
    minibatch its own moments would scale up over twice)."""
    if state is None:
        return mean, variance, {}
    running_mean, running_variance, state = running_moments(state, mean, variance, 1.0 / config.minibatches)
    metrics = {"advantage/running_sum": state[0], "advantage/running_square_sum": state[1],
               "advantage/running_weight": state[2],
               "advantage/quiet": tf.cast(4.0 * variance < running_variance, tf.float32)}
    if config.advantage_moments == "running":
        return running_mean, running_variance, metrics
    return mean, variance, metrics


def explained_variance(targets: tf.Tensor, values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """1 - Var(v - V) / Var(v) over real transitions: 1 for a value function that predicts its
    targets, 0 for one no better than their mean, below 0 for worse; NaN when the targets do
    not vary (nothing to explain)."""
    _, target_variance = masked_moments(targets, mask)
    _, residual_variance = masked_moments(targets - values, mask)
    return tf.where(target_variance > 0, 1.0 - residual_variance / tf.maximum(target_variance, 1e-30), np.nan)


def pooled_moments(metrics: dict[str, float], quantity: str) -> tuple[float, float]:
    """The batch's mean and mean square of "target" (v) or "residual" (v - V) over its real
    transitions, from the steps' mean per-transition sums and real share."""
    real = max(metrics["value/real_share"], 1e-12)
    return (metrics[f"value/{quantity}_sum_per_transition"] / real,
            metrics[f"value/{quantity}_square_sum_per_transition"] / real)


def pooled_explained_variance(metrics: dict[str, float]) -> float:
    """Explained variance over a whole batch from its minibatches' per-transition sums (each
    minibatch's sum over real transitions of v, v^2, v - V and (v - V)^2, divided by its
    transitions; the minibatches hold equal numbers, so the means over steps are the batch's
    sums over its transitions). With E[x] = S_x / real share, Var(x) = E[x^2] - E[x]^2 and
    EV = 1 - Var(v - V) / Var(v); NaN when the targets do not vary. Each minibatch's own EV
    misses the spread between its few unrolls and the rest, and reads low with many minibatches."""
    target_mean, target_square = pooled_moments(metrics, "target")
    residual_mean, residual_square = pooled_moments(metrics, "residual")
    target_variance, residual_variance = target_square - target_mean ** 2, residual_square - residual_mean ** 2
    return 1.0 - residual_variance / target_variance if target_variance > 0 else float("nan")


def policy_shift(log_ratio: tf.Tensor, mask: tf.Tensor, clip_ratio: float, clip_rho_threshold: float) -> dict:
    """How far the learner's pi is from the behaviour policy mu on the batch's actions,
    r_t = pi(a_t|x_t) / mu(a_t|x_t):

      approx_kl     = mean((r - 1) - log r), Schulman's unbiased, never negative estimate of
                      KL(mu || pi) from samples of mu (what PPO implementations print);
      clip_fraction = the share of transitions whose ratio the loss clips: |r - 1| > eps for
                      the clipped surrogate (clip_ratio eps > 0), r > rho_bar for IMPALA's
                      truncated importance weights.
    """
    log_ratio = tf.where(mask > 0, log_ratio, tf.zeros_like(log_ratio))
    ratio = tf.exp(log_ratio)
    clipped = tf.abs(ratio - 1.0) > clip_ratio if clip_ratio > 0 else ratio > clip_rho_threshold
    return {
        "policy/approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),
        "policy/clip_fraction": masked_mean(tf.cast(clipped, tf.float32), mask),
    }


def one_step_advantages(rewards, discounts, vs, values, bootstrap_value) -> tf.Tensor:
    """A_t = r_t + gamma_t v_{t+1} - V(x_t) (v the V-trace targets, v_T = V(x_T)): V-trace's
    policy-gradient advantage without its rho, which the clipped surrogate's ratio replaces."""
    vs_next = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    return tf.stop_gradient(rewards + discounts * vs_next - values)


def clipped_surrogate_loss(log_ratio, advantages, mask, clip_ratio: float, weights=None) -> tf.Tensor:
    """APPO's policy loss (Petrenko et al., 2020): PPO's clipped surrogate on V-trace targets.

      L = -mean(min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)),   r_t = pi(a_t|x_t) / mu(a_t|x_t)

    with A_t from `one_step_advantages`. The ratio against the behaviour policy mu stands
    where IMPALA has the clipped rho in A_t; the clip stops a batch from pulling pi far
    from mu over several epochs. At r_t = 1 the gradient is IMPALA's, -A_t grad log pi.
    Cut transitions (mask 0) carry nothing.

    With `weights` w_t, the decoupled form (Hilton et al., 2022, "Batch size-invariance for
    policy optimization"): r_t = pi / pi_prox against a proximal policy, and

      L = -mean(w_t min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)),   w_t = pi_prox / mu (constant)

    The clip then bounds how far the passes move pi from pi_prox, whatever the actors' lag;
    w_t carries the correction from mu to pi_prox, and at r_t = 1 the gradient is
    -w_t A_t grad log pi. See `impala_loss` for the pi_prox and the truncation seedfleet takes.
    """
    ratio = tf.exp(tf.where(mask > 0, log_ratio, tf.zeros_like(log_ratio)))
    clipped = tf.clip_by_value(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
    surrogate = tf.minimum(ratio * advantages, clipped * advantages)
    if weights is not None:
        surrogate = tf.stop_gradient(weights) * surrogate
    return -tf.reduce_sum(mask * surrogate) / tf.cast(tf.size(mask), tf.float32)


def proximal_terms(proximal: Distribution, actions, target_logp, behaviour_logp, real, config: ImpalaConfig):
    """(log r_t, w_t) of the decoupled surrogate with `proximal_clip`: r_t = pi / pi_prox, where
    pi_prox is the learner's policy as the learner step began (the "proximal_policy" extra,
    ImpalaAgent.learn), and w_t = min(rho_bar, pi_prox / mu), truncated at V-trace's
    policy-gradient rho_bar as IMPALA truncates pi / mu. On the step's first minibatch pi =
    pi_prox, so r_t = 1 and the gradient is IMPALA's truncated-rho policy gradient; the actors'
    lag moves w_t, not the clip."""
    proximal_logp = proximal.log_prob(actions)
    log_weights = tf.where(real, proximal_logp - behaviour_logp, tf.zeros_like(proximal_logp))
    return target_logp - proximal_logp, tf.minimum(config.clip_pg_rho_threshold, tf.exp(log_weights))


def impala_loss(net: PolicyValueNet, config: ImpalaConfig, batch: Unroll,
                advantage_state: tf.Tensor | None = None) -> tuple[tf.Tensor, dict]:
    """The IMPALA loss on a time-major batch of unrolls ([T+1, B, ...], state [B, ...]);
    `advantage_state` the running advantage moments' (s1, s2, w) before this minibatch
    (`running_moments`; None: the advantages are normalised, if at all, by their own).

    loss = policy_gradient + baseline_cost * baseline + entropy_cost * entropy, with
      policy_gradient = -mean(log pi(a_t|x_t) * A_t)        (A_t the V-trace advantage)
                        (with clip_ratio > 0: clipped_surrogate_loss instead)
      baseline        = mean(0.5 * (v_t - V(x_t))^2)
      entropy         = -mean(H(pi(.|x_t)))                  (maximising entropy)
    each averaged over the T x B transitions, cut transitions weighted zero.

    The targets v_t and advantages A_t come from V-trace over the values and rhos of either the
    network being trained (V = V_theta, rho = pi_theta / mu) or, with `fixed_targets`, the
    network as the learner step began (V = V_0 and rho = pi_0 / mu, the "start_value" and
    "proximal_policy" extras). Without them, every pass after the first makes its targets with
    a V_theta that earlier minibatches have already fitted to this batch's v_t, so A_t = r_t +
    gamma v_{t+1} - V_theta(x_t) shrinks, and the normalisation scales it back up. The fixed
    targets are the same in every pass, as PPO's GAE is computed once per batch; only V(x_t) in
    the baseline term and pi in the policy terms are theta's. (On BattleZone with the Nature CNN
    they doubled the policy's moves but not the return: BENCHMARKS.md, "targets fixed".)
    """
    params, values, _ = net(batch.observation, batch.first, batch.state)
    actions = batch.action[:-1]
    pi, bootstrap_value, values = net.distribution(params[:-1]), values[-1], values[:-1]
    rewards, discounts, real = transitions(batch, config)
    mask = tf.cast(real, tf.float32)

    target_logp = pi.log_prob(actions)
    behaviour_logp = net.distribution(batch.extras["policy"][:-1]).log_prob(actions)
    log_rhos = tf.where(real, target_logp - behaviour_logp, -np.inf)
    if config.fixed_targets:
        start_values = batch.extras["start_value"]
        target_values, target_bootstrap = start_values[:-1], start_values[-1]
        start_logp = net.distribution(batch.extras["proximal_policy"][:-1]).log_prob(actions)
        target_log_rhos = tf.where(real, start_logp - behaviour_logp, -np.inf)
    else:
        target_values, target_bootstrap, target_log_rhos = values, bootstrap_value, log_rhos
    targets, behind_advantages = value_and_advantage_vtrace(config, target_log_rhos, discounts, rewards,
                                                            target_values, target_bootstrap)
    count = tf.cast(tf.size(mask), tf.float32)
    if config.clip_ratio > 0:
        advantages = one_step_advantages(rewards, discounts, behind_advantages.vs, target_values, target_bootstrap)
    else:
        advantages = behind_advantages.pg_advantages
    advantage_mean, advantage_variance = masked_moments(advantages, mask)
    scale_mean, scale_variance, running = advantage_scale(config, advantage_mean, advantage_variance, advantage_state)
    if config.normalize_advantages:
        advantages = standardized(advantages, scale_mean, scale_variance)
    shift = policy_shift(target_logp - behaviour_logp, mask, config.clip_ratio, config.clip_rho_threshold)
    if config.clip_ratio > 0 and config.proximal_clip:
        proximal = net.distribution(batch.extras["proximal_policy"][:-1])
        log_ratio, weights = proximal_terms(proximal, actions, target_logp, behaviour_logp, real, config)
        pg_loss = clipped_surrogate_loss(log_ratio, advantages, mask, config.clip_ratio, weights)
        # what the loss clips is pi against pi_prox; the approx KL stays against the actors' mu
        shift["policy/clip_fraction"] = policy_shift(log_ratio, mask, config.clip_ratio, 0.0)["policy/clip_fraction"]
        shift["policy/mean_proximal_weight"] = masked_mean(weights, mask)
    elif config.clip_ratio > 0:
        pg_loss = clipped_surrogate_loss(target_logp - behaviour_logp, advantages, mask, config.clip_ratio)
    else:
        pg_loss = -tf.reduce_sum(mask * target_logp * advantages) / count
    start_values = batch.extras["start_value"][:-1] if config.value_clip else None
    return actor_critic_loss(config, pi, pg_loss, values, targets.vs, mask, {
        "policy/mean_rho": masked_mean(tf.exp(tf.minimum(log_rhos, 10.0)), mask),
        **shift,
        # the advantages as the policy loss would take them before any normalisation
        "advantage/mean": advantage_mean,
        "advantage/std": tf.sqrt(advantage_variance),
        **running,
    }, start_values, net.value_scale())


def vtrace_targets(config: ImpalaConfig, log_rhos, discounts, rewards, values, bootstrap_value,
                   lambda_: float | None = None) -> vtrace.VTraceReturns:
    """V-trace over [T, B] transitions with the config's rho_bar, its policy-gradient rho_bar and
    lambda (or `lambda_`)."""
    return vtrace.from_importance_weights(
        log_rhos,
        discounts,
        rewards,
        values,
        bootstrap_value,
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_pg_rho_threshold,
        lambda_=config.vtrace_lambda if lambda_ is None else lambda_,
    )


def value_and_advantage_vtrace(config: ImpalaConfig, log_rhos, discounts, rewards, values,
                               bootstrap_value) -> tuple[vtrace.VTraceReturns, vtrace.VTraceReturns]:
    """The V-trace of the value targets, and the one whose v_{t+1} the policy-gradient advantage
    reads: the same one, or with `advantage_lambda` a second pass whose traces
    c_t = lambda_A min(1, pi/mu) are cut sooner. On policy, A_t = r_t + gamma v_{t+1} - V(x_t) weighs the TD error
    delta_{t+k} by gamma^k lambda_A^(k-1) for k >= 1 (GAE(lambda_A)'s (gamma lambda_A)^k, divided
    by lambda_A): a lower lambda_A makes the policy's advantage shorter-sighted and less noisy while
    the value still learns from the longer targets."""
    targets = vtrace_targets(config, log_rhos, discounts, rewards, values, bootstrap_value)
    if not config.advantage_lambda or config.advantage_lambda == config.vtrace_lambda:
        return targets, targets
    return targets, vtrace_targets(config, log_rhos, discounts, rewards, values, bootstrap_value,
                                   config.advantage_lambda)


def value_errors(config: ImpalaConfig, values, value_targets, start_values=None) -> tuple[tf.Tensor, tf.Tensor]:
    """The squared errors the baseline loss halves, and the share of them clipped.

    Plain: (v_t - V(x_t))^2. With `value_clip` c > 0, PPO's clipped value loss (CleanRL's
    ppo_atari.py, clip_vloss): with V_0 the value as the learner step began,

      V_clip = V_0 + clip(V - V_0, -c, c),    error = max((v - V)^2, (v - V_clip)^2)

    so once a pass has moved V(x_t) more than c past V_0 towards (or beyond) its target, the
    larger, clipped error is the one taken and its gradient is zero: later passes stop fitting
    that transition's value, and the shared torso's gradient is left to the policy's terms."""
    errors = tf.square(value_targets - values)
    if not config.value_clip:
        return errors, tf.zeros_like(errors)
    clipped_values = start_values + tf.clip_by_value(values - start_values, -config.value_clip, config.value_clip)
    clipped_errors = tf.square(value_targets - clipped_values)
    return tf.maximum(errors, clipped_errors), tf.cast(clipped_errors > errors, tf.float32)


def actor_critic_loss(config: ImpalaConfig, pi: Distribution, pg_loss, values, value_targets, mask,
                      metrics: dict, start_values=None, value_scale=1.0) -> tuple[tf.Tensor, dict]:
    """pg_loss + baseline_cost * mean(0.5 * (v - V)^2) / sigma^2 - entropy_cost * mean(H(pi)), the means
    over every transition with the cut ones (mask 0) weighted zero (with `value_clip`, the clipped
    error of `value_errors` against `start_values`); with the loss's metrics and `metrics`. sigma is
    `value_scale`, the spread of a normalised value head's units (PolicyValueNet.value_scale; 1
    without normalisation): the baseline term is then PopArt's loss in normalised units. The metrics
    carry sum(mask v), sum(mask v^2), sum(mask (v - V)), sum(mask (v - V)^2) and sum(mask), each over
    all transitions: averaged over equal shards and minibatches, their ratios are the whole batch's
    means over its real transitions however it was cut, which move those statistics and give the
    batch's explained variance (`pooled_explained_variance`).

    With `entropy_floor` f > 0 the loss adds entropy_floor_cost * max(0, f log|A| - H_bar), H_bar the
    mean entropy over the real transitions: below the floor the entropy's gradient weighs
    entropy_cost + entropy_floor_cost, above it entropy_cost alone. The floor is a share of the
    entropy's range [0, log|A|], so it holds a policy on 18 actions as on 4 (entropy regularisation
    coupled to the number of actions: Mohammadpour, Frejinger and Bacon, ICLR 2024, arXiv 2406.05953)."""
    count = tf.cast(tf.size(mask), tf.float32)
    errors, value_clipped = value_errors(config, values, value_targets, start_values)
    baseline_loss = tf.reduce_sum(mask * 0.5 * errors) / count / tf.square(value_scale)
    entropy = pi.entropy()
    entropy_loss = -tf.reduce_sum(mask * entropy) / count
    loss = pg_loss + config.baseline_cost * baseline_loss + config.entropy_cost * entropy_loss
    mean_entropy = masked_mean(entropy, mask)
    floor_metrics = {}
    if config.entropy_floor:
        shortfall = tf.nn.relu(config.entropy_floor * pi.largest_entropy() - mean_entropy)
        loss += config.entropy_floor_cost * shortfall
        floor_metrics = {"policy/entropy_below_floor": tf.cast(shortfall > 0, tf.float32)}
    return loss, {
        "loss/total": loss,
        "loss/policy": pg_loss,
        "loss/baseline": baseline_loss,
        "loss/entropy": entropy_loss,
        "policy/entropy": mean_entropy,
        **pi.diagnostics(mask, mean_entropy),
        **metrics,
        "value/target_sum_per_transition": tf.reduce_sum(mask * value_targets) / count,
        "value/target_square_sum_per_transition": tf.reduce_sum(mask * tf.square(value_targets)) / count,
        "value/residual_sum_per_transition": tf.reduce_sum(mask * (value_targets - values)) / count,
        "value/residual_square_sum_per_transition": tf.reduce_sum(mask * tf.square(value_targets - values)) / count,
        "value/real_share": tf.reduce_sum(mask) / count,
        **({"value/clip_fraction": masked_mean(value_clipped, mask)} if config.value_clip else {}),
        **floor_metrics,
    }
