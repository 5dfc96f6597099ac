"""Dynamic batching of inference requests from many actor streams.

Requests wait in a list. A batch is flushed to the inference thread when
  * the envs waiting reach `max_batch_envs`, or
  * every active stream has a request waiting (nobody else could join the batch), or
  * `timeout_s` has passed since the oldest request arrived.
While the inference thread is busy, requests keep gathering, so batches grow with the
load, up to `max_batch_envs` (a request is never split; the rest waits for the next
batch). Each request's result goes back to its own caller's future.

A stream counts as active while it has submitted within the last `quiet_after_s`: a
stream that goes quiet (a stalled or silent peer, one that said Hello and nothing more)
stops holding the others' batches back after that long, instead of costing every batch
the full timeout. The count of active streams is cached: it is counted again only when
the earliest counted stream could have gone quiet, or when a stream opens, closes or
comes back from quiet, so a wake-up costs O(1), not a pass over every stream.

The waits use `asyncio.timeout`, not `asyncio.wait_for`: on Python 3.11, wait_for returns
normally when a cancel arrives just as the awaited event fires (CPython gh-86296), and a
batcher that swallowed `stop()`'s cancel would wait for requests forever. `stop()` also
sets a flag the loop checks, so no single cancel has to land.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from seedfleet.stage_clock import StageClock


class DynamicBatcher:
    def __init__(
        self,
        process: Callable[[Sequence[Any]], Sequence[Any]],
        executor: Executor,
        max_batch_envs: int,
        timeout_s: float,
        size_of: Callable[[Any], int] = lambda request: 1,
        quiet_after_s: float = 1.0,
        clock: StageClock | None = None,
    ):
        self._process = process
        self.clock = clock or StageClock()  # its own CPU ("batcher"), between the awaits
        self._executor = executor
        self.max_batch_envs = max_batch_envs
        self.timeout_s = timeout_s
        self._size_of = size_of
        self._pending: list[tuple[Any, asyncio.Future, float]] = []  # request, future, arrival
        self._pending_envs = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.error: Exception | None = None  # the last failure of `process`, for the owner to act on
        self.quiet_after_s = quiet_after_s
        self._last_submit: dict[int, float] = {}  # open stream -> loop time it last submitted (or opened)
        self._next_stream = 0
        self._active = 0  # streams active at the last count
        self._recount_at = -math.inf  # loop time from which that count may be stale
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="batcher")

    async def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for _, future, _ in self._pending:
            future.cancel()
        self._pending = []

    def stream_opened(self) -> int:
        """A caller that may submit from now on; returns the token it submits with."""
        self._next_stream += 1
        self._last_submit[self._next_stream] = asyncio.get_running_loop().time()
        self._recount_at = -math.inf
        return self._next_stream

    def stream_closed(self, stream: int) -> None:
        self._last_submit.pop(stream, None)
        self._recount_at = -math.inf

    async def submit(self, request: Any, stream: int | None = None) -> Any:
        return await self.submit_nowait(request, stream)

    def submit_nowait(self, request: Any, stream: int | None = None) -> asyncio.Future:
        """Queues `request`; its result (or error) comes on the returned future. Cancelling
        the future withdraws the request if no batch has taken it yet."""
        with self.clock.stage("batcher"):
            loop = asyncio.get_running_loop()
            last = self._last_submit.get(stream)
            if last is not None:
                if last < loop.time() - self.quiet_after_s:  # back from quiet: one more active stream
                    self._recount_at = -math.inf
                self._last_submit[stream] = loop.time()
            future = loop.create_future()
            self._pending.append((request, future, loop.time()))
            self._pending_envs += self._size_of(request)
            self._wakeup.set()
        return future

    def _ready(self) -> bool:
        if self._pending_envs >= self.max_batch_envs:
            return True
        return 0 < self._active_streams() <= len(self._pending)

    def _active_streams(self) -> int:
        """Streams that submitted (or opened) within the last quiet_after_s."""
        now = asyncio.get_running_loop().time()
        if now >= self._recount_at:
            since = now - self.quiet_after_s
            active = [last for last in self._last_submit.values() if last >= since]
            self._active = len(active)
            self._recount_at = min(active) + self.quiet_after_s if active else math.inf
        return self._active

    def _take_batch(self) -> list[tuple[Any, asyncio.Future]]:
        """Up to max_batch_envs of the oldest requests; callers gone away (a dead stream) are dropped."""
        batch, envs, taken = [], 0, 0
        for request, future, _ in self._pending:
            if batch and envs + self._size_of(request) > self.max_batch_envs:
                break
            taken += 1
            if not future.done():
                batch.append((request, future))
                envs += self._size_of(request)
        self._pending = self._pending[taken:]
        self._pending_envs = sum(self._size_of(r) for r, _, _ in self._pending)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            started = self.clock.start()
            if not self._pending:
                self._wakeup.clear()
                self.clock.lap("batcher", started)
                await self._wakeup.wait()
                continue
            remaining = self._pending[0][2] + self.timeout_s - loop.time()
            if remaining > 0 and not self._ready():
                self._wakeup.clear()
                self.clock.lap("batcher", started)
                try:
                    async with asyncio.timeout(remaining):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
                continue
            batch = self._take_batch()
            requests = [r for r, _ in batch]
            self.clock.lap("batcher", started)
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(self._executor, self._process, requests)
            except Exception as error:  # noqa: BLE001 - every caller hears of it
                self.error = error
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            with self.clock.stage("batcher"):
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, Exception):  # this caller's own request was refused
                        future.set_exception(result)
                    else:
                        future.set_result(result)
