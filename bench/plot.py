"""`seedfleet plot`: runs' learning curves side by side, beside the published ones.

    seedfleet plot runs/pong-seed0 runs/pong-seed1 runs/pong-seed2 --out pong.png

Each RUN is a log dir: its progress.csv, and the config.json and machine.json the learner
writes beside it. Left, the mean return over the last 100 episodes against frames (env
steps where no run skips frames), with the references bench/references.py holds for the
runs' envs; right, the same against wall time. Each run is named by its env, algorithm,
seed and CPU (wall times compare only on the same kind of CPU); its evaluation actors'
returns, if it had any, are drawn dotted. The learning bench (bench/learn.py) draws its
pictures with `draw` too. matplotlib comes with the learner's extras.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seedfleet.bench.references import REFERENCES, Reference
from seedfleet.errors import UsageError
from seedfleet.machine_cpu import cpu_label
from seedfleet.settings import EVALS_FILE, read_config

TRAINING, EVALUATION = "mean_return_last_100", "mean_eval_return_last_100"
RECENT = "mean_return_last_20"  # the training return over the last 20 episodes (SAC's acceptance reads it)
EPISODES = {TRAINING: 100, RECENT: 20}  # the episodes each training-return column averages


def read_curve(logdir: Path) -> list[dict]:
    """progress.csv as rows of floats (elapsed_s, frames, mean_return_last_100, ...)."""
    path = logdir / "progress.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def read_evals(logdir: Path) -> list[dict]:
    """checkpoint_evals.csv's rows as written (strings), oldest checkpoint first; [] without one."""
    path = Path(logdir) / EVALS_FILE
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def return_at(curve: list[dict], frames: int, key: str = TRAINING) -> float:
    """The mean return over the last 100 episodes as of `frames` (NaN before the first
    full report or when the run ended before `frames` without reaching its target);
    `key` EVALUATION reads the evaluation actors' episodes instead."""
    seen = [row for row in curve if row["frames"] <= frames and not math.isnan(row.get(key, math.nan))]
    return seen[-1][key] if seen else math.nan


def has_returns(curve: list[dict], key: str = TRAINING) -> bool:
    return any(not math.isnan(row.get(key, math.nan)) for row in curve)


@dataclass(frozen=True)
class Curve:
    """One run as drawn: its label, its progress rows and its CPU; variants are drawn thin."""

    label: str
    rows: list[dict]
    cpu: str
    bold: bool = True


