"""The gRPC face of the learner: handshakes and checked decoding, over a StreamBackend.

Each actor stream gets a contiguous range of env ids from the backend (server/backend.py).
A stream that breaks the protocol is closed with INVALID_ARGUMENT; its envs are dropped
and every other stream goes on being served. A stream is in lockstep: one that sends its
next Steps before it has read the Actions for the last (a client that floods without
reading) is closed with FAILED_PRECONDITION, so its unread Steps never reach the batcher.
A client that misstates its count is still answered one Steps at a time, as every stream.
TensorFlow-free: front-end processes (server/frontend.py) run it too.
"""

from __future__ import annotations

import asyncio
import logging
import math

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from seedfleet.security import is_local_peer
from seedfleet.server.backend import LearnerStopping, StepRequest, StreamBackend, StreamRefused, refusal_of
from seedfleet.stage_clock import StageClock
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import PROTOCOL_VERSION, STOP_METADATA, EnvSpec, WireError, decode_steps, encode_actions

log = logging.getLogger("seedfleet.learner")


async def _parsed(raw_messages, context: grpc.aio.ServicerContext, clock: StageClock):
    """The stream's ActorMessages; bytes that do not parse close it with INVALID_ARGUMENT."""
    async for raw in raw_messages:
        with clock.stage("receive"):
            try:
                message = pb.ActorMessage.FromString(raw)
            except DecodeError as error:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unparseable ActorMessage: {error}")
        yield message


def add_to_server(service: LearnerService, server: grpc.aio.Server) -> None:
    """Registers the Learner service with Act taking raw bytes: the service parses them
    itself, so an unparseable message gets INVALID_ARGUMENT, where gRPC's own
    deserializer would answer UNKNOWN."""
    act = grpc.stream_stream_rpc_method_handler(
        service.Act, request_deserializer=None, response_serializer=pb.LearnerMessage.SerializeToString)
    name = pb.DESCRIPTOR.services_by_name["Learner"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, {"Act": act}),))


class LearnerService(pb_grpc.LearnerServicer):
    def __init__(
        self,
        env_config: pb.EnvConfig,
        backend: StreamBackend,
        max_envs_per_stream: int = 256,
        max_abs_reward: float = math.inf,
        idle_s: float = math.inf,
        observation_bounds: tuple[np.ndarray, np.ndarray] | None = None,
        trust_every_peer: bool = True,
        clock: StageClock | None = None,
    ):
        self.env_config = env_config
        self.spec = EnvSpec.from_proto(env_config)
        self.backend = backend
        self.max_envs_per_stream = max_envs_per_stream
        self.max_abs_reward = max_abs_reward
        self.idle_s = idle_s
        self.observation_bounds = observation_bounds
        self.trust_every_peer = trust_every_peer  # else only loopback peers' episodes count for the target
        self.clock = clock or StageClock()
        self.stopping = ""  # the learner's stop reason, once it stops: each stream ends with it

    def goodbye(self, reason: str) -> None:
        """From now on each stream ends at its next message, with status OK and `reason`."""
        self.stopping = reason

    @staticmethod
    def _end(context: grpc.aio.ServicerContext, reason: str) -> None:
        context.set_trailing_metadata(((STOP_METADATA, reason),))
        context.set_code(grpc.StatusCode.OK)
        context.set_details(f"the learner stopped ({reason})")

    async def Act(self, request_iterator, context: grpc.aio.ServicerContext):
        messages = aiter(_parsed(request_iterator, context, self.clock))
        try:
            first = await anext(messages)
        except StopAsyncIteration:
            return
        if first.WhichOneof("kind") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be hello")
        hello = first.hello
        if hello.protocol_version != PROTOCOL_VERSION:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version {hello.protocol_version}, this learner speaks {PROTOCOL_VERSION}",
            )
        if not 1 <= hello.num_envs <= self.max_envs_per_stream:  # could never be served: no retry will help
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"num_envs {hello.num_envs}: a stream may run 1 to {self.max_envs_per_stream} envs "
                                "(--max-envs-per-stream, --max-envs)")
        trusted = self.trust_every_peer or is_local_peer(context.peer())
        try:
            stream = await self.backend.open(hello.run_id, hello.num_envs, hello.evaluation, trusted)
        except LearnerStopping as stopping:
            self._end(context, stopping.reason)
            return
        except StreamRefused as refused:
            await context.abort(refused.code, refused.message)
        id_range = (stream.lo, stream.hi)
        peer = f"{context.peer()} run {hello.run_id:016x} envs {stream.lo}..{stream.hi - 1}"
        if hello.evaluation:
            peer += " (evaluation)"
        if not trusted:
            peer += " (untrusted: its episodes do not count for --target-return)"
        try:
            config = pb.EnvConfig()
            config.CopyFrom(self.env_config)
            config.env_ids.extend(range(stream.lo, stream.hi))
            log.info("actor connected: %s", peer)
            yield pb.LearnerMessage(config=config)
            replies = 0  # Actions sent on this stream
            while True:
                try:
                    async with asyncio.timeout(self.idle_s if math.isfinite(self.idle_s) else None):
                        message = await anext(messages)
                except StopAsyncIteration:
                    break
                except TimeoutError:  # a stalled or dead peer: free its envs for others
                    log.warning("closing %s: nothing for %g s (--stream-idle-s)", peer, self.idle_s)
                    raise StreamRefused(grpc.StatusCode.DEADLINE_EXCEEDED,
                                        f"nothing received for {self.idle_s:g} s (--stream-idle-s)") from None
                if self.stopping:
                    self._end(context, self.stopping)
                    break
                if message.WhichOneof("kind") != "steps":
                    raise StreamRefused(grpc.StatusCode.INVALID_ARGUMENT, "expected a steps message")
                if message.steps.actions_read != replies:
                    log.warning("closing %s: out of lockstep (%d actions read of %d sent)",
                                peer, message.steps.actions_read, replies)
                    raise StreamRefused(grpc.StatusCode.FAILED_PRECONDITION,
                                        f"a steps message must follow the actions for the last one: it says "
                                        f"{message.steps.actions_read} actions read, the learner has sent {replies}")
                with self.clock.stage("decode"):
                    try:
                        env_ids, step = decode_steps(message.steps, id_range, self.spec.obs_shape, self.spec.obs_dtype,
                                                     self.max_abs_reward, self.observation_bounds)
                    except WireError as error:
                        log.warning("closing %s: %s", peer, error)
                        raise StreamRefused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None
                try:
                    actions = await self.backend.submit(stream, StepRequest(env_ids, step))
                except LearnerStopping as stopping:
                    self._end(context, stopping.reason)
                    break
                except Exception as error:  # noqa: BLE001 - the stream is closed with its status
                    refused = refusal_of(error)
                    if refused.code == grpc.StatusCode.INVALID_ARGUMENT:  # this stream's observations: only it
                        log.warning("closing %s: %s", peer, refused.message)
                    raise refused from None
                with self.clock.stage("reply"):
                    reply = encode_actions(actions, self.spec.actions)
                replies += 1
                yield reply
        except StreamRefused as refused:  # its envs are freed before the peer hears why: a reconnect finds them free
            self.backend.close(stream)
            stream = None
            await context.abort(refused.code, refused.message)
        finally:
            if stream is not None:
                self.backend.close(stream)
            log.info("actor gone: %s", peer)
