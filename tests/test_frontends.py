"""`--frontends N`: processes serving the actors' port for one learner (server/frontends.py).

tests/test_learner_service.py runs the whole stream protocol through two front ends too;
here: connections spread over them, one killed takes only its own streams down and is
started again, the learner's CPU report counts them, and a stop leaves none behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from conftest import Proc, seedfleet, start_learner
from raw_streams import CARTPOLE_ACTIONS, RawActor, cartpole_steps, children

from seedfleet.actions import ActionSpec
from seedfleet.envs import StepBatch
from seedfleet.server.backend import StepRequest
from seedfleet.server.link import Kind, LinkEnd, StepMemory, message
from seedfleet.wire import EnvSpec, decode_actions


def front_ends(learner_pid: int) -> list[int]:
    return [pid for pid in children(learner_pid)
            if b"seedfleet.server.frontend" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_front_end_imports_no_tensorflow():
    code = "import sys, server.frontend; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_step_crosses_the_shared_memory_whole_and_in_place():
    spec = EnvSpec("x", (2, 3), np.dtype(np.uint8), ActionSpec.discrete(4))
    written, fd = StepMemory.create(5, spec)
    read = StepMemory.attach(fd, 5, spec)  # as the learner maps what the front end sent
    rng = np.random.default_rng(0)
    step = StepBatch(rng.integers(0, 255, (3, 2, 3), np.uint8), rng.normal(size=3).astype(np.float32),
                     np.array([True, False, False]), np.array([False, True, False]), np.array([False, False, True]),
                     np.array([True, True, False]))
    assert written.write(StepRequest(np.array([7, 8, 9], np.int32), step)) == 3
    got = read.read(3)
    np.testing.assert_array_equal(got.env_ids, [7, 8, 9])
    for field in StepBatch.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(got.step, field), getattr(step, field), err_msg=field)
    written.observations[0, 0, 0] = 255 - step.observations[0, 0, 0]  # one memory, not a copy
    assert got.step.observations[0, 0, 0] == 255 - step.observations[0, 0, 0]


def test_streams_spread_over_front_ends_and_a_killed_one_takes_only_its_own_streams(procs, tmp_path):
    learner, address = start_learner("--env", "CartPole-v1", "--frontends", "2", "--logdir", str(tmp_path))
    procs.append(learner)
    pids = front_ends(learner.popen.pid)
    assert len(pids) == 2
    actors = [RawActor(address, num_envs=2, run_id=1000 + i, own_connection=True) for i in range(16)]
    ranges = [tuple(actor.config.env_ids) for actor in actors]
    assert len(set(np.concatenate(ranges))) == 32  # disjoint env ids, from the one allocator
    for actor, ids in zip(actors, ranges, strict=True):
        assert set(decode_actions(actor.send(cartpole_steps(list(ids), first=True)), 2, CARTPOLE_ACTIONS)) <= {0, 1}
    connected = [line for line in learner.lines if "actor connected" in line]
    by_front_end = {index: sum(f"seedfleet.frontend-{index} " in line for line in connected) for index in (0, 1)}
    assert sum(by_front_end.values()) == 16 and min(by_front_end.values()) > 0, by_front_end  # 2^-15 to fail

    learner_cpu = tmp_path / "learner_cpu.json"
    wait_until(lambda: learner_cpu.exists() and json.loads(learner_cpu.read_text())["env_steps"] >= 32, 10,
               "learner_cpu.json counts the steps")
    cpu = json.loads(learner_cpu.read_text())
    assert cpu["threads_cpu_s"]["frontend:main"] > 0 and "frontend:decode" in cpu["stages_cpu_s"]

    start = len(learner.lines)
    os.kill(pids[0], signal.SIGKILL)
    lost, kept = [], []
    for actor, ids in zip(actors, ranges, strict=True):
        try:
            actor.send(cartpole_steps(list(ids)))
            kept.append((actor, ids))
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            lost.append((actor, ids))
    assert len(lost) == by_front_end[0] and len(kept) == by_front_end[1]
    learner.wait_for(r"front end 0 exited \(code -9\)", timeout=10, start=start)
    wait_until(lambda: len(front_ends(learner.popen.pid)) == 2, 30, "the front end is started again")
    for actor, ids in kept:  # the other front end's streams never noticed
        assert len(decode_actions(actor.send(cartpole_steps(list(ids))), 2, CARTPOLE_ACTIONS)) == 2
    for actor, ids in lost:  # the lost streams' envs were freed: a returning actor gets them back
        actor.close()
        again = RawActor(address, num_envs=2, run_id=1000 + ranges.index(ids), own_connection=True)
        assert tuple(again.config.env_ids) == ids
        again.close()
    for actor, _ in kept:
        actor.close()

    actor = Proc(seedfleet("actor", "--learner", address, "--envs", "4"))
    procs.append(actor)
    actor.wait_for("connected to")
    running = front_ends(learner.popen.pid)
    assert learner.stop(signal.SIGTERM, timeout=30) == 0
    wait_until(lambda: not front_ends_of(running), 10, "front ends exit with the learner")
    actor.wait_for(r"the learner stopped \(signal\); waiting", timeout=10)  # told, through its front end
    assert actor.popen.poll() is None and "UNAVAILABLE" not in actor.output(), actor.output()[-2000:]


def front_ends_of(pids: list[int]) -> list[int]:
    """Those of `pids` still running as front ends."""
    out = []
    for pid in pids:
        try:
            if b"seedfleet.server.frontend" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            continue
    return out


def refused_learner(*args: str) -> str:
    done = subprocess.run(seedfleet("learner", *args), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    return done.stdout + done.stderr


@pytest.mark.parametrize("flags,message", [
    (("--frontends", "-1", "--address", "127.0.0.1:0"), "--frontends -1"),
    (("--frontends", "2", "--address", "unix:/tmp/seedfleet-test-frontends.sock"), "several processes share a TCP"),
])
def test_front_end_counts_that_cannot_work_are_refused(flags, message):
    assert message in refused_learner(*flags)


@pytest.mark.parametrize("ours_unread", [False, True], ids=["all-read", "ours-unread"])
@pytest.mark.parametrize("we_send_first", [False, True], ids=["read-first", "send-first"])
def test_a_link_reads_the_last_words_of_a_peer_that_left(ours_unread, we_send_first):
    """The learner sends GOODBYE and closes its end of the link. The front end must read that
    GOODBYE before it takes the close for a loss, whatever it sees first: the close on a send
    (a step, its stats), or a reset because the learner left its last messages unread."""

    async def scenario() -> list[str]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        events: list[str] = []
        link = LinkEnd(ours, lambda kind, key, payload, fds: events.append(f"{kind}:{payload.decode()}"),
                       lambda: events.append("closed"))
        if ours_unread:
            link.send(message(Kind.STEPS, 1, b"\x01\x00\x00\x00"))
        theirs.send(message(Kind.GOODBYE, 0, b"signal"))
        theirs.close()
        if we_send_first:
            link.send(message(Kind.STATS, 0, b"{}"))  # before the event loop has read anything
        await asyncio.sleep(0.05)
        return events

    assert asyncio.run(scenario()) == [f"{int(Kind.GOODBYE)}:signal", "closed"]
