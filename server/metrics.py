"""Learner metrics: thread-safe counters, console progress, TensorBoard and summary.json."""

from __future__ import annotations

import csv
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from seedfleet.json_files import write_json
from seedfleet.server.progress import RunProgress
from seedfleet.stage_clock import StageClock
from seedfleet.threads import cpu_by_thread_name


class Metrics:
    """Counters written by the inference and trainer threads, read by the reporter."""

    def __init__(self, frame_skip: int, window: int = 100):
        self.frame_skip = frame_skip
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self.env_steps = 0  # training envs' steps: the frame budget and every curve count these
        self.eval_env_steps = 0  # evaluation envs' steps, apart (published curves count training frames)
        self.refused_steps = 0  # env steps refused: their observations drove the policy to a bad output
        self.skipped_learner_steps = 0  # gradient steps left out: their loss or gradient was not finite
        self.episodes = 0
        self.learner_steps = 0
        self._returns: deque[float] = deque(maxlen=window)
        self._lengths: deque[int] = deque(maxlen=window)
        self.eval_episodes = 0
        self._eval_returns: deque[float] = deque(maxlen=window)  # evaluation envs, reported apart
        # The episodes of trusted streams only (server/service.py), training and evaluation: the target's windows.
        self._target_returns: deque[float] = deque(maxlen=window)
        self._target_eval_returns: deque[float] = deque(maxlen=window)
        self.reached_target_mean = math.nan  # the full window's mean when `target_reached` first held
        self._new_eval_returns: list[float] = []
        self._new_returns: list[float] = []
        self._new_lengths: list[int] = []
        self._loss_sums: dict[str, float] = {}  # learner-step metrics summed since the last interval,
        self._loss_counts: dict[str, int] = {}  # over the steps where each was finite
        self.inference_calls = 0  # over the whole run
        self._interval_start = (0, 0)  # (env_steps, inference_calls) at the last take_interval

    def state(self) -> dict:
        """The counters and the last 100 episodes, for a checkpoint."""
        with self._lock:
            return {"env_steps": self.env_steps, "eval_env_steps": self.eval_env_steps, "episodes": self.episodes,
                    "learner_steps": self.learner_steps, "eval_episodes": self.eval_episodes,
                    "elapsed_s": time.monotonic() - self.start,
                    "returns": list(self._returns), "lengths": list(self._lengths),
                    "eval_returns": list(self._eval_returns), "target_returns": list(self._target_returns),
                    "target_eval_returns": list(self._target_eval_returns)}

    def restore(self, state: dict) -> None:
        """Continues from a checkpoint's `state()`: counters, episode windows and elapsed time."""
        with self._lock:
            self.env_steps, self.episodes = state["env_steps"], state["episodes"]
            self.eval_env_steps = state.get("eval_env_steps", 0)  # absent from older checkpoints
            self.learner_steps, self.eval_episodes = state["learner_steps"], state["eval_episodes"]
            self.start = time.monotonic() - state["elapsed_s"]
            self._returns.extend(state["returns"])
            self._lengths.extend(state["lengths"])
            self._eval_returns.extend(state["eval_returns"])
            self._target_returns.extend(state.get("target_returns", state["returns"]))  # older checkpoints: all
            self._target_eval_returns.extend(state.get("target_eval_returns", state["eval_returns"]))
            self._interval_start = (self.env_steps + self.eval_env_steps, self.inference_calls)

    def add_inference(self, env_steps: int, eval_env_steps: int, returns: np.ndarray, lengths: np.ndarray,
                      evaluation: np.ndarray, trusted: np.ndarray | None = None) -> None:
        """One inference batch: `env_steps` training and `eval_env_steps` evaluation envs stepped,
        and the episodes that ended (`evaluation` marks those of evaluation envs, `trusted`
        those that count for the target return; default all)."""
        with self._lock:
            counted = returns if trusted is None else returns[trusted]
            counted_evaluation = evaluation if trusted is None else evaluation[trusted]
            self._target_eval_returns.extend(counted[counted_evaluation].tolist())
            self._target_returns.extend(counted[~counted_evaluation].tolist())
            self.env_steps += env_steps
            self.eval_env_steps += eval_env_steps
            self.inference_calls += 1
            if evaluation.any():
                self.eval_episodes += int(evaluation.sum())
                self._eval_returns.extend(returns[evaluation].tolist())
                self._new_eval_returns.extend(returns[evaluation].tolist())
                returns, lengths = returns[~evaluation], lengths[~evaluation]
            if len(returns):
                self.episodes += len(returns)
                self._returns.extend(returns.tolist())
                self._lengths.extend(lengths.tolist())
                self._new_returns.extend(returns.tolist())
                self._new_lengths.extend(lengths.tolist())

    def add_refused(self, env_steps: int) -> None:
        with self._lock:
            self.refused_steps += env_steps

    def add_learner_step(self, losses: dict[str, float]) -> None:
        with self._lock:
            self.learner_steps += 1
            self.skipped_learner_steps += int(losses.get("skipped_steps", 0))
            for name, value in losses.items():
                if math.isfinite(value):
                    self._loss_sums[name] = self._loss_sums.get(name, 0.0) + value
                    self._loss_counts[name] = self._loss_counts.get(name, 0) + 1

    def served(self) -> int:
        """Env steps served so far, training and evaluation envs alike."""
        with self._lock:
            return self.env_steps + self.eval_env_steps

    @property
    def frames(self) -> int:
        return self.env_steps * self.frame_skip

    def mean_return(self, last: int | None = None) -> float:
        """The mean return of the window's training episodes, or of its `last` few."""
        with self._lock:
            returns = list(self._returns)[-last:] if last else self._returns
            return float(np.mean(returns)) if returns else math.nan

    def mean_eval_return(self) -> float:
        with self._lock:
            return float(np.mean(self._eval_returns)) if self._eval_returns else math.nan

    def _target_window(self) -> deque[float]:
        """The episodes the target reads (call with the lock held): evaluation episodes of
        trusted streams once there are any, their training episodes otherwise."""
        return self._target_eval_returns if self._target_eval_returns else self._target_returns

    def target_mean(self) -> float:
        """The mean of the window `target_reached` reads (NaN while it is empty)."""
        with self._lock:
            window = self._target_window()
            return float(np.mean(window)) if window else math.nan

    def target_reached(self, target: float) -> bool:
        """The mean over a full window of 100 episodes of trusted streams reaches `target`:
        evaluation episodes once there are any, training episodes otherwise. The first mean that
        reaches it is kept in `reached_target_mean` for the stop's progress line."""
        with self._lock:
            window = self._target_window()
            # `not >=` so that a NaN target (none set) is never reached
            if len(window) < window.maxlen or not (mean := float(np.mean(window))) >= target:
                return False
            if math.isnan(self.reached_target_mean):
                self.reached_target_mean = mean
            return True

    def summary(self) -> dict:
        """The counters for summary.json."""
        wall = time.monotonic() - self.start
        mean_return, mean_eval = self.mean_return(), self.mean_eval_return()
        with self._lock:
            return {
                "env_steps": self.env_steps,
                "frames": self.env_steps * self.frame_skip,
                "eval_env_steps": self.eval_env_steps,
                "refused_steps": self.refused_steps,
                "skipped_learner_steps": self.skipped_learner_steps,
                "wall_s": round(wall, 2),
                "episodes": self.episodes,
                "mean_return_last_100": None if math.isnan(mean_return) else round(mean_return, 2),
                "eval_episodes": self.eval_episodes,
                "mean_eval_return_last_100": None if math.isnan(mean_eval) else round(mean_eval, 2),
                "env_steps_per_s": round(self.env_steps / wall, 1),
                "learner_steps": self.learner_steps,
            }

    def take_interval(self) -> dict:
        """Everything since the last call: episodes finished, each learner-step metric's mean
        over the steps taken (a metric that was never finite, or no step: absent), batch sizes."""
        with self._lock:
            out = {
                "returns": self._new_returns,
                "lengths": self._new_lengths,
                "eval_returns": self._new_eval_returns,
                "losses": {name: total / self._loss_counts[name] for name, total in self._loss_sums.items()},
                "mean_batch": (self.env_steps + self.eval_env_steps - self._interval_start[0])
                / max(self.inference_calls - self._interval_start[1], 1),
                "env_steps": self.env_steps,
                "learner_steps": self.learner_steps,
            }
            self._new_returns, self._new_lengths, self._new_eval_returns = [], [], []
            self._loss_sums, self._loss_counts = {}, {}
            self._interval_start = (self.env_steps + self.eval_env_steps, self.inference_calls)
            return out


