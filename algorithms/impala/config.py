"""IMPALA's hyperparameters, and the defaults V-trace takes on Atari (TensorFlow-free: the CLI reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.actions import BOX, DISCRETE
from seedfleet.settings import ANY_FAMILY, Presets, task_presets


@dataclass
class ImpalaConfig:
    discount: float = 0.99  # gamma
    unroll_length: int = 20  # T: transitions per unroll (rows: T + 1, overlapping by one)
    batch_size: int = 16  # unrolls per learner step
    optimizer: str = "adam"  # adam | rmsprop (TensorFlow 1's: RMSProp's epsilon sits inside the square root)
    learning_rate: float = 1e-3  # the optimizer's step size
    optimizer_epsilon: float = 1e-5  # Adam's or RMSProp's epsilon
    rmsprop_decay: float = 0.99  # RMSProp's rho (decay of the mean square)
    # Adam-Rel (Ellis et al. 2024): Adam's bias corrections count the updates since the learner step began,
    # not since the run began; the moments carry on (algorithms/optim.py). Adam only
    adam_relative_steps: bool = False
    learning_rate_decay: bool = False  # the learning rate falls linearly to 0 at --max-frames
    learning_rate_decay_frames: int = 0  # ... or at this many frames instead (0: --max-frames); a run may stop sooner
    baseline_cost: float = 0.5  # weight of the value loss 0.5 * (v_s - V(x_s))^2
    # PPO's value clip: V(x_s) may move at most this far from its value as the learner step began before the
    # value loss stops pulling it (0: off; CleanRL's ppo_atari.py clips at its clip_coef, 0.1)
    value_clip: float = 0.0
    # PopArt: the value head predicts the targets standardised by running estimates of their mean and spread,
    # so the value loss has one scale whatever the game's rewards (algorithms/value_normalization.py)
    normalize_values: bool = False
    value_normalization_rate: float = 0.01  # beta: each learner step's weight in those running estimates
    entropy_cost: float = 0.01  # weight of the entropy bonus
    # a floor under the policy's entropy as a share of its largest, log |A| (0: off; discrete actions only):
    # while a minibatch's mean entropy is below entropy_floor * log |A|, the bonus weighs entropy_cost +
    # entropy_floor_cost, so one setting holds alike on 4 actions or 18
    entropy_floor: float = 0.0
    entropy_floor_cost: float = 0.02  # the floor's extra weight on the entropy while below it
    max_grad_norm: float = 40.0  # gradients are clipped to this global norm
    clip_rho_threshold: float = 1.0  # rho_bar of the V-trace targets
    clip_pg_rho_threshold: float = 1.0  # rho_bar of the policy-gradient advantage
    vtrace_lambda: float = 1.0  # lambda of the V-trace traces c_t
    # lambda of the traces behind the policy-gradient advantage's v_{t+1} (0: vtrace_lambda); the value
    # targets keep vtrace_lambda (PPO-DNA's split of GAE's lambda between the policy and the value)
    advantage_lambda: float = 0.0
    reward_clip: float = 1.0  # rewards are clipped to [-c, c] for training; 0 turns it off
    life_loss_terminal: bool = False  # Atari: training ends the episode at a lost life; returns stay game scores
    normalize_advantages: bool = False  # policy-gradient advantages scaled to mean 0, std 1 over each minibatch
    # the moments that scale them: "minibatch", each minibatch's own; "running", moving averages of the
    # minibatches' over about one pass (rate 1 / minibatches), so a minibatch that saw no reward stays small
    advantage_moments: str = "minibatch"
    epochs: int = 1  # passes over each batch (APPO: several, with --clip-ratio)
    minibatches: int = 1  # each pass cuts the batch into this many minibatches of whole unrolls, one step each
    clip_ratio: float = 0.0  # PPO's clip on pi/mu in the policy loss (APPO: 0.1); 0: IMPALA's -log pi * A
    proximal_clip: bool = False  # APPO: clip pi against the learner's policy at the step's start, not the actors'
    fixed_targets: bool = False  # V-trace targets and advantages from the network at the step's start, as PPO's GAE
    # each pass's minibatches hold single transitions drawn across all unrolls (PPO's shuffle), not whole
    # unrolls; their targets are the step start network's, as with fixed_targets (feed-forward networks only)
    shuffle_transitions: bool = False
    # PPO-DNA's distillation (Aitchison and Sweetser 2022; algorithms/impala/distillation.py): after the passes,
    # this many more train an auxiliary value head on the policy's torso towards the value torso's values while a
    # KL term holds the policy; needs --no-shared-torso (0: off)
    distill_epochs: int = 0
    distill_beta: float = 1.0  # the KL term's weight in the distillation loss (the reference's)
    # image observations: each minibatch is trained on frames shifted by up to this many pixels each way
    # (edge pixels repeated, one random shift per unroll or transition; algorithms/augmentation.py); 0: off
    random_shift: int = 0


# V-trace on Atari (ALE ids). On a CPU the learner trains about 900 to 1,200 transitions a
# second whatever the batch (BENCHMARKS.md), so the number of updates per frame is set by the
# batch alone: 8 unrolls of 10 make 80 transitions per update, as A2C's 16 envs x 5 steps,
# about 60,000 updates in 20M frames (IMPALA's 32 x 20 would make 7,800). The step size falls
# linearly to 0 at --max-frames, as in IMPALA and CleanRL's PPO. The IMPALA paper's shallow
# torso costs a third of the Nature torso's arithmetic: on two CPU cores the system runs 4,100
# frames/s with it against 2,350 with the Nature torso.
ATARI_MAX_FRAMES = 20_000_000  # the budget where the Atari presets' learning rate reaches 0
ATARI_ENVS_PER_ACTOR = 32  # `seedfleet run` on Atari: 2 actors x 32 envs keep the learner busy
ATARI_BUDGET = Presets(learner={"max_frames": ATARI_MAX_FRAMES}, launch={"envs_per_actor": ATARI_ENVS_PER_ACTOR})
VTRACE_ATARI = ATARI_BUDGET | Presets(
    algorithm={"optimizer": "adam", "learning_rate": 6e-4, "optimizer_epsilon": 1e-5, "learning_rate_decay": True,
               "batch_size": 8, "unroll_length": 10, "entropy_cost": 0.01, "reward_clip": 1.0},
    network={"torso": "impala_shallow"},
)

# Box actions, on any env family: what PPO's MuJoCo setups share (CleanRL's
# ppo_continuous_action.py, SEED RL's mujoco/gin/ppo.gin, Sample Factory's mujoco_params.py):
# separate 64-64 tanh torsos for the policy and the value, observations normalised by their
# running mean and std, rewards by the running std of the discounted return, then clipped
# to [-10, 10] (not to [-1, 1]: their scale is already about 1), no entropy bonus, gradients
# clipped at 0.5, Adam 3e-4 with eps 1e-5 falling to 0 at --max-frames (1M env steps,
# where the MuJoCo references are read). The Gaussian starts at std exp(-0.5) = 0.61, not 1:
# Andrychowicz et al. (2020, arXiv 2006.05990) found an initial std of 0.5 best on 4 of their
# 5 MuJoCo tasks, and Tianshou's MuJoCo PPO starts there. On HalfCheetah-v5 it lifted both
# seeds at 1M env steps (3,604 and 1,638 at std 1: BENCHMARKS.md, "halfcheetah@logstd-0.5").
BOX_MAX_FRAMES = 1_000_000
BOX_TASK = Presets(
    algorithm={"reward_clip": 10.0, "entropy_cost": 0.0, "max_grad_norm": 0.5, "learning_rate": 3e-4,
               "learning_rate_decay": True},
    network={"torso": "mlp", "mlp_sizes": (64, 64), "activation": "tanh", "shared_torso": False,
             "initial_log_std": -0.5},
    learner={"normalize_observations": True, "scale_rewards": True, "max_frames": BOX_MAX_FRAMES},
)
VTRACE_PRESETS = {("ale", DISCRETE): VTRACE_ATARI, (ANY_FAMILY, BOX): BOX_TASK}  # (env family, kind of actions)


def vtrace_presets(family: str, kind: str) -> Presets:
    """The Atari values on ALE, PPO's MuJoCo setup on Box actions, the dataclass's elsewhere."""
    return task_presets(VTRACE_PRESETS, family, kind)
