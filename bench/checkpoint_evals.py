"""The policy at each checkpoint of a run, played on its own:

    python -m seedfleet.bench.checkpoint_evals runs/learn/namethisgame@qrdqn/seed0 [--watch]

A run's training return at frame F averages episodes that began long before F. With 64 envs
and episodes of E frames each, an episode that ends at F began some 64 E frames of the run
earlier (NameThisGame's, about 14,000 frames each: some 900,000), and the first episodes to end
after a start or a resume, which restarts every env, are the short ones. A checkpoint's policy
played on its own reads the policy at the checkpoint's frame instead: `seedfleet eval`'s `play`,
each env playing one share of the episodes, at Dopamine's training epsilon (0.01) by default.

Each checkpoint not yet read adds one row to the log dir's checkpoint_evals.csv, which the
learning bench keeps with the run's curve. The learner keeps its newest few checkpoints only,
so read them while the run goes: `--watch` reads each new one until the run writes its summary
(a resumed run: until it writes it again).
The reads share the machine with the run: they slow its wall time, not its curve per frame.
"""

from __future__ import annotations

import argparse
import csv
import time
from dataclasses import dataclass
from pathlib import Path

from seedfleet.bench.plot import read_evals
from seedfleet.server.checkpoint import CheckpointStore, saved_frames
from seedfleet.server.config import EvalConfig
from seedfleet.server.evaluate import play
from seedfleet.server.saved_policy import load_policy
from seedfleet.settings import EVALS_FILE

COLUMNS = ("frames", "checkpoint", "episodes", "epsilon", "seed", "mean_return", "std_return", "min_return",
           "max_return", "eval_s")


@dataclass(frozen=True)
class EvalSettings:
    episodes: int = 16  # episodes per checkpoint, one per env
    epsilon: float = 0.01  # uniform random actions, as Dopamine's training episodes (its evaluation: 0.001)
    seed: int = 7  # the envs' seeds, the same for every checkpoint so that only the policy differs


def evaluate_new(logdir: Path, settings: EvalSettings) -> list[dict]:
    """Plays every checkpoint of `logdir` that checkpoint_evals.csv lacks, oldest first, and
    appends a row for each; returns the new rows. A checkpoint pruned while it is read is skipped."""
    logdir = Path(logdir)
    done = {row["checkpoint"] for row in read_evals(logdir)}
    new = []
    for checkpoint in reversed(CheckpointStore(logdir / "checkpoints").complete()):
        if checkpoint.name in done:
            continue
        started = time.monotonic()
        try:
            policy = load_policy(str(checkpoint))
            returns, _ = play(policy, EvalConfig(checkpoint=str(checkpoint), episodes=settings.episodes,
                                                 envs=settings.episodes, epsilon=settings.epsilon,
                                                 seed=settings.seed))
        except (FileNotFoundError, ValueError):
            if checkpoint.exists():
                raise
            continue  # the learner pruned it meanwhile
        row = {"frames": saved_frames(checkpoint), "checkpoint": checkpoint.name, "episodes": len(returns),
               "epsilon": settings.epsilon, "seed": settings.seed, "mean_return": f"{returns.mean():.2f}",
               "std_return": f"{returns.std():.2f}", "min_return": f"{returns.min():.1f}",
               "max_return": f"{returns.max():.1f}", "eval_s": f"{time.monotonic() - started:.1f}"}
        _append(logdir / EVALS_FILE, row)
        new.append(row)
    return new


def _append(path: Path, row: dict) -> None:
    fresh = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        if fresh:
            writer.writeheader()
        writer.writerow(row)


def watch(logdir: Path, settings: EvalSettings, poll_s: float = 30.0) -> None:
    """Reads each new checkpoint until the run writes its summary.json, then the last ones. A
    summary.json there already when the watch begins is an earlier stretch's, of a resumed run."""
    summary = Path(logdir) / "summary.json"
    earlier = _written_ns(summary)
    while True:
        ended = _written_ns(summary) != earlier  # before the read: the last checkpoint precedes it
        for row in evaluate_new(logdir, settings):
            print_row(row)
        if ended:
            return
        time.sleep(poll_s)


def _written_ns(path: Path) -> int | None:
    """When `path` was last written, or None while it does not exist."""
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def print_row(row: dict) -> None:
    print(f"{int(row['frames']):>10,} frames: mean {float(row['mean_return']):,.1f} "
          f"(std {float(row['std_return']):,.1f}, {row['episodes']} episodes)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", type=Path, help="a run's log dir (its checkpoints/ inside)")
    parser.add_argument("--watch", action="store_true", help="keep reading new checkpoints until the run ends")
    defaults = EvalSettings()
    parser.add_argument("--episodes", type=int, default=defaults.episodes, help="episodes per checkpoint")
    parser.add_argument("--epsilon", type=float, default=defaults.epsilon, help="uniform random actions")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="the envs' seeds")
    args = parser.parse_args(argv)
    settings = EvalSettings(args.episodes, args.epsilon, args.seed)
    EvalConfig(checkpoint=str(args.logdir), episodes=settings.episodes).check()
    if args.watch:
        watch(args.logdir, settings)
        return 0
    evaluate_new(args.logdir, settings)
    for row in read_evals(args.logdir):
        print_row(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
