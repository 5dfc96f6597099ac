"""SAC's hyperparameters (Haarnoja et al., 2018, with the automatic temperature; CleanRL's
sac_continuous_action.py values) and its task defaults (TensorFlow-free: the CLI reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.actions import BOX
from seedfleet.settings import ANY_FAMILY, Presets, task_presets


@dataclass
class SACConfig:
    discount: float = 0.99  # gamma
    batch_size: int = 256  # transitions per gradient update
    replay_ratio: float = 1.0  # gradient updates per env step, held both ways by the learner
    # Gradient updates one learner step runs, each on its own batch, in one compiled call: it
    # spreads the call's fixed cost (Python, argument conversion, the metrics' read-back) over
    # them. The replay ratio does not move; the acting policy trails by at most this many updates.
    updates_per_call: int = 8
    buffer_size: int = 1_000_000  # transitions kept in replay
    learning_starts: int = 5_000  # env steps of uniform random actions before training starts
    policy_learning_rate: float = 3e-4  # Adam step size of the actor
    q_learning_rate: float = 1e-3  # Adam step size of the twin critics and of the temperature
    tau: float = 0.005  # Polyak averaging of the target critics: theta' <- tau theta + (1 - tau) theta'
    initial_alpha: float = 1.0  # the entropy temperature at the start
    autotune_alpha: bool = True  # tune alpha towards the target entropy; false: alpha stays initial_alpha
    # 0.5 (jaxrl's -|A|/2) passed HalfCheetah's 100k and 300k marks on both seeds, where CleanRL's -|A|
    # (1.0) passed on one, and kept Pendulum, MountainCarContinuous and Hopper (BENCHMARKS.md)
    target_entropy_scale: float = 0.5  # the target entropy is -scale x the action's dimensions
    # Each training env's exploration noise is an AR(1) process of N(0, 1) marginals:
    # e_t = c e_{t-1} + sqrt(1 - c^2) z_t. 0: white noise, the references' default; near 1 the noise
    # drifts for about 1 / (1 - c) steps, which sparse rewards such as MountainCarContinuous's need.
    exploration_correlation: float = 0.0
    # Steps summed in a critic's target (n-step returns, loss.py): y = r_1 + ... + gamma^(m-1) r_m
    # + gamma^m (soft value at x_m), m = n or fewer where the episode ends first. Replay then holds
    # sequences of n + 1 rows, one starting at every env step. 1: SAC's one-step target.
    n_step: int = 1
    checkpoint_replay: bool = False  # checkpoints hold the replay too
    # Within an update: true, the actor's loss is taken against the critics as their own step
    # left them (CleanRL's, jaxrl's and stable-baselines3's order); false, all three losses
    # against the critics before it, and the steps made together.
    actor_after_critics: bool = False  # the actor steps against the critics their step just left
    # Layer normalisation before each of the critics' hidden activations (RLPD's critics, Ball et
    # al., 2023): a critic's value stays bounded on inputs far outside its data, where a plain
    # ReLU critic extrapolates linearly and its bootstrapped targets can run away.
    critic_layer_norm: bool = False  # the critics normalise each hidden layer before its activation


# Box actions on any env family: CleanRL's networks (256-256 ReLU MLPs for the actor and each
# critic), no observation normalisation or reward scaling (neither CleanRL's nor SB3's SAC has
# them), the budget where the MuJoCo references are read, and 2 actors of 2 envs. The references
# act in one env; with 32 the policy that fills replay is the same but each env's episodes run 8x
# slower in env steps, so the first return at a mark comes from an older policy. On HalfCheetah-v5
# (seed 0) 4 envs read 5,136.6 at 100k env steps against 32 envs' 4,341.6, at no cost in env steps
# per second (BENCHMARKS.md, "halfcheetah-sac@envs32").
SAC_BOX = Presets(
    network={"torso": "mlp", "mlp_sizes": (256, 256), "activation": "relu", "jit_compile": True},
    learner={"normalize_observations": False, "scale_rewards": False, "max_frames": 1_000_000},
    launch={"actors": 2, "envs_per_actor": 2},
)
SAC_PRESETS = {(ANY_FAMILY, BOX): SAC_BOX}  # (env family, kind of actions)


def sac_presets(family: str, kind: str) -> Presets:
    return task_presets(SAC_PRESETS, family, kind)
