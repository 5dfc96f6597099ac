"""The learner's teardown steps are bounded: one that hangs is logged and passed over."""

import asyncio
import logging
import time

import pytest

from seedfleet.server.assembly import bounded


def test_a_hung_teardown_step_is_logged_and_passed_over(caplog):
    async def main():
        hung = asyncio.Event()
        start = time.monotonic()
        await bounded("the hung step", hung.wait(), 0.2)
        return time.monotonic() - start

    with caplog.at_level(logging.ERROR, logger="seedfleet.learner"):
        elapsed = asyncio.run(main())
    assert 0.2 <= elapsed < 2.0
    assert "teardown: the hung step took over" in caplog.text


def test_a_finished_step_passes_its_error_on():
    async def fails():
        raise OSError("disk full")

    async def quick():
        return "done"

    async def main():
        await bounded("quick", quick(), 1.0)
        await bounded("failing", fails(), 1.0)

    with pytest.raises(OSError, match="disk full"):
        asyncio.run(main())
