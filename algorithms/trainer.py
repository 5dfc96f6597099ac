"""The trainer thread: batches from the learner's queue go through `agent.learn`.

Every algorithm's trainer is a `TrainerThread`: it runs beside the inference thread on
the same variables, holds `lock` while they change (a checkpoint waits for it), and
keeps its failure in `error` for the learner's main loop. On-policy agents (IMPALA)
train on each batch of unrolls once, as it comes; the off-policy algorithms' (replay_trainer.py)
puts them into replay first.

A learner step whose gradient is not finite changes nothing (optim.apply_clipped); the
trainer counts and warns of it, and stops with NonFiniteTraining after
MAX_NONFINITE_IN_A_ROW of them in a row, before any checkpoint holds a diverged run.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Agent, Unroll
from seedfleet.stage_clock import StageClock
from seedfleet.threads import name_this_thread

log = logging.getLogger("seedfleet.learner")

MAX_NONFINITE_IN_A_ROW = 20


class NonFiniteTraining(RuntimeError):
    """Learner steps kept giving a non-finite loss or gradient: the run has diverged."""


class UnrollSource(Protocol):
    """The learner's unroll queue, as trainers read it."""

    def get_batch(self, batch_size: int, timeout_s: float) -> Unroll | None: ...

    def get_chunk(self, timeout_s: float) -> Unroll | None: ...

    def done_with(self, unrolls: int) -> None: ...


class LearnerStepRecorder(Protocol):
    """The learner's metrics, as trainers report to them."""

    def add_learner_step(self, losses: dict[str, float]) -> None: ...


class TrainerThread(threading.Thread):
    def __init__(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 clock: StageClock | None = None):
        super().__init__(name="trainer", daemon=True)
        self.agent, self.queue, self.metrics, self.device = agent, queue, metrics, device
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # held while the variables change (checkpoints wait)
        self.nonfinite_in_a_row = 0
        self.clock = clock or StageClock()  # the learner's (server/assembly.py): CPU by stage

    def record_step(self, out: dict) -> None:
        """Reports one learner step's metrics; counts and warns of a step skipped for a
        non-finite gradient, and raises NonFiniteTraining after too many in a row."""
        losses = {k: float(v) for k, v in out.items()}
        if losses.get("skipped_steps", 0.0):
            self.nonfinite_in_a_row += 1
            log.warning("learner step skipped: non-finite loss or gradient (%d in a row)", self.nonfinite_in_a_row)
            if self.nonfinite_in_a_row >= MAX_NONFINITE_IN_A_ROW:
                raise NonFiniteTraining(f"{self.nonfinite_in_a_row} learner steps in a row had a non-finite loss or "
                                        "gradient; training stopped, the last checkpoint is the last good one")
        else:
            self.nonfinite_in_a_row = 0
        self.metrics.add_learner_step(losses)

    # What a trainer keeps beside the agent's variables, and reports of its own. An on-policy
    # trainer keeps nothing; the replay trainer keeps its replay (replay_trainer.py).

    PROGRESS_COLUMNS: tuple[str, ...] = ()  # its columns in progress.csv, in this order

    def state(self) -> dict[str, np.ndarray] | None:
        """What a checkpoint keeps beside the variables, as arrays (call with `lock` held); None: nothing."""
        return None

    def restore(self, arrays: dict[str, np.ndarray]) -> str:
        """Loads what `state` gave; returns what it restored, in words for the log. Raises
        ValueError if the arrays do not fit this trainer."""
        raise ValueError("this trainer keeps no state beside the variables")

    def progress(self) -> dict[str, float]:
        """Its own figures for the progress line, progress.csv (PROGRESS_COLUMNS) and TensorBoard."""
        return {}


class OnPolicyTrainer(TrainerThread):
    """Takes batches of unrolls off the queue and trains on them (or, if not `learn`,
    drops them: the bench's serve-only phase), until stopped."""

    def __init__(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 clock: StageClock | None = None, learn: bool = True):
        super().__init__(agent, queue, metrics, device, clock)
        self.learn = learn

    def run(self) -> None:
        name_this_thread("trainer")
        try:
            while not self.stopping.is_set():
                lap = self.clock.start()
                batch = self.queue.get_batch(self.agent.batch_size, timeout_s=0.5)
                lap = self.clock.lap("train_batch", lap)
                if batch is None:
                    continue
                if not self.learn:
                    self.queue.done_with(batch.size)
                    continue
                with self.lock, tf.device(self.device):
                    out = self.agent.learn(batch)
                self.queue.done_with(batch.size)  # acting may go on (--sync-acting), on the new variables
                self.record_step(out)
                self.clock.lap("train_step", lap)
        except BaseException as error:  # noqa: BLE001 - reported by the main loop
            self.error = error
