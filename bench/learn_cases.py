"""The learning bench's cases and the runs they keep: what `python -m seedfleet.bench.learn`
runs (bench/learn.py) and what its report reads (bench/learn_report.py).

A case is `seedfleet run` of one task with its defaults for a frame budget, read at its marks
beside published references. Its runs live in <runs>/<case>/seed<N> (the defaults) and
<runs>/<case>@<variant>/seed<N> (a variant: the same with the flags in its variant.json).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from seedfleet.bench.atari_references import ATARI_GAMES, atari_references
from seedfleet.bench.plot import RECENT, TRAINING
from seedfleet.bench.references import REFERENCES, Reference

RUNS = Path("runs/learn")  # the runs' log dirs (checkpoints, summaries, console)
RESULTS = Path("bench/results/learn")  # what the report reads: each run's curve and summary, kept in git


@dataclass(frozen=True)
class Case:
    env: str
    algo: str
    frames: int  # the budget: --max-frames (MinAtar and other envs without frame skip: env steps)
    marks: tuple[int, ...]  # frames at which the table reads the return
    args: tuple[str, ...] = ()  # flags beyond the task's defaults
    references: tuple[Reference, ...] = field(default=())
    # the bench stops the run (SIGTERM: a checkpoint, then exit) once its progress passes this
    # many frames; the budget, and so the learning-rate schedule, stays `frames`
    stop_at: int | None = None
    # the training-return column the tables read and the picture draws: the last 100 episodes, or
    # RECENT's 20 where 100 episodes span most of the budget (SAC's short runs) or the task's
    # acceptance reads 20
    returns: str = TRAINING


CASES = {
    "pong": Case("ALE/Pong-v5", "appo", 20_000_000, (2_500_000, 5_000_000, 10_000_000, 20_000_000),
                 ("--target-return", "18"), REFERENCES["ALE/Pong-v5"]),
    # DeepMind's setting without sticky actions, as CleanRL's envpool and SB3's references ran
    # read at 10M as the acceptance does: a target stop would leave that mark unread
    "pong-nosticky": Case("PongNoFrameskip-v4", "appo", 20_000_000, (2_500_000, 5_000_000, 10_000_000),
                          (), REFERENCES["PongNoFrameskip-v4"], stop_at=10_000_000),
    "breakout": Case("ALE/Breakout-v5", "appo", 20_000_000, (2_500_000, 5_000_000, 10_000_000, 20_000_000),
                     (), REFERENCES["ALE/Breakout-v5"]),
    "minatar-breakout-vtrace": Case("MinAtar/Breakout-v1", "vtrace", 5_000_000, (1_000_000, 2_500_000, 5_000_000),
                                    (), REFERENCES["MinAtar/Breakout-v1"]),
    "minatar-breakout-r2d2": Case("MinAtar/Breakout-v1", "r2d2", 5_000_000, (1_000_000, 2_500_000, 5_000_000),
                                  ("--eval-envs", "4"), REFERENCES["MinAtar/Breakout-v1"]),
    # Atari beyond Pong and Breakout (bench/atari_references.py): the Atari-5 games, whose scores
    # predict the 57-game median, and two games no default was chosen on, at 10M frames
    **{game.lower(): Case(f"ALE/{game}-v5", "appo", 10_000_000, (2_500_000, 5_000_000, 10_000_000), (),
                          atari_references(game)) for game in ATARI_GAMES},
    # Continuous control under the Box defaults (env steps). Pendulum stops at 300k env steps, where
    # its greedy evaluation is read (seedfleet eval on the last checkpoint), with the learning rate
    # on the default 1M-step schedule (what a run without --max-frames follows)
    "pendulum": Case("Pendulum-v1", "appo", 300_000, (100_000, 200_000, 300_000),
                     ("--learning-rate-decay-frames", "1000000"), REFERENCES["Pendulum-v1"]),
    "halfcheetah": Case("HalfCheetah-v5", "appo", 1_000_000, (100_000, 300_000, 500_000, 1_000_000), (),
                        REFERENCES["HalfCheetah-v5"]),
    "hopper": Case("Hopper-v4", "appo", 1_000_000, (100_000, 300_000, 500_000, 1_000_000), (),
                   REFERENCES["Hopper-v4"]),
    # SAC: Pendulum at 20k env steps and MountainCarContinuous at 50k, where their greedy evaluations
    # are read (seedfleet eval on the last checkpoint); MountainCarContinuous's sparse reward takes the
    # documented temporally correlated exploration. HalfCheetah and Hopper read training returns.
    # All four read the return over the last 20 episodes: 100 would span the whole run (Pendulum's
    # 20k steps are 100 episodes, HalfCheetah's 100k steps 100), and the acceptance reads 20.
    "pendulum-sac": Case("Pendulum-v1", "sac", 20_000, (5_000, 10_000, 20_000), (), REFERENCES["Pendulum-v1 (SAC)"],
                         returns=RECENT),
    "mountaincar-sac": Case("MountainCarContinuous-v0", "sac", 50_000, (10_000, 25_000, 50_000),
                            ("--exploration-correlation", "0.95"), REFERENCES["MountainCarContinuous-v0 (SAC)"],
                            returns=RECENT),
    # Their checkpoints keep the replay, so a run stopped and resumed (`--resume`) goes on as one.
    "halfcheetah-sac": Case("HalfCheetah-v5", "sac", 300_000, (100_000, 300_000), ("--checkpoint-replay",),
                            REFERENCES["HalfCheetah-v5 (SAC)"], returns=RECENT),
    "hopper-sac": Case("Hopper-v4", "sac", 300_000, (100_000, 300_000), ("--checkpoint-replay",),
                       REFERENCES["Hopper-v4 (SAC)"], returns=RECENT),
}


VARIANT_FILE = "variant.json"  # in a variant's runs folder: {"flags": [...]}


@dataclass(frozen=True)
class RunGroup:
    """The runs of one case with one set of flags: the defaults (variant "") or a variant's."""

    variant: str
    flags: tuple[str, ...]
    seeds: dict[int, Path]

    def label(self, seed: int) -> str:
        return f"seed {seed}" + (f", {self.variant}" if self.variant else "")


def runs_dir(name: str, variant: str = "", runs: Path = RUNS) -> Path:
    return runs / (f"{name}@{variant}" if variant else name)


def run_groups(name: str, runs: Path = RUNS) -> list[RunGroup]:
    """The case's runs on disk: the defaults' first, then each variant's."""
    groups = []
    for folder in [runs / name, *sorted(runs.glob(f"{name}@*"))]:
        seeds = {int(d.name.removeprefix("seed")): d for d in sorted(folder.glob("seed*"))
                 if d.is_dir() and d.name.removeprefix("seed").isdigit()}
        if not seeds:
            continue
        variant = folder.name.partition("@")[2]
        # a variant folder without its file (renamed by hand to keep a run apart) ran the case's flags
        recorded = folder / VARIANT_FILE
        flags = json.loads(recorded.read_text())["flags"] if variant and recorded.exists() else []
        groups.append(RunGroup(variant, tuple(flags), seeds))
    return groups


def run_command(case: Case, seed: int, logdir: Path, flags: tuple[str, ...] = (), resume: bool = False) -> list[str]:
    """`seedfleet run` of one seed; `resume` continues from the log dir's newest checkpoint."""
    return [sys.executable, "-m", "seedfleet.deploy.cli", "run", "--env", case.env, "--algo", case.algo,
            "--max-frames", str(case.frames), "--seed", str(seed), "--logdir", str(logdir),
            *(() if resume else ("--fresh",)), "--progress-interval-s", "30", *case.args, *flags]
