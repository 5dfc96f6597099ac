"""A front-end process: one core of gRPC and decoding for the learner (`--frontends N`).

    python -m seedfleet.server.frontend --link-fd FD      (started by the learner, server/frontends.py)

It serves the actors' port (server/actor_port.py: the same LearnerService, TLS, token
check, keepalive and health service) on the learner's port, beside the other front ends,
and hands every stream's handshake and steps to the learner over its link
(server/link.py): `RemoteBackend` is the StreamBackend that does so. Steps are decoded
here, into memory the learner reads in place. No TensorFlow, no model.

The front end lives as long as its link: when the learner closes it or dies, the front end
stops serving (health NOT_SERVING, then the server stops) and exits. It ignores SIGINT and
SIGTERM, which reach a whole process group: the learner stops it in its own order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys

import grpc
import numpy as np

from seedfleet.server.actor_port import ActorPort
from seedfleet.server.backend import LearnerStopping, OpenStream, StepRequest, StreamRefused
from seedfleet.server.config import LearnerConfig
from seedfleet.server.link import COUNT, OPEN_FIELDS, RANGE, Kind, LinkEnd, StepMemory, message, read_refused
from seedfleet.stage_clock import StageClock
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import EnvSpec

log = logging.getLogger("seedfleet.frontend")
STATS_INTERVAL_S = 1.0


class RemoteBackend:
    """The StreamBackend of a front end: each call goes to the learner over the link."""

    def __init__(self, sock: socket.socket, clock: StageClock):
        self.clock = clock
        self.spec: EnvSpec | None = None  # from SETUP
        self.setup: asyncio.Future = asyncio.get_running_loop().create_future()
        self.gone = asyncio.Event()  # the link closed: the learner stopped us or died
        self.stop_reason = ""  # the learner's, when it stopped us
        self._calls: dict[int, asyncio.Future] = {}  # stream key -> the learner's answer, awaited
        self._memory: dict[int, StepMemory] = {}
        self._next_key = 1
        self.link = LinkEnd(sock, self._received, self._link_closed)

    def _received(self, kind: int, key: int, payload: bytes, fds: list[int]) -> None:
        for fd in fds:  # the learner sends none
            os.close(fd)
        if kind == Kind.SETUP:
            if not self.setup.done():
                self.setup.set_result(json.loads(payload))
            return
        if kind == Kind.GOODBYE:
            self.stop_reason = payload.decode()
            return
        future = self._calls.pop(key, None)
        if future is None or future.done():  # its stream was cancelled meanwhile
            return
        if kind == Kind.OPENED:
            future.set_result(RANGE.unpack(payload))
        elif kind == Kind.ACTIONS:
            future.set_result(np.frombuffer(payload, self.spec.actions.dtype).reshape(-1, *self.spec.actions.row_shape))
        elif kind == Kind.REFUSED:
            future.set_exception(StreamRefused(*read_refused(payload)))

    def _link_closed(self) -> None:
        gone = self._gone()
        for future in self._calls.values():
            if not future.done():
                future.set_exception(gone)
        self._calls.clear()
        if not self.setup.done():
            self.setup.set_exception(ConnectionError("the learner closed the link before its setup"))
        self.gone.set()

    def _gone(self) -> Exception:
        """What a call gets once the link is closed: the learner's stop, or its loss."""
        if self.stop_reason:
            return LearnerStopping(self.stop_reason)
        return StreamRefused(grpc.StatusCode.UNAVAILABLE, "the learner went away")

    def _call(self, key: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if self.link.closed:
            future.set_exception(self._gone())
        else:
            self._calls[key] = future
        return future

    async def open(self, run_id: int, num_envs: int, evaluation: bool, trusted: bool) -> OpenStream:
        key, self._next_key = self._next_key, self._next_key + 1
        memory, fd = StepMemory.create(num_envs, self.spec)
        answer = self._call(key)
        try:
            self.link.send(message(Kind.OPEN, key, OPEN_FIELDS.pack(run_id, num_envs, evaluation, trusted)), (fd,))
        finally:
            os.close(fd)
        try:
            lo, hi = await answer
        except BaseException:
            self._calls.pop(key, None)
            self.link.send(message(Kind.CLOSE, key))  # whatever the learner opened meanwhile is freed
            raise
        self._memory[key] = memory
        return OpenStream(key, lo, hi)

    def submit(self, stream: OpenStream, request: StepRequest) -> asyncio.Future:
        with self.clock.stage("link"):
            count = self._memory[stream.token].write(request)
            answer = self._call(stream.token)
            self.link.send(message(Kind.STEPS, stream.token, COUNT.pack(count)))
        return answer

    def close(self, stream: OpenStream) -> None:
        self._memory.pop(stream.token, None)
        call = self._calls.pop(stream.token, None)
        if call is not None:
            call.cancel()
        self.link.send(message(Kind.CLOSE, stream.token))

    def send_stats(self) -> None:
        self.link.send(message(Kind.STATS, 0, json.dumps({"stages_cpu_s": self.clock.totals()}).encode()))


async def run(sock: socket.socket) -> None:
    clock = StageClock()
    backend = RemoteBackend(sock, clock)
    setup = await backend.setup
    config = LearnerConfig(**setup["config"])
    env_config = pb.EnvConfig.FromString(bytes.fromhex(setup["env_config"]))
    backend.spec = EnvSpec.from_proto(env_config)
    port = ActorPort.bind(config, backend.spec, setup["address"], shared=True)
    await port.serve(config, env_config, backend, clock)
    await port.start()
    backend.link.send(message(Kind.READY, 0, COUNT.pack(port.port)))
    while not backend.gone.is_set():
        try:
            async with asyncio.timeout(STATS_INTERVAL_S):
                await backend.gone.wait()
        except TimeoutError:
            backend.send_stats()
    await port.stop(backend.stop_reason or None)  # no goodbye: the learner failed or died


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seedfleet.server.frontend", description=__doc__.split("\n\n")[0])
    parser.add_argument("--link-fd", type=int, required=True, help="the learner's end of the link (inherited)")
    parser.add_argument("--index", type=int, default=0, help="this front end's number, for its log lines")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s seedfleet.frontend-{args.index} %(message)s")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    asyncio.run(run(socket.socket(fileno=args.link_fd)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
