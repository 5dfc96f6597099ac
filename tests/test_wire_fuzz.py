"""A bounded fuzz of the learner's message decoder: whatever bytes arrive, `decode_steps`
either refuses them with WireError or returns arrays a learner can trust."""

import numpy as np
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedfleet.envs import StepBatch
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import WireError, decode_steps, encode_steps

SHAPE, DTYPE, ID_RANGE, MAX_REWARD = (3,), np.dtype(np.float32), (4, 12), 1e6
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(steps: pb.Steps) -> None:
    try:
        env_ids, batch = decode_steps(steps, ID_RANGE, SHAPE, DTYPE, MAX_REWARD)
    except WireError:
        return
    n = len(env_ids)
    assert n >= 1 and env_ids.min() >= ID_RANGE[0] and env_ids.max() < ID_RANGE[1]
    assert len(np.unique(env_ids)) == n
    assert batch.observations.shape == (n, *SHAPE) and np.isfinite(batch.observations).all()
    assert batch.rewards.shape == (n,) and np.isfinite(batch.rewards).all()
    assert np.abs(batch.rewards).max() <= MAX_REWARD
    for flags in (batch.terminated, batch.truncated, batch.first):
        assert flags.shape == (n,) and flags.dtype == bool


@FUZZ
@given(st.binary(max_size=64), st.binary(max_size=128), st.binary(max_size=32), st.binary(max_size=16),
       st.binary(max_size=16), st.binary(max_size=16), st.binary(max_size=16))
def test_any_field_bytes_are_refused_or_decoded_soundly(env_ids, observations, rewards, terminated, truncated, first,
                                                        life_lost):
    check(pb.Steps(env_ids=env_ids, observations=observations, rewards=rewards, terminated=terminated,
                   truncated=truncated, first=first, life_lost=life_lost))


@FUZZ
@given(st.lists(st.integers(0, 20), min_size=1, max_size=8),
       st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=3 * 8, max_size=3 * 8),
       st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=8, max_size=8),
       st.lists(st.integers(0, 2), min_size=3 * 8, max_size=3 * 8))
def test_well_formed_messages_with_hostile_values(ids, obs, rewards, flags):
    n = len(ids)
    batch = StepBatch(np.array(obs[: 3 * n], np.float32).reshape(n, 3), np.array(rewards[:n], np.float32),
                      *(np.array(flags[i * n:(i + 1) * n], np.uint8).view(bool) for i in range(3)))
    check(encode_steps(np.array(ids, np.int32), batch).steps)


@FUZZ
@given(st.binary(max_size=256))
def test_arbitrary_bytes_either_fail_to_parse_or_decode_soundly(raw):
    try:
        message = pb.ActorMessage.FromString(raw)
    except DecodeError:
        return
    if message.WhichOneof("kind") == "steps":
        check(message.steps)
