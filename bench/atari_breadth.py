"""The breadth report: every Atari game of bench/atari_references.py the learning bench ran under
the default, in one table and one picture, with the Atari-5 estimate and a health check per game.

Per game: the mean over the default's seeds of return(100) at 2.5M, 5M and 10M frames, its
human-normalised score at 10M, the references at 5M and 10M, the runs' wall time and CPU, and
its health, each check with the threshold that names a failure:
- the policy never uses its input: `state_information` (I(state; action), nats) below 0.01 at 5M;
- the value never explains the return: explained variance below 0.2 at 5M;
- the entropy collapses: below 10% of log |A| (at any progress line);
- the episodes stop ending: more than half of ALE's 108,000-frame cap per finished episode over
  any 2M frames of the run (a policy that stalls the game, as DoubleDunk's seed 0 did from 6M; no
  other run kept passed 34,000).
Below the table: the Atari-5 estimate of the 57-game median human-normalised score, for the
default (once all five games have a run to 10M) and for each reference, at 10M frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from seedfleet.bench.atari_references import (
    ATARI5_WEIGHTS,
    atari5_median_estimate,
    atari_references,
    human_normalized,
)
from seedfleet.bench.plot import TRAINING, return_at

BEGIN, END = "<!-- atari-breadth:begin -->", "<!-- atari-breadth:end -->"  # its section of BENCHMARKS.md
MARKS = (2_500_000, 5_000_000, 10_000_000)
HEALTH_AT = 5_000_000
STATE_INFORMATION_MIN = 0.01  # nats: a policy blind to its input has 0
EXPLAINED_VARIANCE_MIN = 0.2
ENTROPY_FLOOR = 0.1  # of log |A|
EPISODE_CAP = 108_000  # frames: ALE's v5 ids truncate an episode here (max_num_frames_per_episode)
STALL_WINDOW = 2_000_000  # frames over which finished episodes are counted
STALL_FRACTION = 0.5  # of EPISODE_CAP: longer episodes than this on average, the game is stalled


@dataclass(frozen=True)
class GameRuns:
    """The default's runs of one game: their progress rows, and what the table names them by."""

    game: str
    seeds: tuple[int, ...]
    curves: list[list[dict]]  # each seed's progress rows
    means: tuple[float, ...]  # the seeds' mean at MARKS
    wall_min: tuple[float, ...]
    cpu: str
    num_actions: int


def health(rows: list[dict], num_actions: int) -> list[str]:
    """The failures the run shows, named with their thresholds ([] for a healthy run; a run short
    of HEALTH_AT frames is judged at its last line, one short of a fifth of it not at all)."""
    if rows and rows[-1]["frames"] < HEALTH_AT / 5:
        return [f"too early to judge ({rows[-1]['frames']:,.0f} frames)"]
    failures = []
    information = return_at(rows, HEALTH_AT, "state_information")
    if information < STATE_INFORMATION_MIN:
        failures.append(f"policy blind to its input (state information {information:.3f} < {STATE_INFORMATION_MIN})")
    variance = return_at(rows, HEALTH_AT, "explained_variance")
    if variance < EXPLAINED_VARIANCE_MIN:
        failures.append(f"value explains little (explained variance {variance:.2f} < {EXPLAINED_VARIANCE_MIN})")
    entropies = [r["policy_entropy"] for r in rows if not math.isnan(r.get("policy_entropy", math.nan))]
    floor = ENTROPY_FLOOR * math.log(num_actions)
    if entropies and min(entropies) < floor:
        failures.append(f"entropy collapsed ({min(entropies):.3f} < 10% of log {num_actions})")
    frames_each, until = longest_episodes(rows)
    if frames_each > STALL_FRACTION * EPISODE_CAP:
        failures.append(f"episodes stopped ending ({frames_each:,.0f} frames per finished episode over the "
                        f"{STALL_WINDOW / 1e6:g}M frames to {until / 1e6:.1f}M; the cap is {EPISODE_CAP:,})")
    return failures


