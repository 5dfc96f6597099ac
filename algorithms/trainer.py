"""The trainer thread: batches from the learner's queue go through `agent.learn`.

Every algorithm's trainer is a `TrainerThread`: it runs beside the inference thread on
the same variables, holds `lock` while they change (a checkpoint waits for it), and
keeps its failure in `error` for the learner's main loop. On-policy agents (IMPALA)
train on each batch of unrolls once, as it comes; R2D2's trainer (r2d2/trainer.py)
puts them into replay first.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np
import tensorflow as tf

from algorithms.agent import Agent, Unroll
from seedfleet.threads import name_this_thread


class UnrollSource(Protocol):
    """The learner's unroll queue, as trainers read it."""

    def get_batch(self, batch_size: int, timeout_s: float) -> Unroll | None: ...

    def get_chunk(self, timeout_s: float) -> Unroll | None: ...


class LearnerStepRecorder(Protocol):
    """The learner's metrics, as trainers report to them."""

    def add_learner_step(self, losses: dict[str, float]) -> None: ...


class TrainerThread(threading.Thread):
    def __init__(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str):
        super().__init__(name="trainer", daemon=True)
        self.agent, self.queue, self.metrics, self.device = agent, queue, metrics, device
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # held while the variables change (checkpoints wait)

    def replay_arrays(self) -> dict[str, np.ndarray] | None:
        """What a checkpoint keeps beside the variables (call with `lock` held): None here."""
        return None

    def restore_replay(self, arrays: dict[str, np.ndarray]) -> None:
        """Loads what `replay_arrays` gave; raises ValueError if it does not fit."""
        raise ValueError("this trainer keeps no replay")

    def replay_size(self) -> int:
        return 0


class OnPolicyTrainer(TrainerThread):
    """Takes batches of unrolls off the queue and trains on them (or, if not `learn`,
    drops them: the bench's serve-only phase), until stopped."""

    def __init__(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 learn: bool = True):
        super().__init__(agent, queue, metrics, device)
        self.learn = learn

    def run(self) -> None:
        name_this_thread("trainer")
        try:
            while not self.stopping.is_set():
                batch = self.queue.get_batch(self.agent.batch_size, timeout_s=0.5)
                if batch is None or not self.learn:
                    continue
                with self.lock, tf.device(self.device):
                    out = self.agent.learn(batch)
                self.metrics.add_learner_step({k: float(v) for k, v in out.items()})
        except BaseException as error:  # noqa: BLE001 - reported by the main loop
            self.error = error
