"""Plots a run's learning curve (mean return over 100 episodes against frames) to a PNG,
with the evaluation episodes' curve beside it when the run had evaluation envs.

    python -m seedfleet.deploy.plot_progress runs/pong/progress.csv pong.png
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def plot(csv_path: Path, png_path: Path, title: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(7, 4))
    curves = (("mean_return_last_100", "training envs"), ("mean_eval_return_last_100", "evaluation envs"))
    for column, label in curves:
        kept = [r for r in rows if r.get(column, "nan") != "nan"]
        if kept:
            ax.plot([int(r["frames"]) / 1e6 for r in kept], [float(r[column]) for r in kept], label=label)
    ax.legend()
    ax.set_xlabel("env frames (millions)")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_title(title or csv_path.parent.name)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    plot(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