def longest_episodes(rows: list[dict]) -> tuple[float, float]:
    """The most frames per finished episode over any STALL_WINDOW frames of the progress rows
    (a window where none finished counts as its whole length), and the frames where that window
    ends; (0, 0) for a run shorter than the window, or rows without an episode count."""
    worst, until, start = 0.0, 0.0, 0
    for end, row in enumerate(rows):
        if row["frames"] < STALL_WINDOW or "episodes" not in row:
            continue
        while start + 1 < end and rows[start + 1]["frames"] <= row["frames"] - STALL_WINDOW:
            start += 1
        frames = row["frames"] - rows[start]["frames"]
        each = frames / max(row["episodes"] - rows[start]["episodes"], 1)
        if each > worst:
            worst, until = each, row["frames"]
    return worst, until


def _value(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:,.1f}"


def breadth_markdown(games: list[GameRuns]) -> list[str]:
    lines = ["| game | seedfleet at 2.5M / 5M / 10M | HNS at 10M | CleanRL PPO (Machado) 5M / 10M | "
             "DQN / Rainbow / IQN (Dopamine) at 10M | wall min per seed | CPU | health |", "|---" * 8 + "|"]
    for g in games:
        machado, dopamine = atari_references(g.game)[0], atari_references(g.game)[1:]
        ours = " / ".join(_value(v) for v in g.means)
        sick = sorted({failure for rows in g.curves for failure in health(rows, g.num_actions)})
        hns = human_normalized(g.game, g.means[-1])
        lines.append(f"| {g.game} | **{ours}** | {'-' if math.isnan(hns) else f'{hns:.2f}'} | "
                     f"{_value(machado.returns[5_000_000])} / {_value(machado.returns[10_000_000])} | "
                     f"{' / '.join(_value(r.returns[10_000_000]) for r in dopamine)} | "
                     f"{', '.join(f'{w:.0f}' for w in g.wall_min)} | {g.cpu} | {'; '.join(sick) or 'healthy'} |")
    at_10m = {g.game: g.means[-1] for g in games}
    lines += ["", "Atari-5 estimate of the 57-game median human-normalised score at 10M frames (it reads high this "
              "early; it ranks runs):", ""]
    ours = atari5_median_estimate(at_10m)
    lines.append(f"- seedfleet: {_value(ours) if math.isnan(ours) else f'{ours:.2f}'}"
                 + ("" if not math.isnan(ours) else f" (needs all five: {', '.join(ATARI5_WEIGHTS)})"))
    for index, name in enumerate(("PPO, CleanRL with Machado settings", "DQN, Dopamine", "Rainbow, Dopamine",
                                  "IQN, Dopamine")):
        scores = {game: atari_references(game)[index].returns[10_000_000] for game in ATARI5_WEIGHTS}
        lines.append(f"- {name}: {atari5_median_estimate(scores):.2f}")
    return lines


def plot_breadth(games: list[GameRuns], png: Path) -> bool:
    """The games' curves side by side: against frames with the references (top), against wall time (below)."""
    if not games:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(games), figsize=(3.6 * len(games), 6.5), squeeze=False)
    for column, g in enumerate(games):
        by_frames, by_time = axes[0][column], axes[1][column]
        for seed, rows in zip(g.seeds, g.curves, strict=True):
            kept = [r for r in rows if not math.isnan(r.get(TRAINING, math.nan))]
            by_frames.plot([r["frames"] / 1e6 for r in kept], [r[TRAINING] for r in kept], lw=1.8,
                           label=f"seedfleet seed {seed}")
            by_time.plot([r["elapsed_s"] / 60 for r in kept], [r[TRAINING] for r in kept], lw=1.8,
                         label=f"seed {seed} ({g.cpu})")
        for ref, marker in zip(atari_references(g.game), "osD^v", strict=False):
            points = sorted((f, v) for f, v in ref.returns.items() if f <= 10_000_000)
            by_frames.plot([f / 1e6 for f, _ in points], [v for _, v in points], "--", marker=marker, color="dimgrey",
                           lw=0.8, markerfacecolor="white", label=ref.name.split(" (")[0])
        by_frames.set(title=g.game, xlabel="frames (M)", xlim=(0, 10.3))
        by_time.set(xlabel="wall time (min)")
        by_frames.legend(fontsize=5.5)
        by_time.legend(fontsize=5.5)
        for ax in (by_frames, by_time):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("return, last 100 episodes")
    axes[1][0].set_ylabel("return, last 100 episodes")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)
    return True