def run_flags(logdir: Path) -> dict:
    """The env, algo and seed a run ran with, and its other flags: its newest stretch's record
    (config.json); for a run from before that record, the env and algo of its summary.json and
    the seed its folder is named by (seedN), where they are there."""
    stretches = read_config(logdir)
    if stretches:
        return stretches[-1]["flags"]
    try:
        summary = json.loads((logdir / "summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        summary = {}
    seed = re.fullmatch(r"seed(\d+)", logdir.name)
    return {key: summary[key] for key in ("env", "algo") if key in summary} | ({"seed": int(seed[1])} if seed else {})


def run_curve(logdir: Path) -> Curve:
    """A log dir as `seedfleet plot` draws it; UsageError if it holds no progress.csv."""
    rows = read_curve(logdir)
    if not (logdir / "progress.csv").exists():
        raise UsageError(f"{logdir}: no progress.csv (is it a run's log dir?)")
    flags = run_flags(logdir)
    name = ", ".join(str(part) for part in (flags.get("env"), flags.get("algo")) if part) or logdir.name
    seed = f", seed {flags['seed']}" if "seed" in flags else ""
    return Curve(f"{name}{seed}", rows, cpu_label(logdir))


def counts_frames(curves: Sequence[Curve]) -> bool:
    """Whether any run skips frames (Atari: 4 per env step): then the x axis counts frames."""
    return any(row.get("frames", 0) != row.get("env_steps", row.get("frames", 0)) for c in curves for row in c.rows)


def draw(curves: Sequence[Curve], png: Path, title: str, references: Sequence[Reference] = (),
         x_max: float | None = None, training: str = TRAINING) -> list[str]:
    """Return against frames (with the references' points) and against wall time: the training
    return column `training` (TRAINING or RECENT) solid, the evaluation actors' dotted; returns
    the labels drawn, both panels' ([] and no file when no run has a return yet)."""
    if not any(has_returns(c.rows, key) for c in curves for key in (training, EVALUATION)):
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab20").colors
    fig, (by_frames, by_time) = plt.subplots(1, 2, figsize=(15, 5.5))
    for i, curve in enumerate(curves):
        style = {"color": colours[(2 * i) % 20 + (i // 10) % 2], "lw": 2.2 if curve.bold else 1.0}
        for key, line, label in ((training, "-", curve.label), (EVALUATION, ":", f"{curve.label}, evaluation actors")):
            rows = [r for r in curve.rows if not math.isnan(r.get(key, math.nan))]
            if rows:
                returns = [r[key] for r in rows]
                by_frames.plot([r["frames"] / 1e6 for r in rows], returns, line, label=label, **style)
                by_time.plot([r["elapsed_s"] / 60 for r in rows], returns, line, label=f"{label} ({curve.cpu})",
                             **style)
    for ref, marker in zip(references, "osD^vP*X", strict=False):  # references: grey, one marker each
        points = sorted((f, v) for f, v in ref.returns.items() if x_max is None or f <= x_max * 1.02)
        if points:
            by_frames.plot([f / 1e6 for f, _ in points], [v for _, v in points], "--", marker=marker,
                           color="dimgrey", lw=0.8, markersize=6, markerfacecolor="white", label=ref.name)
    unit = "frames" if counts_frames(curves) else "env steps"
    by_frames.set(xlabel=f"{unit} (M)", ylabel=f"mean return, last {EPISODES[training]} episodes",
                  title=title)
    if x_max:
        by_frames.set(xlim=(0, x_max / 1e6 * 1.02))
    by_time.set(xlabel="wall time (minutes, on the CPU named)", title="against wall time")
    by_frames.legend(fontsize=7, loc="lower right")
    by_time.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in (by_frames, by_time):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    labels = [text.get_text() for ax in (by_frames, by_time) for text in ax.get_legend().get_texts()]
    plt.close(fig)
    return labels


def references_for(envs: Sequence[str]) -> list[Reference]:
    """The published curves of the runs' envs; each named with its env when runs of several envs are drawn."""
    known = [env for env in dict.fromkeys(envs) if env in REFERENCES]
    if len(known) == 1:
        return list(REFERENCES[known[0]])
    return [Reference(f"{env}: {ref.name}", ref.source, ref.returns) for env in known for ref in REFERENCES[env]]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="seedfleet plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="a run's log dir (its progress.csv)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--title", default="", help="the left panel's title (default: the runs' envs)")
    parser.add_argument("--no-references", action="store_true", help="leave out the published curves")
    args = parser.parse_args(argv)
    curves = [run_curve(run) for run in args.runs]
    if len({c.label for c in curves}) < len(curves):  # runs alike in env, algo and seed: named by their folders too
        curves = [dataclasses.replace(c, label=f"{c.label} ({run})") for c, run in zip(curves, args.runs, strict=True)]
    envs = [run_flags(run).get("env", "") for run in args.runs]
    references = [] if args.no_references else references_for(envs)
    title = args.title or ", ".join(env for env in dict.fromkeys(envs) if env) or "return"
    labels = draw(curves, args.out, title, references)
    if not labels:
        raise UsageError("no run has a return yet: none has finished an episode")
    print(f"wrote {args.out}: {len(curves)} run(s), {len(references)} reference curve(s)")
    print("\n".join(f"  {label}" for label in dict.fromkeys(labels)))
    return 0
