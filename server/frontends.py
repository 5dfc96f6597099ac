"""The learner's front ends: `--frontends N` processes serving the actors' port for it.

One learner process holds one core of gRPC's Python layer, and on Atari frames that, not
the model, is what caps it (BENCHMARKS.md, "The learner's own ceiling"). With front ends,
the learner binds no port itself. Each front end (server/frontend.py) serves the port,
bound by all of them (SO_REUSEPORT: the kernel spreads new connections over them), parses
and decodes its streams' messages on its own core, and links back here (server/link.py).
Here each link is served on the event loop by the learner's LocalBackend: the same env id
allocator, DynamicBatcher and inference thread as without front ends.

A front end that dies takes only its own streams down: their envs are freed here, it is
started again, and its actors reconnect as after any broken stream. Stopping closes the
links; each front end then stops serving and exits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import socket
import subprocess
import sys

from seedfleet.errors import UsageError
from seedfleet.server.backend import LocalBackend, OpenStream, refusal_of
from seedfleet.server.config import LearnerConfig
from seedfleet.server.link import COUNT, OPEN_FIELDS, RANGE, Kind, LinkEnd, StepMemory, message, refused_payload
from seedfleet.stage_clock import StageClock
from seedfleet.threads import cpu_by_thread_name
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import EnvSpec

log = logging.getLogger("seedfleet.learner")
RESTART_DELAY_S = 1.0
READY_TIMEOUT_S = 60.0


class FrontEnd:
    """One front-end process and the learner's end of its link."""

    def __init__(self, index: int, address: str, setup: dict, backend: LocalBackend, spec: EnvSpec,
                 clock: StageClock):
        self.index = index
        self.backend = backend
        self.spec = spec
        self.clock = clock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "seedfleet.server.frontend", "--link-fd", str(theirs.fileno()),
                 "--index", str(index)],
                pass_fds=(theirs.fileno(),))
        self.ready: asyncio.Future = asyncio.get_running_loop().create_future()  # its bound port
        self.gone = asyncio.Event()
        self.stages_cpu_s: dict[str, float] = {}  # its last STATS
        self.threads_cpu_s: dict[str, float] = {}  # its threads' CPU when last read
        self._opening: dict[int, asyncio.Task] = {}
        self._streams: dict[int, tuple[OpenStream, StepMemory]] = {}
        self._steps: dict[int, asyncio.Future] = {}
        self.link = LinkEnd(ours, self._received, self._closed)
        self.link.send(message(Kind.SETUP, 0, json.dumps({**setup, "address": address}).encode()))

    def _received(self, kind: int, key: int, payload: bytes, fds: list[int]) -> None:
        with self.clock.stage("link"):
            if kind == Kind.STEPS:
                self._step(key, COUNT.unpack(payload)[0])
            elif kind == Kind.OPEN:
                self._opening[key] = asyncio.get_running_loop().create_task(
                    self._open(key, *OPEN_FIELDS.unpack(payload), fds[0]))
            elif kind == Kind.CLOSE:
                self._close(key)
            elif kind == Kind.STATS:
                self.stages_cpu_s = json.loads(payload)["stages_cpu_s"]
            elif kind == Kind.READY and not self.ready.done():
                self.ready.set_result(COUNT.unpack(payload)[0])

    async def _open(self, key: int, run_id: int, num_envs: int, evaluation: int, trusted: int, fd: int) -> None:
        try:
            memory = StepMemory.attach(fd, num_envs, self.spec)
            stream = await self.backend.open(run_id, num_envs, bool(evaluation), bool(trusted))
        except Exception as error:  # noqa: BLE001 - the stream is refused with its status
            refused = refusal_of(error)
            self.link.send(message(Kind.REFUSED, key, refused_payload(refused.code, refused.message)))
            return
        finally:
            self._opening.pop(key, None)
        self._streams[key] = (stream, memory)
        self.link.send(message(Kind.OPENED, key, RANGE.pack(stream.lo, stream.hi)))

    def _step(self, key: int, count: int) -> None:
        stream, memory = self._streams.get(key, (None, None))
        if stream is None or not 0 < count <= stream.hi - stream.lo:  # not the front end's protocol: a bug there
            log.error("front end %d: steps for stream %d (%d envs) it has not opened", self.index, key, count)
            return
        future = self.backend.submit(stream, memory.read(count))
        self._steps[key] = future
        future.add_done_callback(functools.partial(self._answer, key))

    def _answer(self, key: int, future: asyncio.Future) -> None:
        with self.clock.stage("link"):
            if self._steps.get(key) is future:
                del self._steps[key]
            if not future.cancelled():
                if (error := future.exception()) is None:
                    actions = future.result().astype(self.spec.actions.dtype, copy=False)
                    self.link.send(message(Kind.ACTIONS, key, actions.tobytes()))
                else:
                    refused = refusal_of(error)
                    self.link.send(message(Kind.REFUSED, key, refused_payload(refused.code, refused.message)))

    def _close(self, key: int) -> None:
        if (opening := self._opening.pop(key, None)) is not None:
            opening.cancel()  # LocalBackend.open frees what it took
        if (step := self._steps.pop(key, None)) is not None:
            step.cancel()  # withdrawn from the batcher unless a batch has it already
        if (opened := self._streams.pop(key, None)) is not None:  # the mapping goes with the last view of it
            self.backend.close(opened[0])

    def _closed(self) -> None:
        for key in [*self._opening, *self._streams]:
            self._close(key)
        if not self.ready.done():
            self.ready.set_exception(UsageError(f"front end {self.index} exited before it listened "
                                                "(its log lines above say why)"))
        self.gone.set()

    def read_threads(self) -> None:
        if self.process.poll() is None:
            self.threads_cpu_s = cpu_by_thread_name(self.process.pid)


