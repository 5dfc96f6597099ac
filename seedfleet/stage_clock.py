"""Where the learner's CPU goes, by stage of its path: the learner's own ceiling.

With a model that costs next to nothing (`--torso pool`), what limits a learner is its
Python path: gRPC, decoding, the batcher, per-env state, unroll assembly. Each stage
below runs on one thread; its time is that thread's CPU time (`time.thread_time`), so
waiting for a lock, a queue or the network costs nothing.

  event loop  receive    ActorMessage bytes parsed (protobuf)
              decode     the Steps message checked and decoded to arrays
              batcher    requests queued, batches taken, results handed back
              reply      the Actions message built
              link       (with --frontends) the links to the front ends: requests in, actions out
              (the rest of the event loop's CPU: gRPC's asyncio layer and the loop itself)
  inference   batch      the batch's requests joined, its envs' state gathered
              policy     the agent's act, outputs copied out of TensorFlow
              checks     outputs checked for refusal (non-finite, out of range)
              env_state  rows, agent state and episode counters written per env
              unrolls    completed unrolls copied out and queued for the trainer
              metrics    counters and episode returns
  trainer     train_batch  unrolls taken off the queue and joined into a batch
              train_step   the learner step (its arithmetic runs on TensorFlow's pool threads)

With --frontends (server/frontends.py), receive, decode and reply run in the front-end
processes, each with a "link" stage of its own (the step written to shared memory and
sent); they are reported as "frontend:<stage>", summed over the front ends.

The learner writes the totals with its threads' CPU (and the front ends') to
<logdir>/learner_cpu.json at every progress line (server/metrics.py), and TensorBoard gets
each stage's CPU per env step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageClock:
    """CPU seconds spent in each named stage, summed over the run. A lap costs one clock
    read (about 0.5 us): `t = clock.start(); ...; t = clock.lap("decode", t); ...`; a stage
    timed alone: `with clock.stage("decode"): ...`."""

    def __init__(self) -> None:
        self._cpu_s: dict[str, float] = {}  # a stage's key is written by its own thread only

    @staticmethod
    def start() -> float:
        return time.thread_time()

    def lap(self, stage: str, since: float) -> float:
        """Adds the calling thread's CPU time since `since` to `stage`; returns now, the next lap's start."""
        now = time.thread_time()
        self._cpu_s[stage] = self._cpu_s.get(stage, 0.0) + now - since
        return now

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Adds the calling thread's CPU time in the block to stage `name` (an exception too)."""
        since = time.thread_time()
        try:
            yield
        finally:
            self.lap(name, since)

    def totals(self) -> dict[str, float]:
        return dict(self._cpu_s)
