"""The actors' port: the gRPC server they stream to, with TLS, the token check, keepalive,
the health service and LearnerService over a StreamBackend (server/backend.py).

The learner runs one on its own event loop; with `--frontends N`, each of N front-end
processes runs one on the same port instead (server/frontend.py), and the kernel spreads
the actors' connections over them (SO_REUSEPORT, which gRPC sets on Linux).
TensorFlow-free.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import math
import sys
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

import grpc
import numpy as np

from seedfleet.envs import Bounds, observation_bounds
from seedfleet.errors import UsageError
from seedfleet.security import read_token, require_protection, server_credentials
from seedfleet.server.auth import TokenCheck
from seedfleet.server.backend import StreamBackend
from seedfleet.server.config import LearnerConfig
from seedfleet.server.health import LearnerHealth, add_health
from seedfleet.server.service import LearnerService, add_to_server
from seedfleet.stage_clock import StageClock
from seedfleet.threads import spawned_threads_named
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import MAX_MESSAGE_BYTES, EnvSpec

log = logging.getLogger("seedfleet.learner")


def max_message_bytes(spec: EnvSpec, max_envs_per_stream: int) -> int:
    """The largest message the learner takes: a Steps message for the most envs a stream may
    run, twice over, and at least 64 KiB. Anything larger is refused by gRPC itself
    (RESOURCE_EXHAUSTED) before it is read into memory."""
    per_env = int(np.prod(spec.obs_shape)) * spec.obs_dtype.itemsize + 4 + 4 + 4  # observation, id, reward, flags
    return max(64 * 1024, 2 * per_env * max_envs_per_stream)


def keepalive_options(every_s: float) -> list[tuple[str, int]]:
    """The server pings each connection every `every_s` and drops one that does not answer
    within as long again: a frozen or vanished peer's streams end and their envs are freed."""
    ms = int(every_s * 1000)
    return [("grpc.keepalive_time_ms", ms), ("grpc.keepalive_timeout_ms", ms),
            ("grpc.keepalive_permit_without_calls", 1)]


TARGET_FROM = ("trusted", "any")


def observation_limits(config: LearnerConfig, spec: EnvSpec) -> Bounds | None:
    """The (low, high) every observation a stream sends must keep: the space's bounds (with
    --check-observation-bounds), and for float observations at most --max-abs-observation in
    magnitude, so that no actor's wild values reach the observation statistics every env is
    normalised with (server/normalization.py). None: nothing beyond the dtype's own range."""
    bounds = observation_bounds(config.env) if config.check_observation_bounds else None
    cap = config.max_abs_observation
    if spec.obs_dtype.kind != "f" or not math.isfinite(cap):
        return bounds
    low, high = bounds if bounds is not None else (np.full(spec.obs_shape, -np.inf), np.full(spec.obs_shape, np.inf))
    return np.maximum(low, -cap), np.minimum(high, cap)


def port_security(config: LearnerConfig) -> tuple[str | None, grpc.ServerCredentials | None]:
    """(token, TLS credentials) of the actors' port as configured; refuses plaintext with no
    token off loopback unless `--insecure` (seedfleet/security.py), and a bad --target-from."""
    if config.target_from not in TARGET_FROM:
        raise UsageError(f"--target-from {config.target_from!r}: choose from {', '.join(TARGET_FROM)}")
    token = read_token(config.token_file)
    credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
    require_protection(config.address, credentials is not None, token is not None, config.insecure, "learner")
    return token, credentials


def secure_server(config: LearnerConfig, options: list[tuple[str, int]],
                  address: str = "") -> tuple[grpc.aio.Server, int, bool]:
    """The gRPC server on `address` (default `config.address`) with TLS and the token check as
    configured: (server, bound port, whether every peer it admits is credentialed by a token or
    a client certificate)."""
    token, credentials = port_security(config)
    with spawned_threads_named("grpc"):  # gRPC's poller
        server = grpc.aio.server(options=options, interceptors=[TokenCheck(token)] if token else None)
    if credentials is None:
        port = server.add_insecure_port(address or config.address)
    else:
        port = server.add_secure_port(address or config.address, credentials)
    return server, port, token is not None or bool(config.tls_client_ca)


async def bounded(step: str, awaitable: Awaitable, timeout_s: float) -> None:
    """Awaits one teardown step for at most `timeout_s`, so a stop never hangs on one part. A
    step that overruns is logged with every task's and thread's stack, cancelled without
    waiting (unlike wait_for, which waits for the cancel to take), and the teardown goes on."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if task in done:
        task.result()  # a failing step fails the teardown as before
        return
    log.error("teardown: %s took over %.0f s; going on without it. Stacks follow.", step, timeout_s)
    for other in asyncio.all_tasks():
        other.print_stack(file=sys.stderr)
    faulthandler.dump_traceback(all_threads=True)
    task.cancel()


class ActorsServer(Protocol):
    """What serves the actors' streams for a learner: its own `ActorPort`, or the front-end
    processes (server/frontends.py, `FrontEnds`) that each run one."""

    port: int  # where actors reach it, once started

    async def start(self) -> None: ...

    async def stop(self, reason: str | None) -> None: ...

    def cpu(self) -> tuple[dict[str, float], dict[str, float]]:
        """(stages, threads) CPU seconds spent serving in processes other than the learner's."""
        ...


@dataclass
class ActorPort:
    """The actors' gRPC server on one process, its health service and LearnerService."""

    server: grpc.aio.Server
    port: int  # as bound (the address's port 0 picks one)
    credentialed: bool  # every peer it admits holds a token or a client certificate
    health: LearnerHealth | None = None
    service: LearnerService | None = None

    @classmethod
    def bind(cls, config: LearnerConfig, spec: EnvSpec, address: str = "", shared: bool = False) -> ActorPort:
        """The server bound on `address` (default config.address), serving nothing yet: a
        refused or taken port fails here, before anything slower is built. Only a `shared`
        port (the front ends') may be bound by other processes too: a second learner on a
        port in use is refused."""
        server, port, credentialed = secure_server(config, [
            ("grpc.so_reuseport", int(shared)),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", max_message_bytes(spec, config.max_envs_per_stream)),
            *keepalive_options(config.keepalive_s),
        ], address)
        return cls(server, port, credentialed)

    async def serve(self, config: LearnerConfig, env_config: pb.EnvConfig, backend: StreamBackend,
                    clock: StageClock) -> None:
        """Adds LearnerService over `backend` and the health service (NOT_SERVING until start)."""
        bounds = observation_limits(config, EnvSpec.from_proto(env_config))
        self.service = LearnerService(env_config, backend, min(config.max_envs_per_stream, config.max_envs),
                                      config.max_abs_reward, config.stream_idle_s, bounds,
                                      trust_every_peer=self.credentialed or config.target_from == "any",
                                      clock=clock)
        add_to_server(self.service, self.server)
        self.health = await add_health(self.server)  # grpc.health.v1: SERVING from start to stop

    async def start(self) -> None:
        await self.server.start()
        await self.health.serving()

    def cpu(self) -> tuple[dict[str, float], dict[str, float]]:
        return {}, {}  # served in the learner's own process: its clock and threads count it

    async def stop(self, reason: str | None) -> None:
        """NOT_SERVING, then each stream ends at its next message with `reason` (status OK),
        within a second's grace; a stream still open after it is cancelled. Without a
        reason (the learner failed) streams are cancelled, not told goodbye."""
        await bounded("health NOT_SERVING", self.health.stopping(), 5.0)
        if reason:
            self.service.goodbye(reason)
        await bounded("gRPC server stop", self.server.stop(grace=1.0), 5.0)