class FrontEnds:
    """`count` front ends on `config.address`, started again when one dies, until `stop`."""

    def __init__(self, config: LearnerConfig, env_config: pb.EnvConfig, backend: LocalBackend, count: int,
                 clock: StageClock):
        self.config, self.backend, self.count, self.clock = config, backend, count, clock
        self.spec = EnvSpec.from_proto(env_config)
        self._setup = {"config": dataclasses.asdict(config), "env_config": env_config.SerializeToString().hex()}
        self.address = config.address  # where the front ends bind: the first one's port, once known
        self.port = 0
        self.front_ends: list[FrontEnd] = []
        self._retired = ({}, {})  # stages and threads CPU of front ends that exited
        self._watch: list[asyncio.Task] = []
        self._stopping = False

    def _spawn(self, index: int) -> FrontEnd:
        return FrontEnd(index, self.address, self._setup, self.backend, self.spec, self.clock)

    async def start(self) -> None:
        for index in range(self.count):
            front_end = self._spawn(index)
            self.front_ends.append(front_end)
            async with asyncio.timeout(READY_TIMEOUT_S):
                port = await front_end.ready
            if index == 0:
                self.port = port
                if not self.address.startswith("unix:"):
                    self.address = f"{self.address.rsplit(':', 1)[0]}:{port}"  # port 0 picked one: all take it
        self._watch = [asyncio.get_running_loop().create_task(self._restart_when_gone(i)) for i in range(self.count)]

    async def _restart_when_gone(self, index: int) -> None:
        while not self._stopping:
            front_end = self.front_ends[index]
            await front_end.gone.wait()
            code = await asyncio.get_running_loop().run_in_executor(None, front_end.process.wait)
            if self._stopping:
                return
            self._retire(front_end)
            log.error("front end %d exited (code %s); its streams are closed; starting it again", index, code)
            await asyncio.sleep(RESTART_DELAY_S)
            self.front_ends[index] = self._spawn(index)

    def _retire(self, front_end: FrontEnd) -> None:
        for retired, cpu in zip(self._retired, (front_end.stages_cpu_s, front_end.threads_cpu_s), strict=True):
            for name, seconds in cpu.items():
                retired[name] = retired.get(name, 0.0) + seconds

    def cpu(self) -> tuple[dict[str, float], dict[str, float]]:
        """The front ends' CPU seconds so far, by stage and by thread, named "frontend:<name>"."""
        stages, threads = ({f"frontend:{k}": v for k, v in retired.items()} for retired in self._retired)
        for front_end in self.front_ends:
            front_end.read_threads()
            for out, cpu in ((stages, front_end.stages_cpu_s), (threads, front_end.threads_cpu_s)):
                for name, seconds in cpu.items():
                    out[f"frontend:{name}"] = out.get(f"frontend:{name}", 0.0) + seconds
        return stages, threads

    async def stop(self, reason: str | None) -> None:
        """Tells every front end the stop `reason` (None: the learner failed, no goodbye),
        then closes its link; each ends its streams with it, stops serving and exits
        (killed after 10 s)."""
        self._stopping = True
        for task in self._watch:
            task.cancel()
        for front_end in self.front_ends:
            if reason:
                front_end.link.send(message(Kind.GOODBYE, 0, reason.encode()))
            front_end.link.close(flush_s=1.0)
        loop = asyncio.get_running_loop()
        for front_end in self.front_ends:
            try:
                await asyncio.wait_for(loop.run_in_executor(None, front_end.process.wait), 10.0)
            except TimeoutError:
                log.error("front end %d did not stop within 10 s; killing it", front_end.index)
                front_end.process.kill()
