"""Fault injection on loopback: one learner, one well-behaved real actor, and every kind
of bad peer at once (killed, frozen, silent, squatting, stalled and cut-off streams, a
thousand connect cycles, random bytes, malformed and poisoned messages), then a client that
floods Steps without reading its Actions (refused, it reconnects and floods again).
Throughout, the good actor keeps being served: its steps go on rising while the flood runs,
it never loses the learner, every bad peer is refused with its own status, the learner's
memory stays within 10% of where it was, no real actor died, and every unroll the learner
accepted was trained on or is still queued.

The good actor evaluates (its steps are served, not trained on), so its progress shows the
learner's serving alone. These are behaviours, which hold on a busy machine too; how much of
its rate the good actor keeps under a flood is a figure for the benchmarks (BENCHMARKS.md,
"The flooding client's own CPU, held equal": 0.99 to 1.19 of the windows either side, at ee215a8)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
from conftest import Proc, seedfleet, start_learner
from raw_streams import RawActor, cartpole_steps, rss_mib

from seedfleet.v1 import actor_learner_pb2 as pb

IDLE_S = 3  # the learner's --stream-idle-s and --keepalive-s: silent and frozen peers go within seconds
FLOOD_LINES = 5  # the good actor's progress lines (one a second) it must add while the learner is flooded


def served_steps(actor: Proc) -> list[int]:
    """The actor's cumulative env steps, one progress line a second."""
    return [int(line.split(" env steps")[0].split()[-1]) for line in actor.lines if " env steps, " in line]


def served_while(actor: Proc, lines: int) -> list[int]:
    """The actor's cumulative env steps over its next `lines` progress lines (a line a second)."""
    start = len(served_steps(actor))
    deadline = time.monotonic() + 10 * lines + 30  # a hang, not a slow machine, runs out of this
    while len(served_steps(actor)) < start + lines + 1:
        assert time.monotonic() < deadline and actor.popen.poll() is None, actor.output()[-2000:]
        time.sleep(0.05)
    return served_steps(actor)[start - 1 if start else 0:]


def expect_refused(actor: RawActor, message: pb.ActorMessage) -> grpc.StatusCode:
    try:
        actor.send(message)
        actor.send(message)  # the refusal may come with the reply after
    except grpc.RpcError as error:
        return error.code()
    finally:
        actor.close()
    raise AssertionError("the learner served a bad message")


def malformed_and_poisoned(address: str, codes: list) -> None:
    """Every malformed kind and finite poison, each on a stream of its own, after a good first step."""
    def huge_obs(ids):
        message = cartpole_steps(ids)
        message.steps.observations = np.full((len(ids), 4), 1e19, np.float32).tobytes()
        return message

    def nan_obs(ids):
        message = cartpole_steps(ids)
        message.steps.observations = np.full((len(ids), 4), np.nan, np.float32).tobytes()
        return message

    def huge_reward(ids):
        message = cartpole_steps(ids)
        message.steps.rewards = np.full(len(ids), 3e38, np.float32).tobytes()
        return message

    kinds = [lambda ids: cartpole_steps(ids, drop_byte=True), lambda ids: cartpole_steps([ids[0], 999]),
             lambda ids: cartpole_steps(ids, nan_reward=True), huge_obs, nan_obs, huge_reward,
             lambda ids: pb.ActorMessage(hello=pb.Hello(run_id=5, num_envs=2, protocol_version=1))]
    for i, kind in enumerate(kinds):
        rogue = RawActor(address, num_envs=2, run_id=9000 + i)
        ids = list(rogue.config.env_ids)
        rogue.send(cartpole_steps(ids, first=True))
        codes.append(expect_refused(rogue, kind(ids)))


def random_bytes(port: int) -> None:
    """Garbage straight onto the port, before and instead of an HTTP/2 preface."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port)) as raw:
            raw.sendall(rng.bytes(4096))


def connect_cycles(address: str, cycles: int, done: list) -> None:
    """Hello, config, gone: `cycles` times, each on a fresh channel."""
    for i in range(cycles):
        stream = RawActor(address, num_envs=1, run_id=20_000 + i)
        stream.close()
    done.append(cycles)


def flood(address: str, stop: threading.Event, refusals: list) -> None:
    """Steps every 4 ms on 8 envs for a second, no reply read; then the stream's fate is read
    and a new stream floods 0.2 s later, until `stop`."""
    for i in range(10_000):
        stream = RawActor(address, num_envs=8, run_id=7400 + i)
        ids = list(stream.config.env_ids)
        for t in range(250):
            stream.outbox.put(cartpole_steps(ids, first=t == 0))
            time.sleep(0.004)
        try:
            for _ in range(250):
                next(stream.replies)
            refusals.append(grpc.StatusCode.OK)  # every flooded Steps was answered
        except grpc.RpcError as error:
            refusals.append(error.code())
        stream.close()
        if stop.is_set():
            return
        time.sleep(0.2)  # a client's reconnect delay


@contextlib.contextmanager
def flooding(address: str, refusals: list) -> Iterator[None]:
    """The flooding client runs against `address` for the block, its streams' fates in `refusals`."""
    stop = threading.Event()
    flooder = threading.Thread(target=flood, args=(address, stop, refusals))
    flooder.start()
    time.sleep(1)  # the first flooding stream is refused by now
    try:
        yield
    finally:
        stop.set()
        flooder.join(timeout=30)


