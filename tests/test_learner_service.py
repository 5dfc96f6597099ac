"""The learner against real actors and hand-made streams, over loopback gRPC."""

import re
import time

import grpc
import pytest
from conftest import Proc, seedfleet, start_learner
from raw_streams import CARTPOLE_ACTIONS, RawActor, cartpole_steps, tree_rss_mib

from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import PROTOCOL_VERSION, decode_actions


def frames_seen(learner: Proc) -> int:
    found = [int(m.group(1).replace(",", "")) for m in
             (re.search(r"^frames ([\d,]+)", line) for line in learner.lines) if m]
    return found[-1] if found else 0


def wait_frames_above(learner: Proc, value: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if frames_seen(learner) > value:
            return frames_seen(learner)
        time.sleep(0.2)
    raise AssertionError(f"frames stayed at {frames_seen(learner)}:\n{learner.output()[-3000:]}")


@pytest.fixture(scope="module", params=[0, 2], ids=["in-process", "2-frontends"])
def learner(request):
    """One learner for the module, serving actors on its own event loop or through two
    front-end processes (server/frontends.py): each test checks only what happened during it."""
    proc, address = start_learner("--env", "CartPole-v1", "--frontends", str(request.param))
    yield proc, address
    proc.stop()


def test_a_raw_stream_gets_actions_for_its_envs(learner):
    _, address = learner
    actor = RawActor(address, num_envs=3)
    ids = list(actor.config.env_ids)
    assert len(ids) == 3 and actor.config.env_id == "CartPole-v1"
    assert tuple(actor.config.observation.shape) == (4,) and actor.config.num_actions == 2
    for t in range(5):
        actions = decode_actions(actor.send(cartpole_steps(ids, first=(t == 0))), 3, CARTPOLE_ACTIONS)
        assert set(actions) <= {0, 1}
    actor.close()


MALFORMED = [  # (a bad message after a good one, what the refusal says)
    (lambda ids: cartpole_steps(ids, drop_byte=True), "observations: expected"),
    (lambda ids: cartpole_steps([ids[0], 999]), "unknown env id 999"),
    (lambda ids: cartpole_steps(ids, nan_reward=True), "finite"),
    (lambda ids: pb.ActorMessage(hello=pb.Hello(run_id=5, num_envs=2, protocol_version=1)), "expected a steps"),
]


def test_a_malformed_message_closes_only_that_stream(learner, procs):
    """Rogue streams, one after another, each send a good message and then a malformed one: each
    is closed with its reason, and the good actor beside them is served throughout."""
    proc, address = learner
    start = len(proc.lines)
    good = Proc(seedfleet("actor", "--learner", address, "--envs", "4"))
    procs.append(good)
    good.wait_for("connected to")
    served = wait_frames_above(proc, frames_seen(proc))
    for run_id, (bad, detail) in enumerate(MALFORMED, start=99):
        rogue = RawActor(address, num_envs=2, run_id=run_id)
        ids = list(rogue.config.env_ids)
        rogue.send(cartpole_steps(ids, first=True))  # a good message first
        with pytest.raises(grpc.RpcError) as error:
            rogue.send(bad(ids))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, detail
        assert detail in error.value.details()
        rogue.close()
        served = wait_frames_above(proc, served + 1000)  # the good actor is still served
    assert good.popen.poll() is None
    assert "UNAVAILABLE" not in good.output()
    assert len([ln for ln in proc.lines[start:] if "actor connected" in ln]) == 1 + len(MALFORMED)
    good.stop()


def test_handshake_is_checked(learner):
    _, address = learner
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.LearnerStub(channel)
    wrong_version = pb.ActorMessage(hello=pb.Hello(run_id=1, num_envs=2, protocol_version=99))
    with pytest.raises(grpc.RpcError) as error:
        next(stub.Act(iter([wrong_version])))
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    steps_first = cartpole_steps([0])
    with pytest.raises(grpc.RpcError) as error:
        next(stub.Act(iter([steps_first])))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    never_fits = pb.ActorMessage(hello=pb.Hello(run_id=2, num_envs=100_000, protocol_version=PROTOCOL_VERSION))
    with pytest.raises(grpc.RpcError) as error:  # no retry could help: the actor must not retry for ever
        next(stub.Act(iter([never_fits])))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "--max-envs-per-stream" in error.value.details()
    holders = [RawActor(address, num_envs=256, run_id=100 + i) for i in range(4)]  # 1,024: every slot taken
    with pytest.raises(grpc.RpcError) as error:  # fits, but not now
        next(stub.Act(iter([pb.ActorMessage(hello=pb.Hello(run_id=3, num_envs=1, protocol_version=PROTOCOL_VERSION))])))
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    for holder in holders:
        holder.close()
    channel.close()


def test_a_silent_stream_is_closed_and_its_envs_freed(procs):
    learner, address = start_learner("--env", "CartPole-v1", "--stream-idle-s", "1", "--max-envs", "8")
    procs.append(learner)
    silent = RawActor(address, num_envs=8, run_id=1)  # every slot, then nothing
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as error:
        next(silent.replies)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - started < 10
    silent.close()
    again = RawActor(address, num_envs=8, run_id=2)  # the slots are free again
    assert len(again.config.env_ids) == 8
    again.close()


def test_unparseable_bytes_get_invalid_argument(learner):
    _, address = learner
    channel = grpc.insecure_channel(address)
    act = channel.stream_stream("/seedfleet.v1.Learner/Act", request_serializer=None,
                                response_deserializer=pb.LearnerMessage.FromString)
    hello = pb.ActorMessage(hello=pb.Hello(run_id=77, num_envs=1, protocol_version=PROTOCOL_VERSION))
    replies = act(iter([hello.SerializeToString(), b"\xff\xff\xff\xff not a protobuf"]))
    assert next(replies).HasField("config")  # raw bytes that parse are served
    with pytest.raises(grpc.RpcError) as error:
        next(replies)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unparseable ActorMessage" in error.value.details()
    channel.close()


def test_messages_larger_than_the_handshake_allows_are_refused_and_leave_no_memory_behind(learner):
    """CartPole's observations are 16 bytes: the learner takes messages of at most 64 KiB.
    Six refused 8 MiB messages leave the learner's memory where it was."""
    proc, address = learner
    before = tree_rss_mib(proc.popen.pid)
    for i in range(6):
        rogue = RawActor(address, num_envs=2, run_id=500 + i)
        huge = cartpole_steps(list(rogue.config.env_ids))
        huge.steps.observations = bytes(8 << 20)
        with pytest.raises(grpc.RpcError) as error:
            rogue.send(huge)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        rogue.close()
    time.sleep(1.0)
    after = tree_rss_mib(proc.popen.pid)
    assert after - before < 24, (before, after)  # 6 x 8 MiB would be 48


def test_a_stream_that_runs_ahead_of_its_actions_is_refused_and_its_envs_freed(procs):
    learner, address = start_learner("--env", "CartPole-v1", "--max-envs", "8")
    procs.append(learner)
    flooder = RawActor(address, num_envs=8, run_id=1)  # every slot
    ids = list(flooder.config.env_ids)
    for t in range(20):  # Steps after Steps, no reply read: each says 0 actions read
        flooder.outbox.put(cartpole_steps(ids, first=t == 0))
    decode_actions(next(flooder.replies), 8, CARTPOLE_ACTIONS)  # the first is in lockstep and answered
    with pytest.raises(grpc.RpcError) as error:
        next(flooder.replies)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "1 actions read" not in error.value.details() and "has sent 1" in error.value.details()
    flooder.close()
    learner.wait_for("out of lockstep")

    honest = RawActor(address, num_envs=8, run_id=2)  # the slots are free again
    ids = list(honest.config.env_ids)
    for t in range(3):
        honest.send(cartpole_steps(ids, first=t == 0))
    ahead = cartpole_steps(ids)
    ahead.steps.actions_read = 4  # claims a reply it never got: 4 read of 3 sent
    honest.outbox.put(ahead)
    with pytest.raises(grpc.RpcError) as error:
        next(honest.replies)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    honest.close()
