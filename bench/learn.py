"""The learning benchmark: what the agents learn, against frames and wall time, beside
published references at the same frames.

    make learn-bench                                  # every case, seed 0
    python -m bench.learn --cases pong --seeds 0 1    # some cases, more seeds
    python -m bench.learn --report-only               # tables and plots of the runs already there

Each case is `seedfleet run` with the task's defaults (the Atari preset for ALE ids) for
its frame budget, seeds one after the other (two runs at once would share the cores and
halve both). Every run keeps its log dir under runs/learn/<case>/seed<N>; the report
reads their progress.csv and summary.json, draws return against frames and against wall
time (BENCHMARKS-learn-<case>.png), and writes a table per case between the learn
markers of BENCHMARKS.md: the mean return over the last 100 episodes at the case's
marks, per seed, and the references' returns at those frames with their sources.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.references import REFERENCES, Reference
from bench.report import machine, replace_section

BEGIN, END = "<!-- learn:begin -->", "<!-- learn:end -->"
RUNS = Path("runs/learn")


@dataclass(frozen=True)
class Case:
    env: str
    algo: str
    frames: int  # the budget: --max-frames (MinAtar and other envs without frame skip: env steps)
    marks: tuple[int, ...]  # frames at which the table reads the return
    args: tuple[str, ...] = ()  # flags beyond the task's defaults
    references: tuple[Reference, ...] = field(default=())


CASES = {
    "pong": Case("ALE/Pong-v5", "vtrace", 20_000_000, (5_000_000, 10_000_000, 20_000_000),
                 ("--target-return", "18"), REFERENCES["pong"]),
    # DeepMind's setting without sticky actions, as CleanRL's envpool and SB3's references ran
    "pong-nosticky": Case("PongNoFrameskip-v4", "vtrace", 20_000_000, (5_000_000, 10_000_000, 20_000_000),
                          ("--target-return", "18"), REFERENCES["pong-nosticky"]),
    "breakout": Case("ALE/Breakout-v5", "vtrace", 20_000_000, (5_000_000, 10_000_000, 20_000_000),
                     (), REFERENCES["breakout"]),
    "minatar-breakout-vtrace": Case("MinAtar/Breakout-v1", "vtrace", 5_000_000, (1_000_000, 2_500_000, 5_000_000),
                                    (), REFERENCES["minatar-breakout"]),
    "minatar-breakout-r2d2": Case("MinAtar/Breakout-v1", "r2d2", 5_000_000, (1_000_000, 2_500_000, 5_000_000),
                                  ("--eval-envs", "4"), REFERENCES["minatar-breakout"]),
}


def run_command(case: Case, seed: int, logdir: Path) -> list[str]:
    return [sys.executable, "-m", "deploy.cli", "run", "--env", case.env, "--algo", case.algo,
            "--max-frames", str(case.frames), "--seed", str(seed), "--logdir", str(logdir), "--fresh",
            "--progress-interval-s", "30", *case.args]


def read_curve(logdir: Path) -> list[dict]:
    """progress.csv as rows of floats (elapsed_s, frames, mean_return_last_100, ...)."""
    path = logdir / "progress.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


TRAINING, EVALUATION = "mean_return_last_100", "mean_eval_return_last_100"


def return_at(curve: list[dict], frames: int, key: str = TRAINING) -> float:
    """The mean return over the last 100 episodes as of `frames` (NaN before the first
    full report or when the run ended before `frames` without reaching its target);
    `key` EVALUATION reads the evaluation actors' episodes instead."""
    seen = [row for row in curve if row["frames"] <= frames and not math.isnan(row.get(key, math.nan))]
    return seen[-1][key] if seen else math.nan


def has_returns(curve: list[dict], key: str = TRAINING) -> bool:
    return any(not math.isnan(row.get(key, math.nan)) for row in curve)


