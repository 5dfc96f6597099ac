"""The learning benchmark: what the agents learn, against frames and wall time, beside
published references at the same frames.

    make learn-bench                                  # every case, seed 0
    python -m seedfleet.bench.learn --cases pong --seeds 0 1    # some cases, more seeds
    python -m seedfleet.bench.learn --report-only               # tables and plots of the runs already there
    python -m seedfleet.bench.learn --cases pong --variant normadv --flags "--normalize-advantages"
    python -m seedfleet.bench.learn --cases pong-nosticky --seeds 0 --resume   # on from the run's checkpoint

Each case is `seedfleet run` with the task's defaults (the Atari preset for ALE ids) for
its frame budget (or until its `stop_at` frames, the budget still setting the learning-rate
schedule), seeds one after the other (two runs at once would share the cores and
halve both). Every run keeps its log dir under runs/learn/<case>/seed<N>; when it ends,
its progress.csv and summary.json are kept in bench/results/learn/<case>/seed<N>, which
git tracks (runs/ it ignores), so a later checkout reports them too. The report reads
those, draws return against frames and against wall time (BENCHMARKS-learn-<case>.png),
and writes a table per case between the learn markers of BENCHMARKS.md: the mean return
over the last 100 episodes at the case's marks, per seed, and the references' returns at
those frames with their sources. `--report-only` first keeps whatever runs/learn holds.

A variant (`--variant NAME --flags "..."`) runs a case with flags beyond its defaults,
under runs/learn/<case>@<NAME>/; the case's table and plot show it beside the defaults'
runs, so a flag becomes a default only when the curves say so. Each run's config.json (every
flag as it resolved) is kept too, and the report names what it ran with beyond today's
defaults (bench/run_config.py): the flags given stay true only while the defaults stand.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from seedfleet.bench.atari_breadth import BEGIN as BREADTH_BEGIN
from seedfleet.bench.atari_breadth import END as BREADTH_END
from seedfleet.bench.atari_breadth import GameRuns, breadth_markdown, plot_breadth
from seedfleet.bench.atari_references import ATARI_GAMES, atari_references
from seedfleet.bench.plot import EPISODES, EVALUATION, RECENT, TRAINING, Curve, draw, has_returns, read_curve, return_at
from seedfleet.bench.references import REFERENCES, Reference
from seedfleet.bench.report import replace_section
from seedfleet.bench.results_page import BEGIN as HEAD_BEGIN
from seedfleet.bench.results_page import END as HEAD_END
from seedfleet.bench.results_page import TaskResult, learning_table
from seedfleet.bench.run_config import Defaults, configs_markdown, todays_defaults
from seedfleet.envs import describe
from seedfleet.machine_cpu import BFLOAT16_CPU_FLAGS, MACHINE_FILE, cpu_label, machine, read_machine
from seedfleet.settings import CONFIG_FILE, EVALS_FILE

BEGIN, END = "<!-- learn:begin -->", "<!-- learn:end -->"
RUNS = Path("runs/learn")  # the runs' log dirs (checkpoints, summaries, console)
RESULTS = Path("bench/results/learn")  # what the report reads: each run's curve and summary, kept in git
KEPT = ("progress.csv", "summary.json", MACHINE_FILE, CONFIG_FILE, EVALS_FILE)  # CONFIG_FILE: the learner's record
STOP = threading.Event()  # set by SIGTERM or SIGINT to the bench (stop_on_signals)


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


def keep(logdir: Path, runs: Path = RUNS, results: Path = RESULTS) -> Path:
    """Copies a run's curve and summary (and its variant's flags) from `runs` to `results`."""
    target = results / logdir.relative_to(runs)
    target.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (logdir / name).exists():
            shutil.copy2(logdir / name, target / name)
    if (logdir.parent / VARIANT_FILE).exists():
        shutil.copy2(logdir.parent / VARIANT_FILE, target.parent / VARIANT_FILE)
    return target


def keep_all(runs: Path = RUNS, results: Path = RESULTS) -> list[Path]:
    """Keeps every run under `runs` that has written its progress."""
    return [keep(logdir, runs, results) for logdir in sorted(runs.glob("*/seed*"))
            if (logdir / "progress.csv").exists()]


def run_command(case: Case, seed: int, logdir: Path, flags: tuple[str, ...] = (), resume: bool = False) -> list[str]:
    """`seedfleet run` of one seed; `resume` continues from the log dir's newest checkpoint."""
    return [sys.executable, "-m", "seedfleet.deploy.cli", "run", "--env", case.env, "--algo", case.algo,
            "--max-frames", str(case.frames), "--seed", str(seed), "--logdir", str(logdir),
            *(() if resume else ("--fresh",)), "--progress-interval-s", "30", *case.args, *flags]


