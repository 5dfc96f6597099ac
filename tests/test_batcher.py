"""The dynamic batcher: flush on size, on timeout, when every stream waits; replies reach their callers."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from seedfleet.server.batcher import DynamicBatcher


class Recorder:
    def __init__(self):
        self.batches = []

    def __call__(self, requests):
        self.batches.append(list(requests))
        return [f"reply-{r}" for r in requests]


def run(coro):
    return asyncio.run(coro)


def gather_timed(requests, live_streams=0, **batcher_args):
    """Submits all requests at once to a fresh batcher; returns (recorder, replies, seconds)."""

    async def main():
        process = Recorder()
        batcher = DynamicBatcher(process, ThreadPoolExecutor(1), **batcher_args)
        for _ in range(live_streams):
            batcher.stream_opened()
        batcher.start()
        start = time.monotonic()
        replies = await asyncio.gather(*(batcher.submit(r) for r in requests))
        elapsed = time.monotonic() - start
        await batcher.stop()
        return process, replies, elapsed

    return run(main())


def test_flushes_on_size_without_waiting_for_the_timeout():
    process, replies, elapsed = gather_timed(range(4), max_batch_envs=4, timeout_s=10.0)
    assert replies == [f"reply-{i}" for i in range(4)]
    assert process.batches == [[0, 1, 2, 3]]
    assert elapsed < 1.0


def test_flushes_on_timeout_with_a_partial_batch():
    process, replies, elapsed = gather_timed(["a", "b"], max_batch_envs=100, timeout_s=0.05)
    assert replies == ["reply-a", "reply-b"]
    assert process.batches == [["a", "b"]]
    assert 0.04 <= elapsed < 1.0


def test_flushes_once_every_live_stream_waits():
    _, replies, elapsed = gather_timed(range(3), live_streams=3, max_batch_envs=100, timeout_s=10.0)
    assert replies == ["reply-0", "reply-1", "reply-2"]
    assert elapsed < 1.0


def test_every_reply_reaches_its_caller_under_load():
    """Many callers, staggered, with request sizes: each gets its own reply back."""

    async def main():
        process = Recorder()
        batcher = DynamicBatcher(process, ThreadPoolExecutor(1), max_batch_envs=16, timeout_s=0.002,
                                 size_of=lambda r: r[1])

        async def caller(i):
            await asyncio.sleep((i % 7) * 0.001)
            return await batcher.submit((i, 1 + i % 5))

        batcher.start()
        replies = await asyncio.gather(*(caller(i) for i in range(300)))
        await batcher.stop()
        return process, replies

    process, replies = run(main())
    assert replies == [f"reply-{(i, 1 + i % 5)}" for i in range(300)]
    assert sum(len(b) for b in process.batches) == 300
    assert len(process.batches) < 300  # requests were really batched
    # no batch goes over the size limit
    assert max(sum(size for _, size in batch) for batch in process.batches) <= 16


def test_a_failing_batch_fails_its_callers_and_the_batcher_goes_on():
    calls = []

    def process(requests):
        calls.append(list(requests))
        if "bad" in requests:
            raise RuntimeError("inference failed")
        return list(requests)

    async def main():
        batcher = DynamicBatcher(process, ThreadPoolExecutor(1), max_batch_envs=1, timeout_s=0.01)
        batcher.start()
        with pytest.raises(RuntimeError, match="inference failed"):
            await batcher.submit("bad")
        assert isinstance(batcher.error, RuntimeError)
        assert await batcher.submit("good") == "good"
        await batcher.stop()

    run(main())


def test_cancelled_callers_are_left_out_of_the_batch():
    async def main():
        process = Recorder()
        batcher = DynamicBatcher(process, ThreadPoolExecutor(1), max_batch_envs=100, timeout_s=0.05)
        batcher.start()
        gone = asyncio.ensure_future(batcher.submit("gone"))
        await asyncio.sleep(0)
        gone.cancel()
        reply = await batcher.submit("kept")
        await batcher.stop()
        return process, reply

    process, reply = run(main())
    assert reply == "reply-kept"
    assert process.batches == [["kept"]]


@pytest.mark.parametrize("turns", range(6))
def test_stop_returns_when_it_lands_as_a_request_wakes_the_batcher(turns):
    """A stop that comes a few event-loop turns after a request woke the batcher (which
    sat waiting out another request's timeout) still ends it: on Python 3.11 a cancel
    landing there used to be swallowed, and the learner's teardown hung."""

    async def main():
        batcher = DynamicBatcher(Recorder(), ThreadPoolExecutor(1), max_batch_envs=100, timeout_s=10.0)
        batcher.stream_opened()
        batcher.stream_opened()
        batcher.start()
        waiting = asyncio.ensure_future(batcher.submit("waits"))
        for _ in range(3):
            await asyncio.sleep(0)
        waking = asyncio.ensure_future(batcher.submit("wakes"))
        for _ in range(1 + turns):
            await asyncio.sleep(0)
        await asyncio.wait_for(batcher.stop(), 5.0)
        return batcher, waiting, waking

    batcher, waiting, waking = run(main())
    assert batcher._task.done()
    assert waiting.done() and waking.done()  # answered in a last batch, or cancelled: never left hanging


def test_a_quiet_stream_stops_holding_the_others_back():
    """Two open streams, one silent: while it counts as active, the other's request waits
    for the timeout; once it has been quiet for quiet_after_s, the request goes at once."""

    async def one_request(quiet_after_s: float) -> float:
        batcher = DynamicBatcher(Recorder(), ThreadPoolExecutor(1), max_batch_envs=100, timeout_s=0.3,
                                 quiet_after_s=quiet_after_s)
        batcher.start()
        talking, _silent = batcher.stream_opened(), batcher.stream_opened()
        await asyncio.sleep(0.1)
        start = time.monotonic()
        assert await batcher.submit("step", talking) == "reply-step"
        elapsed = time.monotonic() - start
        await batcher.stop()
        return elapsed

    assert run(one_request(quiet_after_s=10.0)) >= 0.28  # the silent one might still submit: wait
    assert run(one_request(quiet_after_s=0.05)) < 0.1  # it has been quiet too long: go