def resident_memory_gib() -> float:
    """This process's resident memory (Linux /proc; NaN elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return math.nan
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**30


# TensorBoard gets the CPU by stage and thread over windows of at least this long: a scalar
# costs a TensorFlow op on the event loop, and there are dozens (at a 1-s progress interval
# they took half the event loop's own CPU with front ends).
CPU_SUMMARY_INTERVAL_S = 30.0


class TrainerProgress(Protocol):
    """A trainer's own figures, as the reporter reads them (algorithms/trainer.py)."""

    PROGRESS_COLUMNS: tuple[str, ...]

    def progress(self) -> dict[str, float]: ...


class Tracker(Protocol):
    """An experiment tracker (server/tracking.py): each progress interval's figures, at its frames."""

    def log(self, frames: int, interval: dict, scalars: dict[str, float], mean_return: float,
            mean_eval_return: float) -> None: ...


class Reporter:
    """Console progress lines, progress.csv, TensorBoard scalars and learner_cpu.json at a fixed
    interval. learner_cpu.json holds the run's totals so far (env steps served, training and
    evaluation; CPU seconds by stage and by thread): two reads of it give the learner's CPU per
    env step over any window (bench.load); TensorBoard gets it per stage, over 30-s windows."""

    CSV_COLUMNS = (
        "elapsed_s", "frames", "env_steps", "frames_per_s", "mean_return_last_100", "episodes", "learner_steps",
        "learner_steps_per_s", "mean_eval_return_last_100", "memory_gib", "mean_return_last_20",
    )  # then the trainer's own columns (TrainerThread.PROGRESS_COLUMNS), then DIAGNOSTICS
    # Learner-step metrics written to progress.csv too (means over the interval; empty where the
    # algorithm has none), as these columns: PPO's and IMPALA's usual health checks.
    DIAGNOSTICS = {
        "policy_lag": "policy/lag",  # learner steps between the policy that acted and the one training
        "approx_kl": "policy/approx_kl",  # KL(behaviour || learner) on the batch's actions
        "clip_fraction": "policy/clip_fraction",  # share of transitions whose ratio the loss clips
        "explained_variance": "value/explained_variance",  # of the value targets by the value function
        "advantage_mean": "advantage/mean",  # before any normalisation
        "advantage_std": "advantage/std",
        "policy_entropy": "policy/entropy",
        "state_information": "policy/state_information",  # I(state; action): 0 for a policy blind to its input
        "action_std": "policy/action_std",  # Box actions: the Gaussian's std, averaged over dimensions
        "epsilon": "policy/epsilon",  # PQN: the training envs' exploration rate
        "alpha": "sac/alpha",  # SAC: the entropy temperature
        "q_mean": "q/mean",  # value-based agents and SAC: mean Q of the trained actions
        "loss": "loss/total",  # the loss the learner step minimises (every agent but SAC)
        "grad_norm": "grad_norm",  # global gradient norm before --max-grad-norm clips it (every agent but SAC)
        "critic_loss": "loss/critic",  # SAC: the twin critics' squared TD error
        "value_std": "value/normalization_std",  # --normalize-values: sigma, the value head's unit
    }

    def __init__(self, metrics: Metrics, logdir: Path, queue_depth, summary_writer=None,
                 clock: StageClock | None = None, trainer: TrainerProgress | None = None,
                 other_processes_cpu: Callable[[], tuple[dict, dict]] | None = None,
                 progress: RunProgress | None = None, tracker: Tracker | None = None):
        self.metrics = metrics
        self.trainer_columns = trainer.PROGRESS_COLUMNS if trainer is not None else ()
        self.trainer_progress = trainer.progress if trainer is not None else dict
        self.clock = clock or StageClock()
        self.other_processes_cpu = other_processes_cpu  # () -> (stages, threads) CPU seconds of the front ends
        self.progress = progress or RunProgress()  # share of the budget and ETA, best return against the target
        self.tracker = tracker  # an experiment tracker beside TensorBoard (server/tracking.py), if any
        self._last_cpu = self._cpu()
        self.logdir = logdir
        self.queue_depth = queue_depth
        self.writer = summary_writer
        self._last_time = time.monotonic()
        self._last_steps = metrics.env_steps  # a resumed run continues its counters
        self._last_learner_steps = metrics.learner_steps
        self.csv_path = logdir / "progress.csv"
        if not self.csv_path.exists():
            self.csv_path.write_text(",".join((*self.CSV_COLUMNS, *self.trainer_columns, *self.DIAGNOSTICS)) + "\n")
        # a resumed run goes on in its file's own columns (one written before a column was added has
        # no place for it), so every row stays under its header
        with self.csv_path.open() as f:
            self.csv_fields = next(csv.reader(f))

    def report(self) -> str:
        now = time.monotonic()
        interval = self.metrics.take_interval()
        dt = max(now - self._last_time, 1e-9)
        steps_per_s = (interval["env_steps"] - self._last_steps) / dt
        learner_per_s = (interval["learner_steps"] - self._last_learner_steps) / dt
        self._last_time, self._last_steps = now, interval["env_steps"]
        self._last_learner_steps = interval["learner_steps"]
        frames = interval["env_steps"] * self.metrics.frame_skip
        mean_return, mean_eval = self.metrics.mean_return(), self.metrics.mean_eval_return()
        elapsed = now - self.metrics.start
        memory = resident_memory_gib()
        trainer = self.trainer_progress()
        cpu = self._cpu()
        scalars = self._scalars(interval, steps_per_s, learner_per_s, memory, cpu, trainer)
        if self.writer is not None:
            self._write_summaries(frames, interval, scalars)
        if self.tracker is not None:
            self.tracker.log(frames, interval, scalars, mean_return, mean_eval)
        write_json(self.logdir / "learner_cpu.json", cpu)
        row = {
            "elapsed_s": f"{elapsed:.1f}", "frames": frames, "env_steps": interval["env_steps"],
            "frames_per_s": f"{steps_per_s * self.metrics.frame_skip:.1f}",
            "mean_return_last_100": f"{mean_return:.3f}",
            "episodes": self.metrics.episodes, "learner_steps": interval["learner_steps"],
            "learner_steps_per_s": f"{learner_per_s:.2f}", "mean_eval_return_last_100": f"{mean_eval:.3f}",
            "memory_gib": f"{memory:.3f}", "mean_return_last_20": f"{self.metrics.mean_return(20):.3f}",
            **{column: f"{value:.6g}" for column, value in trainer.items()},
            **{column: f"{interval['losses'][name]:.6g}" if name in interval["losses"] else ""
               for column, name in self.DIAGNOSTICS.items()},
        }
        with self.csv_path.open("a", newline="") as f:
            csv.DictWriter(f, self.csv_fields, extrasaction="ignore", lineterminator="\n").writerow(row)
        evaluation = f"eval(100) {mean_eval:.1f}  " if self.metrics.eval_episodes else ""
        # episodes that end between the stop decision and this line can pull the window back under
        # the target: the line reads at least the mean that stopped the run
        target_mean = np.fmax(self.metrics.target_mean(), self.metrics.reached_target_mean)
        along = self.progress.update(now, frames, float(target_mean))
        own = "".join(f"{column.replace('_', ' ')} {value:,.0f}  " if abs(value) >= 10 else
                      f"{column.replace('_', ' ')} {value:.2f}  " for column, value in trainer.items())
        return (
            f"frames {frames:,}  {along + '  ' if along else ''}fps {steps_per_s * self.metrics.frame_skip:,.0f}  "
            f"return(100) {mean_return:.1f}  {evaluation}episodes {self.metrics.episodes:,}  "
            f"learner steps {interval['learner_steps']:,} ({learner_per_s:.1f}/s)  {own}"
            f"mem {memory:.1f} GiB  elapsed {elapsed:.0f}s"
        )

    def _cpu(self) -> dict:
        """The run's totals so far, as learner_cpu.json holds them (call on the event loop)."""
        stages, threads = self.clock.totals(), cpu_by_thread_name(os.getpid())
        if self.other_processes_cpu is not None:
            other_stages, other_threads = self.other_processes_cpu()
            stages, threads = {**stages, **other_stages}, {**threads, **other_threads}
        return {"elapsed_s": round(time.monotonic() - self.metrics.start, 3), "env_steps": self.metrics.served(),
                "stages_cpu_s": {k: round(v, 6) for k, v in stages.items()},
                "threads_cpu_s": {k: round(v, 3) for k, v in threads.items()}}

    def _scalars(self, interval: dict, steps_per_s: float, learner_per_s: float, memory_gib: float, cpu: dict,
                 trainer: dict[str, float]) -> dict[str, float]:
        """The interval's scalars as TensorBoard and a tracker get them (its episodes apart); the
        CPU by stage and thread per env step once its window spans CPU_SUMMARY_INTERVAL_S."""
        scalars = {"throughput/env_frames_per_s": steps_per_s * self.metrics.frame_skip,
                   "throughput/learner_steps_per_s": learner_per_s,
                   "inference/mean_batch_size": interval["mean_batch"],
                   "queue/depth_unrolls": self.queue_depth(),
                   "learner/memory_gib": memory_gib,
                   **interval["losses"],
                   **{f"trainer/{name}": value for name, value in trainer.items()}}
        served = cpu["env_steps"] - self._last_cpu["env_steps"]
        if served and cpu["elapsed_s"] - self._last_cpu["elapsed_s"] >= CPU_SUMMARY_INTERVAL_S:
            for kind in ("stages_cpu_s", "threads_cpu_s"):
                for name, total in cpu[kind].items():
                    used = total - self._last_cpu[kind].get(name, 0.0)
                    scalars[f"learner_cpu_us_per_env_step/{kind.split('_')[0]}/{name}"] = 1e6 * used / served
            self._last_cpu = cpu
        return scalars

    def _write_summaries(self, frames: int, interval: dict, scalars: dict[str, float]) -> None:
        import tensorflow as tf

        with self.writer.as_default(step=frames):
            for r in interval["returns"]:
                tf.summary.scalar("episode/return", r)
            for n in interval["lengths"]:
                tf.summary.scalar("episode/length", n)
            for r in interval["eval_returns"]:
                tf.summary.scalar("eval/return", r)
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self.writer.flush()


def write_summary(path: Path, **fields) -> None:
    """Writes summary.json atomically."""
    write_json(path, fields)