def stop_on_signals() -> None:
    """SIGTERM or SIGINT to the bench stops the running seed as its timeout does (SIGTERM: the
    run's last checkpoint and summary), keeps its curve and rewrites the report; no other seed
    starts. Python's default would end the bench at once and leave its run going, unkept."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: STOP.set())


def run_until(command: list[str], logdir: Path, timeout_s: float, stop_at: int | None, append: bool = False,
              poll_s: float = 10.0) -> int:
    """Runs `command` with its console in logdir/console.log (appended to with `append`);
    stops it (SIGTERM) after `timeout_s`, once its progress.csv passes `stop_at` frames, or
    once STOP is set. Returns its exit code (1: the budget spent without the target; 143 or
    -15: stopped)."""
    deadline = time.monotonic() + timeout_s
    with (logdir / "console.log").open("a" if append else "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            curve = read_curve(logdir)
            if STOP.is_set() or time.monotonic() > deadline or (stop_at and curve and curve[-1]["frames"] >= stop_at):
                proc.terminate()
                try:
                    return proc.wait(timeout=120)  # its last checkpoint and summary
                except subprocess.TimeoutExpired:
                    proc.kill()
                    return proc.wait()
            STOP.wait(poll_s)
        return proc.returncode


def _cell(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def _frames(n: int) -> str:
    return f"{n / 1e6:g}M"


def marks_read(curve: list[dict], summary: dict, frames: float, marks: tuple[int, ...],
               key: str = TRAINING) -> list[float]:
    """The run's return at each mark: `return_at`, the final return at the marks past a run
    stopped by its target, NaN past a run that ended (at `frames`) before the mark."""
    values = []
    for mark in marks:
        value = return_at(curve, mark, key)
        if summary.get("stop_reason") == "target_return" and mark >= frames:
            value = summary.get(key) or math.nan  # the target was reached before
        elif mark > frames:
            value = math.nan  # the run ended before this mark
        values.append(value)
    return values


def case_markdown(name: str, case: Case, groups: list[RunGroup], plot: str,
                  defaults: Defaults = todays_defaults) -> list[str]:
    window = f"return({EPISODES[case.returns]})"
    marks = " | ".join(f"{window} at {_frames(m)}" for m in case.marks)
    command = f"seedfleet run --env {case.env} --algo {case.algo} --max-frames {case.frames} --seed N"
    lines = [f"### {name}: {case.env}, {case.algo}", "", f"`{' '.join([command, *case.args])}`"]
    if case.stop_at:
        lines[-1] += f", stopped by the bench once past {_frames(case.stop_at)} frames (SIGTERM)"
    lines += [f"- {group.variant}: " + (f"the same with `{' '.join(group.flags)}`" if group.flags else
                                         "the same flags, a run kept apart by name (its config.json below)")
              for group in groups if group.variant]
    lines += ["", f"| run | {marks} | frames | wall min | stop | CPU |", "|---" * (len(case.marks) + 5) + "|"]
    for group in groups:
        by_seed = []
        for seed, logdir in sorted(group.seeds.items()):
            curve = read_curve(logdir)
            summary = json.loads((logdir / "summary.json").read_text()) if (logdir / "summary.json").exists() else {}
            last = curve[-1] if curve else {}
            frames = summary.get("frames", last.get("frames", 0))
            wall = summary.get("wall_s", last.get("elapsed_s", 0)) / 60
            kinds = [(case.returns, group.label(seed))] + (
                [(EVALUATION, f"{group.label(seed)}, evaluation actors")] if has_returns(curve, EVALUATION) else [])
            for key, label in kinds:
                values = marks_read(curve, summary, frames, case.marks, key)
                by_seed += [values] if key == case.returns else []
                lines.append(f"| {label} | {' | '.join(map(_cell, values))} | {frames / 1e6:.2f}M | {wall:.0f} | "
                             f"{summary.get('stop_reason', 'running or killed')} | {cpu_label(logdir)} |")
        if not group.variant and len(by_seed) > 1:  # NaN at a mark some seed has not reached
            means = [sum(column) / len(column) for column in zip(*by_seed, strict=True)]
            seeds = ", ".join(map(str, sorted(group.seeds)))
            lines.append(f"| **mean of seeds {seeds}** | {' | '.join(f'**{_cell(m)}**' for m in means)} | | | | |")
    for ref in case.references:
        values = " | ".join(_cell(ref.returns.get(m, math.nan)) for m in case.marks)
        lines.append(f"| {ref.name} | {values} | | | | |")
    lines += ["", *(f"- {ref.name}: {ref.source}" for ref in case.references)]
    runs = [(group.label(seed), logdir, group.flags)
            for group in groups for seed, logdir in sorted(group.seeds.items())]
    lines += configs_markdown(runs, run_command(case, 0, Path(name)), defaults)
    if plot:
        lines += ["", f"![{name}]({plot})"]
    return lines + [""]


def plot_case(case: Case, groups: list[RunGroup], png: Path) -> bool:
    """Return against frames, with the references' points, and against wall time (bench/plot.py,
    as `seedfleet plot` draws runs), each run named with its CPU there. The defaults' seeds are
    drawn bold, variants thin."""
    curves = [Curve(f"seedfleet {group.label(seed)}", read_curve(logdir), cpu_label(logdir), bold=not group.variant)
              for group in groups for seed, logdir in sorted(group.seeds.items())]
    return bool(draw(curves, png, f"{case.env} ({case.algo})", case.references, x_max=case.frames,
                     training=case.returns))


def task_result(name: str, case: Case, group: RunGroup, picture: str) -> TaskResult:
    """The default's seeds of a case as the head of BENCHMARKS.md reads them."""
    reads, walls, rates, commits, cpus = [], [], [], [], []
    for _, logdir in sorted(group.seeds.items()):
        curve = read_curve(logdir)
        summary = json.loads((logdir / "summary.json").read_text()) if (logdir / "summary.json").exists() else {}
        last = curve[-1] if curve else {}
        reads.append(marks_read(curve, summary, summary.get("frames", last.get("frames", 0)), case.marks,
                                case.returns))
        walls.append(summary.get("wall_s", last.get("elapsed_s", 0)) / 60)
        fps = sorted(row["frames_per_s"] for row in curve if row.get("frames_per_s", 0) > 0)
        rates.append(fps[len(fps) // 2] if fps else math.nan)
        commits += [m["commit"] for m in read_machine(logdir) if m.get("commit")]
        cpus.append(cpu_label(logdir))
    means = tuple(sum(column) / len(column) for column in zip(*reads, strict=True))
    command = " ".join([f"seedfleet run --env {case.env} --algo {case.algo} --max-frames {case.frames} --seed N",
                        *case.args])
    return TaskResult(name, case.env, case.algo, case.marks, tuple(sorted(group.seeds)), means, tuple(walls),
                      tuple(rates), " / ".join(dict.fromkeys(cpus)), tuple(dict.fromkeys(commits)), command, picture,
                      case.references, EPISODES[case.returns])


def game_runs(game: str, runs: Path) -> GameRuns | None:
    """The default's runs of an Atari game's case, as the breadth report reads them (None: only variants)."""
    name, case = game.lower(), CASES[game.lower()]
    group = next((g for g in run_groups(name, runs) if not g.variant), None)
    if group is None:
        return None
    result = task_result(name, case, group, "")
    curves = [read_curve(logdir) for _, logdir in sorted(group.seeds.items())]
    return GameRuns(game, result.seeds, curves, result.means, result.wall_min, result.cpu,
                    describe(case.env, 0)[0].num_actions)


def report(md_path: Path, names: list[str], runs: Path = RESULTS, defaults: Defaults = todays_defaults) -> None:
    """Rewrites the learn section (a table and a picture per case, variants included), and where
    the page has them, the head's table of what each task learns (the defaults' runs only) and
    the Atari breadth report (bench/atari_breadth.py)."""
    m = machine()
    body = [f"Report of {m['date']}, commit {m['commit']}, {m['cores']} cores of {m['cpu']}. A CPU's units set a "
            f"conv torso's arithmetic unless the run's flags say `--compute-dtype`: bfloat16 on "
            f"{' and '.join(BFLOAT16_CPU_FLAGS)}, float32 elsewhere (`--compute-dtype auto`).", ""]
    head: list[TaskResult] = []
    for name in names:
        groups = run_groups(name, runs)
        if not groups:
            continue
        png = md_path.parent / f"BENCHMARKS-learn-{name}.png"
        picture = png.name if plot_case(CASES[name], groups, png) else ""
        body += case_markdown(name, CASES[name], groups, picture, defaults)
        head += [task_result(name, CASES[name], group, picture) for group in groups if not group.variant]
    replace_section(md_path, BEGIN, END, "\n".join(body))
    replace_section(md_path, HEAD_BEGIN, HEAD_END, "\n".join(learning_table(head)), missing_ok=True)
    games = [game_runs(game, runs) for game in ATARI_GAMES if run_groups(game.lower(), runs)]
    games = [g for g in games if g is not None]
    png = md_path.parent / "BENCHMARKS-learn-atari-breadth.png"
    picture = [f"![Atari breadth]({png.name})"] if plot_breadth(games, png) else []
    replace_section(md_path, BREADTH_BEGIN, BREADTH_END, "\n".join([*breadth_markdown(games), "", *picture]),
                    missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seedfleet.bench.learn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--report-only", action="store_true",
                        help="keep what runs/learn holds, then rewrite the report")
    parser.add_argument("--timeout-s", type=float, default=4 * 3600, help="a run still going after this is stopped")
    parser.add_argument("--resume", action="store_true",
                        help="continue each run from the newest checkpoint in its log dir instead of starting afresh")
    parser.add_argument("--benchmarks", default="BENCHMARKS.md")
    parser.add_argument("--variant", default="", help="a name for runs with --flags, kept apart from the defaults'")
    parser.add_argument("--flags", default="", help="with --variant: seedfleet run flags beyond the case's")
    args = parser.parse_args(argv)
    if bool(args.variant) != bool(args.flags) or "@" in args.variant or "/" in args.variant:
        parser.error("--variant NAME (no @ or /) and --flags go together")
    flags = tuple(shlex.split(args.flags))
    failed = 0
    if not args.report_only:
        stop_on_signals()
        for name in args.cases:
            if STOP.is_set():
                break
            folder = runs_dir(name, args.variant)
            folder.mkdir(parents=True, exist_ok=True)
            if args.variant:
                (folder / VARIANT_FILE).write_text(json.dumps({"flags": list(flags)}) + "\n")
            for seed in args.seeds:
                if STOP.is_set():
                    break
                logdir = folder / f"seed{seed}"
                logdir.mkdir(parents=True, exist_ok=True)
                if not args.resume:  # a fresh run's curve starts empty: an old one would stop it at once
                    for name_kept in KEPT:
                        (logdir / name_kept).unlink(missing_ok=True)
                command = run_command(CASES[name], seed, logdir, flags, args.resume)
                print("$", " ".join(command[2:]), flush=True)
                code = run_until(command, logdir, args.timeout_s, CASES[name].stop_at, append=args.resume)
                failed += code not in (0, 1, 143, -signal.SIGTERM)  # 1: budget spent, target missed
                keep(logdir)
                report(Path(args.benchmarks), list(CASES))  # the table grows as runs end
    else:
        keep_all()
    report(Path(args.benchmarks), list(CASES))  # every case with runs, not only those run now
    if failed:
        return 1
    return 128 + signal.SIGTERM if STOP.is_set() else 0  # stopped before its seeds ran out


if __name__ == "__main__":
    sys.exit(main())
