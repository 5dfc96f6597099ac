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
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from seedfleet.bench.learn_cases import CASES, RESULTS, RUNS, VARIANT_FILE, run_command, runs_dir
from seedfleet.bench.learn_report import report
from seedfleet.bench.plot import read_curve
from seedfleet.machine_cpu import MACHINE_FILE
from seedfleet.settings import CONFIG_FILE, EVALS_FILE

KEPT = ("progress.csv", "summary.json", MACHINE_FILE, CONFIG_FILE, EVALS_FILE)  # CONFIG_FILE: the learner's record
STOP = threading.Event()  # set by SIGTERM or SIGINT to the bench (stop_on_signals)


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