def test_the_learner_survives_every_fault_at_once_and_keeps_serving_the_good_actor(procs, tmp_path):
    learner, address = start_learner("--env", "CartPole-v1", "--max-envs", "96", "--max-envs-per-stream", "16",
                                     "--stream-idle-s", str(IDLE_S), "--keepalive-s", str(IDLE_S),
                                     "--logdir", str(tmp_path))
    procs.append(learner)
    warm = Proc(seedfleet("actor", "--learner", address, "--envs", "8"))  # the first training steps compile
    procs.append(warm)
    learner.wait_for(r"learner steps [1-9]", timeout=120)
    warm.stop()
    good = Proc(seedfleet("actor", "--learner", address, "--envs", "8", "--log-interval-s", "1", "--evaluation"))
    procs.append(good)
    good.wait_for("connected to")
    served_while(good, 2)  # warm-up: the first traces
    baseline_rss = rss_mib(learner.popen.pid)

    victims = [Proc(seedfleet("actor", "--learner", address, "--envs", "4")) for _ in range(2)]
    procs.extend(victims)
    for victim in victims:
        victim.wait_for("connected to")
    time.sleep(3)  # their unrolls reach the trainer
    os.kill(victims[0].popen.pid, signal.SIGKILL)  # killed mid-unroll
    os.kill(victims[1].popen.pid, signal.SIGSTOP)  # frozen: a dead peer whose socket stays open

    squatters = [RawActor(address, num_envs=16, run_id=7000 + i) for i in range(4)]  # hold slots, say nothing
    silent = RawActor(address, num_envs=1, run_id=7100)
    stalled = RawActor(address, num_envs=2, run_id=7200)  # sends in lockstep's count, never reads its replies
    for t in range(50):
        message = cartpole_steps(list(stalled.config.env_ids), first=t == 0)
        message.steps.actions_read = t  # claims each reply read: served one at a time, then idle
        stalled.outbox.put(message)
    truncated = RawActor(address, num_envs=2, run_id=7300)  # stops mid-unroll without a goodbye
    truncated.send(cartpole_steps(list(truncated.config.env_ids), first=True))
    truncated.channel.close()

    codes: list = []
    cycles: list = []
    port = int(address.rsplit(":", 1)[1])
    workers = [threading.Thread(target=connect_cycles, args=(address, 1000, cycles)),
               threading.Thread(target=random_bytes, args=(port,)),
               threading.Thread(target=malformed_and_poisoned, args=(address, codes))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
    assert cycles == [1000] and codes == [grpc.StatusCode.INVALID_ARGUMENT] * 7, (cycles, codes)

    time.sleep(2 * IDLE_S + 1)  # the silent, stalled, squatting and frozen peers are closed by now
    for stream in (*squatters, silent, stalled):
        stream.close()
    after_rss = rss_mib(learner.popen.pid)
    refusals: list = []
    with flooding(address, refusals):  # served all the while: its steps rise line after line
        during = served_while(good, FLOOD_LINES)
        deadline = time.monotonic() + 60
        while len(refusals) < 2:  # each flooding stream was refused, and a new one came
            assert time.monotonic() < deadline, refusals
            time.sleep(0.1)
    os.kill(victims[1].popen.pid, signal.SIGKILL)

    closed = {reason: sum(reason in line for line in learner.lines)
              for reason in ("nothing for", "actor connected", "actor gone", "refused", "out of lockstep")}
    print(f"good actor's steps while flooded {during}; learner RSS {baseline_rss:.0f} -> {after_rss:.0f} MiB; "
          f"flooding streams refused: {len(refusals)}; learner log: {closed}")  # shown with pytest -s
    assert all(b > a for a, b in zip(during, during[1:], strict=False)), during  # served at every line
    assert good.popen.poll() is None and "learner localhost" not in good.output()  # never lost the learner
    assert refusals and set(refusals) == {grpc.StatusCode.FAILED_PRECONDITION}, refusals[:5]
    assert after_rss <= 1.1 * baseline_rss, (baseline_rss, after_rss)
    assert learner.stop(signal.SIGTERM, timeout=30) == 0, learner.output()[-3000:]
    summary = json.loads(Path(tmp_path, "summary.json").read_text())
    unrolls = summary["unrolls"]
    assert unrolls["accepted"] == unrolls["taken"] + unrolls["left"] and unrolls["taken"] > 0, unrolls
    assert unrolls["taken"] == 16 * summary["learner_steps_at_exit"], summary  # CartPole's batch: 16 unrolls
    assert summary["stop_reason"] == "signal"
    print(f"unrolls {unrolls}, learner steps at exit {summary['learner_steps_at_exit']}")
