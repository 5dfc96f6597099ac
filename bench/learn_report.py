"""The learning bench's report: per case, the return at its marks per seed beside the
references, and a picture against frames and wall time; the head's table of what each task
learns; and the Atari breadth report. `python -m seedfleet.bench.learn --report-only` writes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from seedfleet.bench.atari_breadth import BEGIN as BREADTH_BEGIN
from seedfleet.bench.atari_breadth import END as BREADTH_END
from seedfleet.bench.atari_breadth import GameRuns, breadth_markdown, plot_breadth
from seedfleet.bench.atari_references import ATARI_GAMES
from seedfleet.bench.learn_cases import CASES, RESULTS, Case, RunGroup, run_command, run_groups
from seedfleet.bench.plot import EPISODES, EVALUATION, TRAINING, Curve, draw, has_returns, read_curve, return_at
from seedfleet.bench.report import replace_section
from seedfleet.bench.results_page import BEGIN as HEAD_BEGIN
from seedfleet.bench.results_page import END as HEAD_END
from seedfleet.bench.results_page import TaskResult, learning_table
from seedfleet.bench.run_config import Defaults, configs_markdown, todays_defaults
from seedfleet.envs import describe
from seedfleet.machine_cpu import BFLOAT16_CPU_FLAGS, cpu_label, machine, read_machine

BEGIN, END = "<!-- learn:begin -->", "<!-- learn:end -->"


def _cell(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def _frames(n: int) -> str:
    return f"{n / 1e6:g}M"


def _run_read(logdir: Path) -> tuple[list[dict], dict, float, float]:
    """A kept run's curve, summary, frames and wall minutes (the curve's last row where a run
    killed before its summary has none)."""
    curve = read_curve(logdir)
    summary = json.loads((logdir / "summary.json").read_text()) if (logdir / "summary.json").exists() else {}
    last = curve[-1] if curve else {}
    wall_min = summary.get("wall_s", last.get("elapsed_s", 0)) / 60
    return curve, summary, summary.get("frames", last.get("frames", 0)), wall_min


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
            curve, summary, frames, wall = _run_read(logdir)
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
        curve, summary, frames, wall = _run_read(logdir)
        reads.append(marks_read(curve, summary, frames, case.marks, case.returns))
        walls.append(wall)
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