def _cell(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def _frames(n: int) -> str:
    return f"{n / 1e6:g}M"


def case_markdown(name: str, case: Case, seeds: dict[int, Path], plot: str) -> list[str]:
    marks = " | ".join(f"return at {_frames(m)}" for m in case.marks)
    lines = [f"### {name}: {case.env}, {case.algo}", "",
             f"`seedfleet run --env {case.env} --algo {case.algo} --max-frames {case.frames} --seed N "
             f"{' '.join(case.args)}`".replace(" `", "`"), "",
             f"| run | {marks} | frames | wall min | stop |", "|---" * (len(case.marks) + 4) + "|"]
    for seed, logdir in sorted(seeds.items()):
        curve = read_curve(logdir)
        summary = json.loads((logdir / "summary.json").read_text()) if (logdir / "summary.json").exists() else {}
        last = curve[-1] if curve else {}
        stopped_early = summary.get("stop_reason") == "target_return"
        frames = summary.get("frames", last.get("frames", 0))
        wall = summary.get("wall_s", last.get("elapsed_s", 0)) / 60
        kinds = [(TRAINING, f"seed {seed}")] + ([(EVALUATION, f"seed {seed}, evaluation actors")]
                                                if has_returns(curve, EVALUATION) else [])
        for key, label in kinds:
            values = []
            for mark in case.marks:
                value = return_at(curve, mark, key)
                if stopped_early and mark >= summary.get("frames", math.inf):
                    value = summary.get(key) or math.nan  # the target was reached before
                elif mark > frames:
                    value = math.nan  # the run ended before this mark
                values.append(_cell(value))
            lines.append(f"| {label} | {' | '.join(values)} | {frames / 1e6:.2f}M | {wall:.0f} | "
                         f"{summary.get('stop_reason', 'running or killed')} |")
    for ref in case.references:
        values = " | ".join(_cell(ref.returns.get(m, math.nan)) for m in case.marks)
        lines.append(f"| {ref.name} | {values} | | | |")
    lines += ["", *(f"- {ref.name}: {ref.source}" for ref in case.references)]
    if plot:
        lines += ["", f"![{name}]({plot})"]
    return lines + [""]


def plot_case(name: str, case: Case, seeds: dict[int, Path], png: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {seed: read_curve(d) for seed, d in seeds.items()}
    if not any(has_returns(c, key) for c in curves.values() for key in (TRAINING, EVALUATION)):
        return False
    fig, (by_frames, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for seed, curve in sorted(curves.items()):
        for key, style, label in ((TRAINING, "-", f"seedfleet seed {seed}"),
                                  (EVALUATION, ":", f"seedfleet seed {seed}, evaluation actors")):
            rows = [r for r in curve if not math.isnan(r.get(key, math.nan))]
            if rows:
                returns = [r[key] for r in rows]
                by_frames.plot([r["frames"] / 1e6 for r in rows], returns, style, label=label)
                by_time.plot([r["elapsed_s"] / 60 for r in rows], returns, style, label=label)
    for ref in case.references:
        points = sorted(ref.returns.items())
        by_frames.plot([f / 1e6 for f, _ in points], [v for _, v in points], "o--", label=ref.name)
    by_frames.set(xlabel="frames (M)", ylabel="mean return, last 100 episodes", title=f"{case.env} ({case.algo})")
    by_time.set(xlabel="wall time (minutes, this machine)", title="against wall time")
    by_frames.legend(fontsize=7)
    by_time.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return True


def report(md_path: Path, names: list[str], runs: Path = RUNS) -> None:
    m = machine()
    body = [f"Report of {m['date']}, commit {m['commit']}, {m['cores']} cores of {m['cpu']}.", ""]
    for name in names:
        seeds = {int(d.name.removeprefix("seed")): d for d in sorted((runs / name).glob("seed*"))
                 if d.is_dir() and d.name.removeprefix("seed").isdigit()}
        if not seeds:
            continue
        png = md_path.parent / f"BENCHMARKS-learn-{name}.png"
        body += case_markdown(name, CASES[name], seeds, png.name if plot_case(name, CASES[name], seeds, png) else "")
    replace_section(md_path, BEGIN, END, "\n".join(body))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.learn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--report-only", action="store_true", help="only rewrite the report from runs/learn")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600, help="a run still going after this is stopped")
    parser.add_argument("--benchmarks", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    failed = 0
    if not args.report_only:
        for name in args.cases:
            for seed in args.seeds:
                logdir = RUNS / name / f"seed{seed}"
                logdir.mkdir(parents=True, exist_ok=True)
                command = run_command(CASES[name], seed, logdir)
                print("$", " ".join(command[2:]), flush=True)
                with (logdir / "console.log").open("w") as log:
                    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
                    try:
                        failed += proc.wait(timeout=args.timeout_s) not in (0, 1)  # 1: budget spent, target missed
                    except subprocess.TimeoutExpired:
                        proc.terminate()
                        proc.wait(timeout=120)
                report(Path(args.benchmarks), list(CASES))  # the table grows as runs end
    report(Path(args.benchmarks), list(CASES))  # every case with runs, not only those run now
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
