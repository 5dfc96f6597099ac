"""What a real actor does with the actions a learner sends for continuous (Box) envs: values
come to the env clipped to its bounds, and malformed or non-finite actions never reach an env
(the actor says so in one line, drops the stream and connects again).

A scripted learner on loopback stands in for the real one, so the actions are exactly those
written here."""

from __future__ import annotations

import queue
import re
import threading
from concurrent import futures

import grpc
import numpy as np
import pytest
from conftest import Proc, free_port, seedfleet

from seedfleet.actions import ActionSpec
from seedfleet.envs import describe
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import CHANNEL_OPTIONS, PROTOCOL_VERSION, decode_steps, encode_actions

PENDULUM = ActionSpec.box((1,), -2.0, 2.0)


class ScriptedLearner(pb_grpc.LearnerServicer):
    """Serves Pendulum-v1 to each stream, answering its Steps with `script(session, step)`'s
    actions ([K, 1] float32) or raw bytes; records every observation received."""

    def __init__(self, script):
        self.script = script
        self.sessions = 0
        self.observations: queue.Queue = queue.Queue()
        self.config, _ = describe("Pendulum-v1", 0)

    def Act(self, request_iterator, context):  # noqa: N802 - gRPC's name
        hello = next(request_iterator).hello
        assert hello.protocol_version == PROTOCOL_VERSION
        session = self.sessions
        self.sessions += 1
        config = pb.EnvConfig()
        config.CopyFrom(self.config)
        config.env_ids.extend(range(hello.num_envs))
        yield pb.LearnerMessage(config=config)
        for step, message in enumerate(request_iterator):
            _, batch = decode_steps(message.steps, (0, hello.num_envs), (3,), np.dtype(np.float32))
            self.observations.put((session, step, batch.observations.copy()))
            actions = self.script(session, step, hello.num_envs)
            if isinstance(actions, bytes):
                yield pb.LearnerMessage(actions=pb.Actions(actions=actions))
            else:
                yield encode_actions(actions, PENDULUM)


@pytest.fixture
def scripted():
    servers = []

    def start(script) -> tuple[ScriptedLearner, str]:
        learner = ScriptedLearner(script)
        server = grpc.server(futures.ThreadPoolExecutor(4), options=CHANNEL_OPTIONS)
        pb_grpc.add_LearnerServicer_to_server(learner, server)
        address = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(address)
        server.start()
        servers.append(server)
        return learner, address

    yield start
    for server in servers:
        server.stop(0)


def pendulum_torque(observations: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """The torque Pendulum-v1 applied between two observations [cos, sin, thdot] of one env:
    thdot' = thdot + (3 g / (2 l) sin(th) + 3 / (m l^2) u) dt, with g 10, m = l = 1, dt 0.05,
    before thdot is clipped to [-8, 8] (gymnasium's pendulum.py)."""
    theta = np.arctan2(previous[:, 1], previous[:, 0])
    return ((observations[:, 2] - previous[:, 2]) / 0.05 - 15.0 * np.sin(theta)) / 3.0


def test_box_actions_reach_the_env_clipped_and_bad_ones_drop_the_stream(scripted, procs):
    wanted = np.array([[5.0], [-0.5], [-9.0]], np.float32)  # out of [-2, 2] on both sides, and within

    def script(session: int, step: int, envs: int):
        if session == 0 and step == 3:
            return np.array([[0.0], [np.nan], [0.0]], np.float32)  # non-finite: no env may see it
        if session == 1 and step == 3:
            return b"\x00" * 5  # not 3 float32 values
        return wanted

    learner, address = scripted(script)
    actor = Proc(seedfleet("actor", "--learner", address, "--envs", "3", "--reconnect-max-s", "0.2"))
    procs.append(actor)
    seen = []
    while len({s for s, _, _ in seen}) < 3:  # a third session: the actor connected again twice
        seen.append(learner.observations.get(timeout=120))
    dropped = [line for line in actor.lines if "dropped the stream" in line]
    assert len(dropped) >= 2 and any("finite" in line for line in dropped), actor.output()[-2000:]
    assert any(re.search(r"expected 12 bytes", line) for line in dropped), dropped
    by_session = {}
    for session, step, obs in seen:
        by_session.setdefault(session, {})[step] = obs
    for session in (0, 1):
        steps = by_session[session]
        # each step after the first shows the torque the env applied: the wanted one, clipped
        for step in (1, 2, 3):
            thdot_clipped = np.abs(steps[step][:, 2]) >= 8.0 - 1e-6
            torque = pendulum_torque(steps[step], steps[step - 1])
            np.testing.assert_allclose(torque[~thdot_clipped], np.clip(wanted[:, 0], -2, 2)[~thdot_clipped], atol=1e-3)
        assert 4 not in steps  # after the bad actions the stream carried nothing more
    threading.Event().wait(0.1)
    assert actor.popen.poll() is None  # it is still serving
