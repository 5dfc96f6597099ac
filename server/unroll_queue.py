"""A bounded queue of unrolls between the inference thread and the trainer thread.

Unrolls arrive in chunks (all the envs that completed an unroll in one inference
batch) and leave in training batches of a fixed size. A full queue blocks the
producer: the actors then wait for the learner, which keeps the data near on-policy.

With `sync_acting` the producer also waits, once a chunk completes a training batch, until
the trainer is done with that batch (`done_with`). Acting then pauses while the trainer
trains, and the next batch is acted by the policy it has just trained: a policy lag of 0
learner steps instead of about 1, as in synchronous PPO, at the price of actors idle while
the trainer works. Two parts of a batch still trail by a step: the first action of each
unroll (chosen on the unroll's boundary observation, before the wait) and the steps other
envs took between the first chunk of a batch and the one that completed it. A chunk taken
whole (`get_chunk`, the replay trainers') counts as done with when taken.
"""

from __future__ import annotations

import threading
from collections import deque

from seedfleet.algorithms.agent import Unroll


class UnrollQueue:
    """`capacity` bounds the unrolls held, except that a chunk is always admitted while the
    queue holds fewer than `batch_size`: otherwise a queue of 10 facing a chunk of 30 with
    capacity 32 would wait for a trainer that waits for 16, for ever."""

    def __init__(self, capacity: int, batch_size: int = 1, sync_acting: bool = False):
        self.capacity = capacity
        self.batch_size = batch_size
        self.sync_acting = sync_acting
        self.done = 0  # unrolls the trainer is done with (trained on, or taken whole)
        self._chunks: deque[Unroll] = deque()
        self._size = 0
        self._closed = False
        self._cond = threading.Condition()
        self.accepted = 0  # unrolls put, over the queue's life
        self.taken = 0  # unrolls handed to the trainer

    def __len__(self) -> int:
        return self._size

    def put(self, chunk: Unroll) -> bool:
        """Adds a chunk, waiting while the queue is full. False if the queue was closed."""
        with self._cond:
            while (self._size >= self.batch_size and self._size + chunk.size > self.capacity
                   and not self._closed):
                self._cond.wait()
            if self._closed:
                return False
            self._chunks.append(chunk)
            self._size += chunk.size
            self.accepted += chunk.size
            self._cond.notify_all()
            while self.sync_acting and self.accepted - self.done >= self.batch_size and not self._closed:
                self._cond.wait()
            return True

    def done_with(self, unrolls: int) -> None:
        """The trainer has trained on (or dropped) this many unrolls of the batches it took."""
        with self._cond:
            self.done += unrolls
            self._cond.notify_all()

    def get_batch(self, batch_size: int, timeout_s: float) -> Unroll | None:
        """Takes exactly `batch_size` unrolls, oldest first; None on timeout or close."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._size >= batch_size or self._closed, timeout_s):
                return None
            if self._closed:
                return None
            parts, need = [], batch_size
            while need:
                chunk = self._chunks.popleft()
                n = chunk.size
                if n > need:
                    self._chunks.appendleft(chunk.map(lambda v, lo=need: v[lo:]))
                    chunk = chunk.map(lambda v, hi=need: v[:hi])
                    n = need
                parts.append(chunk)
                need -= n
            self._size -= batch_size
            self.taken += batch_size
            self._cond.notify_all()
        return Unroll.concat(parts)

    def get_chunk(self, timeout_s: float) -> Unroll | None:
        """Takes the oldest chunk whole, whatever its size; None on timeout or close."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._chunks or self._closed, timeout_s) or self._closed:
                return None
            chunk = self._chunks.popleft()
            self._size -= chunk.size
            self.taken += chunk.size
            self.done += chunk.size
            self._cond.notify_all()
            return chunk

    def accounting(self) -> dict[str, int]:
        """Every unroll accepted was taken by the trainer or is still here: accepted == taken + left."""
        with self._cond:
            return {"accepted": self.accepted, "taken": self.taken, "left": self._size}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
