"""The link between the learner and one front-end process (server/frontends.py, server/frontend.py).

A Unix SOCK_SEQPACKET socket pair: every message arrives whole, in order, and may carry a
file descriptor. Each message is a 5-byte header (kind u8, stream key u32) and a payload:

    learner -> front end                      front end -> learner
    SETUP    JSON: config, env, address       READY   u32 port, once it listens
    OPENED   u32 lo, u32 hi                   OPEN    u64 run id, u32 envs, u8 eval, u8 trusted + memfd
    ACTIONS  [K] actions in the wire's dtype  STEPS   u32 K: the stream's memory holds K envs' step
    REFUSED  u16 status code + message        CLOSE   the stream is gone
                                              STATS   JSON: the front end's CPU by stage

Observations do not cross the socket: each stream has a `StepMemory` (a memfd both
processes map) that the front end decodes a Steps message into and the learner reads in
place. An actor waits for its actions before it steps again, so a stream has at most one
step in flight and one slot per stream is enough.
"""

from __future__ import annotations

import array
import asyncio
import collections
import enum
import math
import mmap
import os
import socket
import struct
from collections.abc import Callable

import grpc
import numpy as np

from seedfleet.envs import StepBatch
from seedfleet.server.backend import StepRequest
from seedfleet.wire import EnvSpec

HEADER = struct.Struct("<BI")


class Kind(enum.IntEnum):
    SETUP, OPENED, ACTIONS, REFUSED, GOODBYE = 1, 2, 3, 4, 5  # learner -> front end
    READY, OPEN, STEPS, CLOSE, STATS = 11, 12, 13, 14, 15  # front end -> learner


OPEN_FIELDS = struct.Struct("<QIBB")
RANGE = struct.Struct("<II")
COUNT = struct.Struct("<I")
CODE = struct.Struct("<H")
MAX_MESSAGE = 1 << 16  # SETUP's config is the largest, a few KiB
FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)  # OPEN's one fd
_STATUS = {code.value[0]: code for code in grpc.StatusCode}


def message(kind: Kind, key: int = 0, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, key) + payload


def refused_payload(code: grpc.StatusCode, text: str) -> bytes:
    return CODE.pack(code.value[0]) + text.encode()


def read_refused(payload: bytes) -> tuple[grpc.StatusCode, str]:
    return _STATUS.get(CODE.unpack_from(payload)[0], grpc.StatusCode.UNKNOWN), payload[CODE.size :].decode()


class LinkEnd:
    """One end of a link on the running event loop: `on_message(kind, key, payload, fds)` for
    each message received, `on_closed()` once the other end is gone; `send` never blocks
    (what the socket cannot take yet waits in order for it to drain)."""

    def __init__(self, sock: socket.socket, on_message: Callable[[int, int, bytes, list[int]], None],
                 on_closed: Callable[[], None]):
        sock.setblocking(False)
        self.sock = sock
        self._on_message = on_message
        self._on_closed = on_closed
        self._backlog: collections.deque[tuple[bytes, list]] = collections.deque()
        self.closed = False
        self._buffer = bytearray(MAX_MESSAGE)
        self._view = memoryview(self._buffer)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._readable)

    def send(self, data: bytes, fds: tuple[int, ...] = ()) -> None:
        if self.closed:
            return
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        if self._backlog:
            self._backlog.append((data, ancillary))
            return
        try:
            self.sock.sendmsg([data], ancillary)
        except BlockingIOError:
            self._backlog.append((data, ancillary))
            self._loop.add_writer(self.sock.fileno(), self._writable)
        except OSError:
            self._peer_gone()

    def _writable(self) -> None:
        while self._backlog:
            data, ancillary = self._backlog[0]
            try:
                self.sock.sendmsg([data], ancillary)
            except BlockingIOError:
                return
            except OSError:
                self._peer_gone()
                return
            self._backlog.popleft()
        self._loop.remove_writer(self.sock.fileno())

    def _peer_gone(self) -> None:
        """A send failed: the other end has closed. What it sent before closing is still
        queued here, unread (the learner's GOODBYE, then its close): it is delivered first,
        so the close is not taken for a loss."""
        self._readable()
        self.close()

    def _readable(self) -> None:
        reset = False
        while not self.closed:
            try:  # into one buffer, reused: most messages are a few bytes
                size, ancillary, _, _ = self.sock.recvmsg_into([self._buffer], FD_SPACE)
            except BlockingIOError:
                return
            except ConnectionResetError:
                # The other end closed with messages of ours unread. The kernel says so once,
                # ahead of what it sent before closing (still queued): read on.
                if not reset:
                    reset = True
                    continue
                size, ancillary = 0, []
            except OSError:
                size, ancillary = 0, []
            if size < HEADER.size:  # 0: the other end closed
                self.close()
                return
            fds = []
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.extend(array.array("i", data[: len(data) - len(data) % 4]))
            kind, key = HEADER.unpack_from(self._buffer)
            self._on_message(kind, key, bytes(self._view[HEADER.size : size]), fds)

    def close(self, flush_s: float = 0.0) -> None:
        """Closes the link; with `flush_s`, what is still queued goes first (blocking up to that long)."""
        if self.closed:
            return
        self.closed = True
        self._loop.remove_reader(self.sock.fileno())
        if self._backlog:
            self._loop.remove_writer(self.sock.fileno())
            if flush_s:
                self.sock.settimeout(flush_s)
                try:
                    for data, ancillary in self._backlog:
                        self.sock.sendmsg([data], ancillary)
                except OSError:  # the other end is gone or stuck: nothing more to tell it
                    pass
            self._backlog.clear()
        self.sock.close()
        self._on_closed()


