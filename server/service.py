"""The gRPC face of the learner: handshakes, env id ranges, checked decoding.

Each actor stream gets a contiguous range of env ids. A stream that breaks the
protocol is closed with INVALID_ARGUMENT; its envs are dropped and every other
stream goes on being served.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from concurrent.futures import Executor

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from seedfleet.security import is_local_peer
from seedfleet.stage_clock import StageClock
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import PROTOCOL_VERSION, EnvSpec, WireError, decode_steps, encode_actions
from server.batcher import DynamicBatcher
from server.inference import InferenceEngine, PolicyOutputError, StepRequest

log = logging.getLogger("seedfleet.learner")


class SlotAllocator:
    """Hands out contiguous env id ranges; a returning run id gets its old range back if free.

    The ranges of past run ids are remembered for the newest `remembered` of them only."""

    def __init__(self, capacity: int, remembered: int = 4096):
        self.used = np.zeros(capacity, bool)
        self.previous: OrderedDict[int, tuple[int, int]] = OrderedDict()
        self.remembered = remembered

    def allocate(self, run_id: int, n: int) -> tuple[int, int] | None:
        lo_hi = self.previous.get(run_id)
        if lo_hi is None or lo_hi[1] - lo_hi[0] != n or self.used[lo_hi[0] : lo_hi[1]].any():
            counts = np.concatenate([[0], np.cumsum(self.used)])
            window = counts[n:] - counts[:-n] if n <= len(self.used) else np.array([1])
            free = np.flatnonzero(window == 0)
            if len(free) == 0:
                return None
            lo_hi = (int(free[0]), int(free[0]) + n)
        self.used[lo_hi[0] : lo_hi[1]] = True
        self.previous[run_id] = lo_hi
        self.previous.move_to_end(run_id)
        while len(self.previous) > self.remembered:
            self.previous.popitem(last=False)
        return lo_hi

    def release(self, lo: int, hi: int) -> None:
        self.used[lo:hi] = False


async def _parsed(raw_messages, context: grpc.aio.ServicerContext, clock: StageClock):
    """The stream's ActorMessages; bytes that do not parse close it with INVALID_ARGUMENT."""
    async for raw in raw_messages:
        started = clock.start()
        try:
            message = pb.ActorMessage.FromString(raw)
        except DecodeError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unparseable ActorMessage: {error}")
        clock.lap("receive", started)
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
        engine: InferenceEngine,
        batcher: DynamicBatcher,
        inference_executor: Executor,
        capacity: int,
        max_abs_reward: float = math.inf,
        max_envs_per_stream: int = 256,
        idle_s: float = math.inf,
        observation_bounds: tuple[np.ndarray, np.ndarray] | None = None,
        trust_every_peer: bool = True,
        clock: StageClock | None = None,
    ):
        self.env_config = env_config
        self.spec = EnvSpec.from_proto(env_config)
        self.engine = engine
        self.batcher = batcher
        self.executor = inference_executor
        self.slots = SlotAllocator(capacity)
        self.max_abs_reward = max_abs_reward
        self.max_envs_per_stream = min(max_envs_per_stream, capacity)
        self.idle_s = idle_s
        self.observation_bounds = observation_bounds
        self.trust_every_peer = trust_every_peer  # else only loopback peers' episodes count for the target
        self.clock = clock or StageClock()

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
        id_range = self.slots.allocate(hello.run_id, hello.num_envs)
        if id_range is None:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"no room for {hello.num_envs} more envs (--max-envs {len(self.slots.used)})",
            )
        lo, hi = id_range
        peer = f"{context.peer()} run {hello.run_id:016x} envs {lo}..{hi - 1}"
        if hello.evaluation:
            peer += " (evaluation)"
        trusted = self.trust_every_peer or is_local_peer(context.peer())
        if not trusted:
            peer += " (untrusted: its episodes do not count for --target-return)"
        stream: int | None = None  # the batcher's token, once this stream may submit
        try:
            # The inference thread owns the per-env state: reset it there, in order.
            await asyncio.get_running_loop().run_in_executor(
                self.executor, self.engine.reset, lo, hi, hello.evaluation, trusted
            )
            config = pb.EnvConfig()
            config.CopyFrom(self.env_config)
            config.env_ids.extend(range(lo, hi))
            log.info("actor connected: %s", peer)
            stream = self.batcher.stream_opened()
            yield pb.LearnerMessage(config=config)
            while True:
                try:
                    async with asyncio.timeout(self.idle_s if math.isfinite(self.idle_s) else None):
                        message = await anext(messages)
                except StopAsyncIteration:
                    break
                except TimeoutError:  # a stalled or dead peer: free its envs for others
                    log.warning("closing %s: nothing for %g s (--stream-idle-s)", peer, self.idle_s)
                    await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                        f"nothing received for {self.idle_s:g} s (--stream-idle-s)")
                if message.WhichOneof("kind") != "steps":
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected a steps message")
                started = self.clock.start()
                try:
                    env_ids, step = decode_steps(message.steps, id_range, self.spec.obs_shape, self.spec.obs_dtype,
                                                 self.max_abs_reward, self.observation_bounds)
                except WireError as error:
                    log.warning("closing %s: %s", peer, error)
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
                self.clock.lap("decode", started)
                try:
                    actions = await self.batcher.submit(StepRequest(env_ids, step), stream)
                except PolicyOutputError as error:  # this stream's observations: only it is closed
                    log.warning("closing %s: %s", peer, error)
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"observations: {error}")
                except Exception as error:  # noqa: BLE001 - the learner stops on it; tell the actor
                    await context.abort(grpc.StatusCode.INTERNAL, f"inference failed: {error}")
                started = self.clock.start()
                reply = encode_actions(actions)
                self.clock.lap("reply", started)
                yield reply
        finally:
            if stream is not None:
                self.batcher.stream_closed(stream)
            self.slots.release(lo, hi)
            log.info("actor gone: %s", peer)
