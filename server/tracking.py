"""Weights & Biases, optional: `pip install seedfleet[wandb]` and `--wandb-project NAME`.

Every progress interval the run logs what TensorBoard gets (throughput, inference, queue,
memory, the learner-step diagnostics, the trainer's own figures, the CPU by stage) against a
`frames` step metric (`define_metric`), so runs of different speeds line up. Episodes end
many to an interval, several at one step: W&B keeps one value per key per step, so each
interval logs their aggregate, `episode/return_mean`, `_min`, `_max` and `episode/count`
(and `eval/...` for evaluation envs), with the console's `episode/return_last_100`; none is
lost. The run's config is its config.json record (every flag as resolved) and its machine
record.

The W&B run id is kept in the log dir (WANDB_ID_FILE): a run resumed from a checkpoint logs
under the same id, from the checkpoint's frames on; a `--fresh` run starts a new W&B run.
W&B's own files go to <logdir>/wandb (WANDB_MODE=offline keeps them there, for `wandb sync`).
A failure of W&B while the run goes is logged once, and the run goes on without it.
Without the flag nothing of W&B is imported.
"""

from __future__ import annotations

import importlib.util
import logging
import math
from pathlib import Path

import numpy as np

from seedfleet.errors import UsageError
from seedfleet.server.config import LearnerConfig

log = logging.getLogger("seedfleet.learner")

WANDB_ID_FILE = "wandb_run_id"  # in the log dir: the W&B run this log dir's curve goes to


def episode_aggregates(prefix: str, returns: list[float], lengths: list[int] | None = None) -> dict[str, float]:
    """The interval's episodes as one value per key: mean, min and max return, count, mean length."""
    if not returns:
        return {}
    out = {f"{prefix}/return_mean": float(np.mean(returns)), f"{prefix}/return_min": float(np.min(returns)),
           f"{prefix}/return_max": float(np.max(returns)), f"{prefix}/count": float(len(returns))}
    if lengths:
        out[f"{prefix}/length_mean"] = float(np.mean(lengths))
    return out


def tracked_run_id(logdir: Path, fresh: bool) -> str | None:
    """The W&B run id this log dir's curve continues (None: a new run); a fresh run forgets it."""
    path = logdir / WANDB_ID_FILE
    if fresh or not path.exists():
        return None
    return path.read_text().strip() or None


class WandbTracker:
    """One W&B run for the learner's curve (a `Tracker`, server/metrics.py)."""

    def __init__(self, run) -> None:
        self.run = run
        self.failed = False

    @classmethod
    def start(cls, config: LearnerConfig, logdir: Path, record: dict) -> WandbTracker | None:
        """The W&B run of `config.wandb_project` (None without one), its config `record`
        (the run's flags and machine); its id is written to the log dir."""
        if not config.wandb_project:
            return None
        if importlib.util.find_spec("wandb") is None:
            raise UsageError("--wandb-project needs the wandb package: pip install 'seedfleet[wandb]'")
        import wandb

        run_id = tracked_run_id(logdir, config.fresh)
        run = wandb.init(project=config.wandb_project, entity=config.wandb_entity or None,
                         group=config.wandb_group or None, name=config.wandb_name or None, dir=str(logdir),
                         id=run_id, resume="allow", config=record,
                         settings=wandb.Settings(console="off"))
        if run_id is not None:  # resumed: the flags of this stretch (config.json has every stretch)
            run.config.update(record, allow_val_change=True)
        run.define_metric("frames")
        run.define_metric("*", step_metric="frames")
        (logdir / WANDB_ID_FILE).write_text(run.id + "\n")
        log.info("W&B run %s (%s) in project %s", run.id, "resumed" if run_id else "new", config.wandb_project)
        return cls(run)

    def log(self, frames: int, interval: dict, scalars: dict[str, float], mean_return: float,
            mean_eval_return: float) -> None:
        if self.failed:
            return
        row = {"frames": frames, **{k: v for k, v in scalars.items() if math.isfinite(v)},
               **episode_aggregates("episode", interval["returns"], interval["lengths"]),
               **episode_aggregates("eval", interval["eval_returns"])}
        for key, value in (("episode/return_last_100", mean_return), ("eval/return_last_100", mean_eval_return)):
            if math.isfinite(value):
                row[key] = value
        try:
            self.run.log(row)
        except Exception as error:  # noqa: BLE001 - a tracker never stops the run
            self.failed = True
            log.warning("W&B logging failed, the run goes on without it: %s", error)

    def finish(self) -> None:
        try:
            self.run.finish()
        except Exception as error:  # noqa: BLE001
            log.warning("W&B run did not finish cleanly: %s", error)