class StepMemory:
    """One stream's step, decoded, in memory both processes map (an anonymous memfd):
    observations [N, *shape], then env ids int32 [N], rewards float32 [N] and the flags
    uint8 [4, N] (terminated, truncated, first, life_lost), N the stream's env count."""

    def __init__(self, buffer: mmap.mmap, num_envs: int, spec: EnvSpec):
        n = num_envs
        at = self._ids_offset(n, spec)
        self.buffer = buffer
        self.observations = np.frombuffer(buffer, spec.obs_dtype, n * math.prod(spec.obs_shape)).reshape(
            n, *spec.obs_shape)
        self.env_ids = np.frombuffer(buffer, np.int32, n, at)
        self.rewards = np.frombuffer(buffer, np.float32, n, at + 4 * n)
        self.flags = np.frombuffer(buffer, np.bool_, 4 * n, at + 8 * n).reshape(4, n)
        self._all = self._views(n)

    @staticmethod
    def _ids_offset(num_envs: int, spec: EnvSpec) -> int:
        """Where the env ids start: after the observations, 8-byte aligned."""
        obs_bytes = num_envs * math.prod(spec.obs_shape) * spec.obs_dtype.itemsize
        return -(-obs_bytes // 8) * 8

    @classmethod
    def size(cls, num_envs: int, spec: EnvSpec) -> int:
        return cls._ids_offset(num_envs, spec) + 12 * num_envs  # ids, rewards, 4 flags

    @classmethod
    def create(cls, num_envs: int, spec: EnvSpec) -> tuple[StepMemory, int]:
        """A new memory and its fd, for the front end to send with OPEN (and then close)."""
        fd = os.memfd_create("seedfleet-stream", os.MFD_CLOEXEC)
        try:
            size = cls.size(num_envs, spec)
            os.ftruncate(fd, size)
            return cls(mmap.mmap(fd, size), num_envs, spec), fd
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, fd: int, num_envs: int, spec: EnvSpec) -> StepMemory:
        """The memory a front end sent; the fd is closed (the mapping stays)."""
        try:
            return cls(mmap.mmap(fd, cls.size(num_envs, spec)), num_envs, spec)
        finally:
            os.close(fd)

    def write(self, request: StepRequest) -> int:
        k, step = len(request), request.step
        self.observations[:k] = step.observations
        self.env_ids[:k] = request.env_ids
        self.rewards[:k] = step.rewards
        for row, flag in enumerate((step.terminated, step.truncated, step.first, step.life_lost)):
            self.flags[row, :k] = flag
        return k

    def read(self, k: int) -> StepRequest:
        """The first `k` envs' step as views: valid until the stream's next step is written,
        which only follows this one's actions. All the stream's envs, as actors send them,
        come as the same views each time."""
        if k == len(self.env_ids):
            return self._all
        return self._views(k)

    def _views(self, k: int) -> StepRequest:
        flags = self.flags[:, :k]
        return StepRequest(self.env_ids[:k], StepBatch(self.observations[:k], self.rewards[:k], flags[0], flags[1],
                                                        flags[2], flags[3]))
