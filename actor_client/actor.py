"""The actor process: K envs, one bidirectional stream to the learner, nothing else.

It knows only the learner's address. The learner tells it what to run and which env
ids are its own; the actor steps all its envs at once and sends one message for all
of them. When the learner goes away the actor retries with exponential backoff, and
on reconnect it resets its envs (the learner's per-env state is gone). SIGTERM or
SIGINT end it cleanly with exit code 0.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np

from seedfleet.actor_client.round_trips import RoundTrips
from seedfleet.envs import VectorEnvs, make_envs_from
from seedfleet.processes import exit_with_parent, run_nicer
from seedfleet.security import channel_credentials, read_token, require_protection, token_metadata
from seedfleet.threads import spawned_threads_named
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import (
    CHANNEL_OPTIONS,
    PROTOCOL_VERSION,
    STOP_METADATA,
    EnvSpec,
    WireError,
    decode_actions,
    encode_steps,
)

log = logging.getLogger("seedfleet.actor")

@dataclass
class ActorConfig:
    learner: str = "localhost:8470"  # the learner's address: host:port or unix:PATH
    envs: int = 32  # envs hosted by this process
    env_threads: int = 0  # C++ threads of the Atari vector env (0: one per core)
    env_groups: int = 1  # Atari: envs step in this many groups, one while another's actions are computed
    reconnect_min_s: float = 0.1  # first retry delay; doubles up to reconnect_max_s
    reconnect_max_s: float = 5.0  # longest retry delay
    log_interval_s: float = 30.0  # seconds between progress lines (0: none)
    evaluation: bool = False  # evaluation envs: greedy, never trained on, reported apart
    tls_ca: str = ""  # PEM CA that signed the learner's certificate: TLS to the learner
    tls_cert: str = ""  # PEM certificate of this actor, for a learner that asks for one (mTLS)
    tls_key: str = ""  # PEM private key of --tls-cert
    tls_server_name: str = ""  # the name the learner's certificate is checked for (default: the address' host)
    token_file: str = ""  # file holding the token the learner expects
    insecure: bool = False  # allow plain TCP with no token to a learner off loopback
    nice: int = 0  # start this much nicer: on its learner's cores, step envs in the gaps training leaves


class ProtocolError(Exception):
    """The learner rejected our messages: retrying would only repeat it."""


class LearnerStopped(Exception):
    """The learner ended the stream on purpose (its stop reason): it may come back."""


WAITING_LOG_S = 60.0  # while the learner is away after a clean stop: one line this often


class Actor:
    def __init__(self, config: ActorConfig):
        self.config = config
        self.run_id = secrets.randbits(64)
        self.envs: VectorEnvs | None = None
        self._env_key: bytes | None = None
        self.steps = 0
        self.sessions = 0  # streams the learner has configured
        self.round_trips = RoundTrips()
        self._credentials = channel_credentials(config.tls_ca, config.tls_cert, config.tls_key)
        token = read_token(config.token_file)
        require_protection(config.learner, self._credentials is not None, token is not None, config.insecure, "actor")
        self._metadata = token_metadata(token)

    @staticmethod
    def _env_key_of(config: pb.EnvConfig) -> bytes:
        """What the envs are made from: everything in the config but this stream's env ids."""
        key = pb.EnvConfig()
        key.CopyFrom(config)
        key.ClearField("env_ids")
        return key.SerializeToString(deterministic=True)

    def _envs_for(self, config: pb.EnvConfig) -> VectorEnvs:
        """Builds the envs on first contact (or if the learner's env changed), else reuses them."""
        key = self._env_key_of(config)
        if self.envs is not None and key == self._env_key:
            return self.envs
        if self.envs is not None:
            self.envs.close()
        with spawned_threads_named("env"):  # ALE's C++ pool
            envs = make_envs_from(config, self.config.envs, self.config.env_threads, self.config.env_groups)
        spec = EnvSpec.from_proto(config)
        want, have = (spec.obs_shape, spec.obs_dtype), (envs.observation_shape, envs.observation_dtype)
        if want != have or not envs.actions.equals(spec.actions):
            raise ProtocolError(
                f"learner expects {want} observations and {spec.actions.describe()}, "
                f"this actor's {config.env_id} gives {have} and {envs.actions.describe()}"
            )
        self.envs, self._env_key = envs, key
        return envs

    async def _session(self, channel: grpc.aio.Channel) -> None:
        call = pb_grpc.LearnerStub(channel).Act(metadata=self._metadata)
        hello = pb.Hello(run_id=self.run_id, num_envs=self.config.envs, protocol_version=PROTOCOL_VERSION,
                         evaluation=self.config.evaluation)
        await call.write(pb.ActorMessage(hello=hello))
        reply = await call.read()
        if reply is grpc.aio.EOF:
            raise await self._ended(call, "before sending its config")
        if reply.WhichOneof("kind") != "config":
            raise ConnectionError("the learner sent no config first")
        config = reply.config
        self.sessions += 1
        fresh = self.envs is None or self._env_key_of(config) != self._env_key
        envs = self._envs_for(config)
        # Seeds go in once, when the envs are made; later resets continue their streams.
        batch = envs.reset([config.seed + e for e in config.env_ids] if fresh else None)
        env_ids = np.asarray(config.env_ids, np.int32)
        action_spec = envs.actions
        log.info("connected to %s: %s, env ids %d..%d", self.config.learner, config.env_id, env_ids[0], env_ids[-1])
        last_log, last_steps = time.monotonic(), self.steps
        actions_read = 0
        while True:
            sent = time.perf_counter()
            ready = env_ids[envs.ready]
            try:
                await call.write(encode_steps(ready, batch, actions_read))
            except asyncio.InvalidStateError:  # the learner ended the stream before this step: the read says how
                pass
            reply = await call.read()  # an error status raises here
            if reply is grpc.aio.EOF:
                raise await self._ended(call)
            actions_read += 1
            self.round_trips.record(time.perf_counter() - sent)
            try:  # checked before any env sees them: Box values finite, then clipped to the bounds
                actions = decode_actions(reply, len(ready), action_spec)
            except WireError as e:
                raise ConnectionError(f"dropped the stream, its actions are malformed: {e}") from e
            batch = envs.step(actions)
            self.steps += len(ready)
            now = time.monotonic()
            if self.config.log_interval_s and now - last_log >= self.config.log_interval_s:
                rate = (self.steps - last_steps) / (now - last_log)
                log.info("%d env steps, %.0f steps/s", self.steps, rate)
                last_log, last_steps = now, self.steps

    @staticmethod
    async def _ended(call: grpc.aio.StreamStreamCall, when: str = "") -> Exception:
        """What a stream the learner closed with status OK means: its clean stop, with the
        reason in the trailing metadata, or else a lost connection."""
        reason = dict(await call.trailing_metadata() or ()).get(STOP_METADATA)
        if reason:
            return LearnerStopped(reason)
        return ConnectionError(" ".join(("the learner ended the stream", when)).strip())

    def _channel(self) -> grpc.aio.Channel:
        if self._credentials is None:
            return grpc.aio.insecure_channel(self.config.learner, options=CHANNEL_OPTIONS)
        options = list(CHANNEL_OPTIONS)
        if self.config.tls_server_name:
            options.append(("grpc.ssl_target_name_override", self.config.tls_server_name))
        return grpc.aio.secure_channel(self.config.learner, self._credentials, options=options)

    async def run(self) -> None:
        """Serves the learner until cancelled; reconnects with backoff when it goes away.
        After a clean stop of the learner its absence is no warning: one line a minute."""
        delay = self.config.reconnect_min_s
        stopped_at = last_waiting_log = None
        sessions_at_stop = -1
        while True:
            started = time.monotonic()
            try:
                with spawned_threads_named("grpc"):  # gRPC's poller, on first use
                    channel = self._channel()
                async with channel:
                    await self._session(channel)
            except LearnerStopped as stopped:
                log.info("the learner stopped (%s); waiting for it to come back", stopped)
                stopped_at = last_waiting_log = time.monotonic()
                sessions_at_stop = self.sessions
            except grpc.aio.AioRpcError as e:
                if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                                grpc.StatusCode.UNAUTHENTICATED):
                    raise ProtocolError(f"the learner rejected this actor: {e.details()}") from e
                if self.sessions != sessions_at_stop or e.code() != grpc.StatusCode.UNAVAILABLE:
                    log.warning("learner %s: %s (%s)", self.config.learner, e.code().name, e.details())
                elif time.monotonic() - last_waiting_log >= WAITING_LOG_S:
                    log.info("learner %s still away, %.0f s after it stopped", self.config.learner,
                             time.monotonic() - stopped_at)
                    last_waiting_log = time.monotonic()
            except ConnectionError as e:
                log.warning("learner %s: %s", self.config.learner, e)
            if time.monotonic() - started > 10 * self.config.reconnect_max_s:
                delay = self.config.reconnect_min_s  # it had been up for a while: start over
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(2 * delay, self.config.reconnect_max_s)

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()


async def _main(config: ActorConfig, on_exit: Callable[[Actor], None] | None) -> int:
    actor = Actor(config)
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await actor.run()
    except asyncio.CancelledError:
        log.info("stopping after %d env steps", actor.steps)
        return 0
    except ProtocolError as e:
        log.error("%s", e)
        return 2
    finally:
        actor.close()
        if on_exit is not None:
            on_exit(actor)
    return 0


def main(config: ActorConfig, on_exit: Callable[[Actor], None] | None = None) -> int:
    """Runs an actor until SIGTERM or SIGINT (0) or the learner's refusal (2); `on_exit`
    sees the actor last (seedfleet bench reads its round trips)."""
    if config.nice:  # before the actor's own threads start, which then inherit it
        run_nicer(config.nice)
    exit_with_parent()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return asyncio.run(_main(config, on_exit))
