"""The bench's output: a console table, the sweep plot, and the table in BENCHMARKS.md.

    python -m seedfleet.bench.report BENCHMARKS.md --runs run1.json run2.json run3.json \
        [--sweep sweep.json --plot sweep.png]

writes the median of the runs (per figure), and the sweep, between the bench markers
of BENCHMARKS.md (`make bench` does all of it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seedfleet.machine_cpu import machine_label

PHASES = ("env", "model", "serve", "train_only", "train")
COLUMNS = (
    ("env_steps_per_s", "env steps/s"),
    ("frames_per_s", "frames/s"),
    ("mean_inference_batch", "mean batch"),
    ("latency_p50_ms", "latency p50 ms"),
    ("latency_p99_ms", "latency p99 ms"),
    ("server_cpu_cores", "server cores"),
    ("machine_busy_cores", "machine cores busy"),
    ("steal_cores", "steal cores"),
    ("learner_steps_per_s", "learner steps/s"),
    ("samples_trained_per_s", "samples trained/s"),
    ("transport_share", "transport share of CPU"),
)
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _cell(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def table_rows(results: dict) -> list[str]:
    """Markdown table: one row per phase present, one column per figure."""
    lines = ["| phase | " + " | ".join(title for _, title in COLUMNS) + " |",
             "| --- |" + " --- |" * len(COLUMNS)]
    for phase in PHASES:
        if phase in results:
            cells = [_cell(results[phase].get(key)) for key, _ in COLUMNS]
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return lines


def print_table(results: dict) -> None:
    print("\n".join(table_rows(results)))
    if "bounds" in results:
        b, r = results["bounds"], results["ratios"]
        print(f"serve bound {b['serve_env_steps_per_s']:,.0f} env steps/s, serve/bound {r['serve_vs_bound']:.3f}")
        print(f"train bound {b['train_env_steps_per_s']:,.0f} env steps/s, train/bound {r['train_vs_bound']:.3f}")
    for phase in ("serve", "train"):
        if "cores_by_thread" in results.get(phase, {}):
            top = list(results[phase]["cores_by_thread"].items())[:8]
            print(f"{phase} cores by thread: " + ", ".join(f"{name} {cores:.2f}" for name, cores in top))
    for row in results.get("sweep", []):
        print(f"sweep: {row['actors']} actors: env {row['env']['frames_per_s']:,.0f} frames/s, "
              f"serve {row['serve']['frames_per_s']:,.0f} frames/s")


def plot_sweep(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["sweep"]
    actors = [row["actors"] for row in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(actors, [row["env"]["frames_per_s"] for row in rows], "--", color="grey", label="env ceiling")
    ax.plot(actors, [row["serve"]["frames_per_s"] for row in rows], "o-", label="serve")
    ax.set_xlabel("actor processes")
    ax.set_ylabel("frames/s")
    ax.set_xticks(actors)
    ax.set_title(f"{results['config']['env']}, {results['config']['envs_per_actor']} envs per actor")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def median_of(runs: list[dict]) -> dict:
    """Per phase and figure, the median over runs (ratios too); the rest from the first run."""
    out = dict(runs[0])
    for phase in (*PHASES, "bounds", "ratios"):
        if phase in out:
            out[phase] = {k: (float(np.median([r[phase][k] for r in runs])) if isinstance(v, int | float) else v)
                          for k, v in out[phase].items() if all(r[phase].get(k) is not None for r in runs)}
    return out


def sweep_markdown(sweep: dict, plot: str) -> list[str]:
    lines = ["", f"Sweep: `{sweep['command']}`", "", "| actors | env ceiling frames/s | serve frames/s | ratio |",
             "| --- | --- | --- | --- |"]
    for row in sweep["sweep"]:
        env, served = row["env"]["frames_per_s"], row["serve"]["frames_per_s"]
        lines.append(f"| {row['actors']} | {env:,.0f} | {served:,.0f} | {served / env:.2f} |")
    return [*lines, "", f"![frames/s against actors]({plot})"] if plot else lines


def markdown(runs: list[dict], sweep: dict | None = None, plot: str = "") -> str:
    result = median_of(runs)
    m, r, b = result["machine"], result["ratios"], result["bounds"]
    per_run = ", ".join(f"{x['ratios']['serve_vs_bound']:.3f}/{x['ratios']['train_vs_bound']:.3f}" for x in runs)
    lines = [
        f"Median of {len(runs)} run(s) of `{result['command']}`, commit {m['commit']}, {m['date']}, "
        f"on {m['cores']} cores of {machine_label(m)} (Python {m['python']}).",
        "",
        *table_rows(result),
        "",
        f"Bounds (shared cores): serve {b['serve_env_steps_per_s']:,.0f} env steps/s, "
        f"train {b['train_env_steps_per_s']:,.0f} env steps/s. "
        f"**serve_vs_bound {r['serve_vs_bound']:.3f}, train_vs_bound {r['train_vs_bound']:.3f}** "
        f"(serve/train per run: {per_run}).",
    ]
    if all("before" in x["env"] for x in runs):
        drift = ", ".join(f"{x['env']['before']['env_steps_per_s']:,.0f}/{x['env']['after']['env_steps_per_s']:,.0f}"
                          for x in runs)
        lines.append(f"Env ceiling before/after serve, per run: {drift} env steps/s (the table has their mean).")
    if sweep is not None:
        lines += sweep_markdown(sweep, plot)
    return "\n".join(lines)


def replace_section(md_path: Path, begin: str, end: str, body: str, missing_ok: bool = False) -> None:
    """Writes `body` between the markers `begin` and `end` of `md_path`, keeping the rest; a page
    without them is an error, or left as it is with `missing_ok`."""
    text = md_path.read_text()
    if begin not in text or end not in text:
        if missing_ok:
            return
        raise SystemExit(f"{md_path} has no {begin} ... {end} section")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    md_path.write_text(f"{head}{begin}\n{body}\n{end}{tail}")


def update_benchmarks(md_path: Path, runs: list[dict], sweep: dict | None = None, plot: str = "") -> None:
    replace_section(md_path, BEGIN, END, markdown(runs, sweep, plot))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Writes bench results into BENCHMARKS.md.")
    parser.add_argument("markdown", type=Path)
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    parser.add_argument("--sweep", type=Path)
    parser.add_argument("--plot", default="")
    args = parser.parse_args(argv)
    sweep = json.loads(args.sweep.read_text()) if args.sweep else None
    update_benchmarks(args.markdown, [json.loads(p.read_text()) for p in args.runs], sweep, args.plot)


if __name__ == "__main__":
    main()
