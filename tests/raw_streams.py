"""Hand-driven actor streams: what a buggy or hostile actor could send, and the learner's memory."""

from __future__ import annotations

import queue
import re
from pathlib import Path

import grpc
import numpy as np

from seedfleet.actions import ActionSpec
from seedfleet.envs import StepBatch
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import PROTOCOL_VERSION, encode_steps


class RawActor:
    """A hand-driven stream: what a buggy or hostile actor could send."""

    def __init__(self, address: str, num_envs: int, run_id: int = 1234, own_connection: bool = False):
        options = [("grpc.use_local_subchannel_pool", 1)] if own_connection else []  # else shared in-process
        self.channel = grpc.insecure_channel(address, options=options)
        self.outbox: queue.Queue = queue.Queue()
        self.replies = pb_grpc.LearnerStub(self.channel).Act(iter(self.outbox.get, None))
        hello = pb.Hello(run_id=run_id, num_envs=num_envs, protocol_version=PROTOCOL_VERSION)
        self.outbox.put(pb.ActorMessage(hello=hello))
        self.config = next(self.replies).config
        self.actions_read = 0

    def send(self, message: pb.ActorMessage) -> pb.LearnerMessage:
        """Sends one message and reads the reply; a Steps carries the count of replies read (lockstep)."""
        if message.WhichOneof("kind") == "steps":
            message.steps.actions_read = self.actions_read
        self.outbox.put(message)
        reply = next(self.replies)
        self.actions_read += 1
        return reply

    def close(self):
        self.outbox.put(None)
        self.channel.close()


CARTPOLE_ACTIONS = ActionSpec.discrete(2)


def cartpole_steps(env_ids, nan_reward=False, drop_byte=False, first=False):
    n = len(env_ids)
    batch = StepBatch(
        observations=np.zeros((n, 4), np.float32),
        rewards=np.full(n, np.nan if nan_reward else 1.0, np.float32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        first=np.full(n, first),
    )
    message = encode_steps(np.asarray(env_ids), batch)
    if drop_byte:
        message.steps.observations = message.steps.observations[:-1]
    return message


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def tree_rss_mib(pid: int) -> float:
    """The resident memory of a process and its children (a learner's front ends)."""
    return rss_mib(pid) + sum(rss_mib(child) for child in children(pid))


