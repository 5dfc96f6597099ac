"""What the actors' gRPC service asks of the learner behind it, and the learner's own answer.

LearnerService (server/service.py) speaks the actor protocol. For the rest it goes to a
`StreamBackend`:

    open(run_id, num_envs, evaluation, trusted) -> OpenStream   a range of env ids, its envs reset
    submit(stream, request) -> future of actions                 one env step, batched (DynamicBatcher)
    close(stream)                                                the range freed

`LocalBackend` answers in the learner process. A front-end process (server/frontend.py)
answers through its link to the learner process, which hands each call to the learner's
LocalBackend (server/frontends.py): the batcher and the inference path are the same.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol

import grpc
import numpy as np

from seedfleet.envs import StepBatch
from seedfleet.server.batcher import DynamicBatcher


@dataclass
class StepRequest:
    env_ids: np.ndarray  # int32 [K]
    step: StepBatch

    def __len__(self) -> int:
        return len(self.env_ids)


class LearnerStopping(Exception):
    """The learner stops (its reason: max_frames, target_return, signal...): streams end
    with status OK and the reason in their trailing metadata, not with an error."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class PolicyOutputError(ValueError):
    """A request whose observations drove the policy to outputs no actor may get."""


class StreamRefused(Exception):
    """The learner will not serve a stream (any more): the gRPC status it is closed with."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def refusal_of(error: BaseException) -> StreamRefused:
    """The status a failed step closes its stream with: INVALID_ARGUMENT for the stream's own
    observations (only it is closed), INTERNAL for an inference failure (the learner stops)."""
    if isinstance(error, StreamRefused):
        return error
    if isinstance(error, PolicyOutputError):
        return StreamRefused(grpc.StatusCode.INVALID_ARGUMENT, f"observations: {error}")
    return StreamRefused(grpc.StatusCode.INTERNAL, f"inference failed: {error}")


@dataclass(frozen=True)
class OpenStream:
    token: int  # the batcher's token for the stream
    lo: int  # its env ids are lo..hi-1
    hi: int


class StreamBackend(Protocol):
    async def open(self, run_id: int, num_envs: int, evaluation: bool, trusted: bool) -> OpenStream: ...

    def submit(self, stream: OpenStream, request: StepRequest) -> asyncio.Future: ...

    def close(self, stream: OpenStream) -> None: ...


class SlotAllocator:
    """Hands out contiguous env id ranges; a returning run id gets its old range back if free.

    The ranges of past run ids are remembered for the newest `remembered` of them only."""

    def __init__(self, capacity: int, remembered: int = 4096):
        self.used = np.zeros(capacity, bool)
        self.previous: OrderedDict[int, tuple[int, int]] = OrderedDict()
        self.remembered = remembered

    def allocate(self, run_id: int, n: int) -> tuple[int, int] | None:
        lo_hi = self.previous.get(run_id)
        if lo_hi is None or lo_hi[1] - lo_hi[0] != n or self.used[lo_hi[0] : lo_hi[1]].any():
            counts = np.concatenate([[0], np.cumsum(self.used)])
            window = counts[n:] - counts[:-n] if n <= len(self.used) else np.array([1])
            free = np.flatnonzero(window == 0)
            if len(free) == 0:
                return None
            lo_hi = (int(free[0]), int(free[0]) + n)
        self.used[lo_hi[0] : lo_hi[1]] = True
        self.previous[run_id] = lo_hi
        self.previous.move_to_end(run_id)
        while len(self.previous) > self.remembered:
            self.previous.popitem(last=False)
        return lo_hi

    def release(self, lo: int, hi: int) -> None:
        self.used[lo:hi] = False


class LocalBackend:
    """Streams served in this process: env ids from a SlotAllocator, envs reset on the
    inference thread (which alone owns their state), steps through the DynamicBatcher."""

    def __init__(self, reset: Callable[[int, int, bool, bool], None], batcher: DynamicBatcher,
                 inference_executor: Executor, capacity: int):
        self.reset = reset  # InferenceEngine.reset(lo, hi, evaluation, trusted)
        self.batcher = batcher
        self.executor = inference_executor
        self.slots = SlotAllocator(capacity)

    async def open(self, run_id: int, num_envs: int, evaluation: bool, trusted: bool) -> OpenStream:
        id_range = self.slots.allocate(run_id, num_envs)
        if id_range is None:
            raise StreamRefused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"no room for {num_envs} more envs (--max-envs {len(self.slots.used)})")
        lo, hi = id_range
        try:  # on the inference thread, in order with the batches
            await asyncio.get_running_loop().run_in_executor(self.executor, self.reset, lo, hi, evaluation, trusted)
        except BaseException:
            self.slots.release(lo, hi)
            raise
        return OpenStream(self.batcher.stream_opened(), lo, hi)

    def submit(self, stream: OpenStream, request: StepRequest) -> asyncio.Future:
        return self.batcher.submit_nowait(request, stream.token)

    def close(self, stream: OpenStream) -> None:
        self.batcher.stream_closed(stream.token)
        self.slots.release(stream.lo, stream.hi)
