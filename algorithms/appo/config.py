"""APPO's task defaults: IMPALA's agent, config and trainer (algorithms/impala) with PPO's
schedule. Each batch of unrolls is trained on in `epochs` passes of `minibatches` gradient
steps, the policy loss is the clipped surrogate on V-trace targets
(algorithms/impala/loss.py, `clipped_surrogate_loss`), and advantages are normalised.
`--algo vtrace` stays IMPALA: one step per batch, -log pi * A. TensorFlow-free."""

from __future__ import annotations

from seedfleet.actions import BOX, DISCRETE
from seedfleet.algorithms.impala.config import ATARI_BUDGET, BOX_TASK
from seedfleet.settings import ANY_FAMILY, Presets, task_presets

# Everywhere: PPO's schedule on V-trace targets (CleanRL's ppo_atari.py and Sample Factory's
# Atari APPO: 4 passes, clip 0.1, normalised advantages, lambda 0.95; Adam with eps 1e-5, as
# ImpalaConfig has it already).
APPO_EVERYWHERE = Presets(algorithm={
    "epochs": 4,
    "minibatches": 4,
    "clip_ratio": 0.1,
    "normalize_advantages": True,
    "vtrace_lambda": 0.95,
})

# Atari (ALE ids): chosen by the screens in BENCHMARKS.md, "Learning Atari per frame as IMPALA and
# PPO do: APPO's defaults".
# 2 actors x 32 envs; a batch is all 64 envs' unrolls of 32 steps (2,048 transitions), cut
# into 16 minibatches of 128 transitions (4 unrolls), 4 passes: 32 steps per 1,024 transitions,
# twice CleanRL's 8 envs x 128 steps in 4 minibatches x 4 epochs. Adam 2.5e-4 falling linearly
# to 0 at 20M frames (the default budget, fixed whatever --max-frames says), gradients clipped at
# 0.5 (CleanRL's ppo_atari.py step and clip; it anneals over its total_timesteps, 40M frames, our
# horizon until BattleZone-v5 went flat at 14,700 by 10M frames under it). Falling twice as fast
# (93% of that step at 2.5M frames, 86% at 5M, 67% at 10M) took BattleZone to 18,240 and 18,180 at
# 10M (seeds 0 and 1; seed 1 read 3,030 at 5M under the 40M horizon, 8,950 under this one), with
# Breakout-v5 at 20.4 at 5M (the kept seeds 19.1 to 21.3) and sticky Pong at -9.7 (the
# synchronous screens -9.1 and -6.4; ahead of both from 2M to 3.5M) (BENCHMARKS.md, "The 20M
# horizon"). Under the earlier Nature-CNN default the same horizon led on Breakout at 20M (122.1
# against 96.5) and trailed on sticky Pong (+12.9 against +13.9, "The learning-rate horizon").
# Its cost at 10M: NameThisGame-v5 5,299 over two seeds against 5,539, Phoenix-v5 4,269 against
# 4,512 on seed 0 (BENCHMARKS.md, "DoubleDunk, NameThisGame and Phoenix under the 20M horizon").
# Acting is synchronous (`--sync-acting`; `--no-sync-acting` turns it
# off): once a batch is complete the actors wait until it is trained on, so each batch is acted
# by the policy just trained, as in cleanba's synchronous PPO, whose own ablation ends ahead on
# 6 of 9 games and ahead early on all but BeamRider (vwxyzjn/cleanba,
# static/cleanba/sync_or_not_sync.csv). Without it the actors act on the next batch while the
# trainer works on this one (policy lag 0.91 learner steps on BattleZone against 0.36), and
# BattleZone-v5 stalled at 11,880 at 5M frames against 14,590 synchronous; sticky Pong read -9.1
# at 5M (the kept asynchronous seeds -8.9 and -8.6) and Breakout-v5 21.5 (21.3 and 20.0)
# (BENCHMARKS.md, "Atari beyond Pong and Breakout").
# The IMPALA paper's shallow torso: in bfloat16 through oneDNN it trains twice as fast as the
# Nature CNN. With 16 minibatches it kept level with the Nature CNN per frame on
# sticky Pong (two seeds +14.5 at 20M, in 73 and 75 minutes against 116 to 123) but learns
# Breakout-v5 a third slower per frame (59.1 against 96.5 at 20M); 8 minibatches were worse on
# both. A lost life ends the episode for the targets, as in DeepMind's agents and CleanRL's
# ppo_atari.py (EpisodicLifeEnv); returns stay game scores. On Breakout-v5 that brought the shallow
# torso's curve to the Nature CNN's per frame; Pong has no lives, so it changes nothing there.
# BENCHMARKS.md: "The shallow torso with 16 minibatches per pass", "Sticky Pong-v5 under the new
# default, two seeds", "Breakout-v5 under the new default", "A lost life as terminal".
APPO_ATARI = ATARI_BUDGET | Presets(
    algorithm={
        "unroll_length": 32,
        "batch_size": 64,
        "minibatches": 16,
        "learning_rate": 2.5e-4,
        "learning_rate_decay": True,
        "learning_rate_decay_frames": 20_000_000,
        "max_grad_norm": 0.5,
        "life_loss_terminal": True,
    },
    network={"torso": "impala_shallow"},
    learner={"queue_unrolls": 64, "sync_acting": True},
)

# Box actions (any env family): PPO's MuJoCo schedule (CleanRL's ppo_continuous_action.py: 2,048
# transitions per update, 10 passes of 32 minibatches, clip 0.2) over BOX_TASK's networks and
# normalisation (algorithms/impala/config.py). 2 actors x 16 envs; a batch is 64 unrolls of 32
# steps, so a minibatch is 2 unrolls (64 transitions, CleanRL's size). The queue holds one batch.
APPO_BOX = BOX_TASK | Presets(
    algorithm={"unroll_length": 32, "batch_size": 64, "epochs": 10, "minibatches": 32, "clip_ratio": 0.2},
    learner={"queue_unrolls": 64},
    launch={"actors": 2, "envs_per_actor": 16},
)

APPO_PRESETS = {("ale", DISCRETE): APPO_ATARI, (ANY_FAMILY, BOX): APPO_BOX}  # (env family, kind of actions)


def appo_presets(family: str, kind: str) -> Presets:
    """APPO's schedule everywhere; on ALE the Atari defaults, their frame budget and launch; on
    Box actions PPO's MuJoCo setup."""
    return APPO_EVERYWHERE | task_presets(APPO_PRESETS, family, kind)
