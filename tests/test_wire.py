"""Checked decoding of actor messages: every malformed field is named in the error."""

import numpy as np
import pytest

from seedfleet.actions import ActionSpec, action_spec_of
from seedfleet.envs import StepBatch
from seedfleet.errors import UsageError
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import WireError, decode_actions, decode_steps, encode_actions, encode_steps

SHAPE = (2, 3)


def good_batch(n=3):
    return StepBatch(
        observations=np.arange(n * 6, dtype=np.uint8).reshape(n, *SHAPE),
        rewards=np.linspace(-1, 1, n).astype(np.float32),
        terminated=np.array([True] + [False] * (n - 1)),
        truncated=np.zeros(n, bool),
        first=np.array([False] * (n - 1) + [True]),
    )


def decode(message, id_range=(10, 13)):
    return decode_steps(message.steps, id_range, SHAPE, np.dtype(np.uint8))


def test_round_trip():
    batch = good_batch()
    ids, out = decode(encode_steps(np.array([12, 10, 11]), batch))
    np.testing.assert_array_equal(ids, [12, 10, 11])
    for field in ("observations", "rewards", "terminated", "truncated", "first"):
        np.testing.assert_array_equal(getattr(out, field), getattr(batch, field))
    five = ActionSpec.discrete(5)
    np.testing.assert_array_equal(decode_actions(encode_actions(np.array([4, 0, 1]), five), 3, five), [4, 0, 1])
    assert not out.life_lost.any() and encode_steps(np.array([12, 10, 11]), batch).steps.life_lost == b""


def test_life_losses_travel_when_there_are_any():
    batch = good_batch()
    batch.life_lost = np.array([False, True, False])
    _, out = decode(encode_steps(np.array([12, 10, 11]), batch))
    np.testing.assert_array_equal(out.life_lost, [False, True, False])


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda m: setattr(m.steps, "observations", m.steps.observations[:-1]), "observations: expected 18 bytes"),
        (lambda m: setattr(m.steps, "env_ids", np.array([10, 11, 99], "<i4").tobytes()), "unknown env id 99"),
        (lambda m: setattr(m.steps, "env_ids", np.array([10, 10, 11], "<i4").tobytes()), "appears twice"),
        (lambda m: setattr(m.steps, "env_ids", b"\x00\x01"), "whole number"),
        (lambda m: setattr(m.steps, "rewards", np.array([0, np.nan, 1], "<f4").tobytes()), "finite"),
        (lambda m: setattr(m.steps, "rewards", b"\x00" * 8), "rewards: expected 12 bytes"),
        (lambda m: setattr(m.steps, "first", b"\x00\x02\x00"), "0 or 1"),
        (lambda m: setattr(m.steps, "terminated", b"\x00"), "terminated: expected 3 bytes"),
        (lambda m: setattr(m.steps, "env_ids", b""), "at least one env"),
        (lambda m: setattr(m.steps, "life_lost", b"\x00\x01"), "life_lost: expected 3 bytes"),
    ],
)
def test_malformed_steps_are_rejected(mutate, message):
    msg = encode_steps(np.array([10, 11, 12]), good_batch())
    mutate(msg)
    with pytest.raises(WireError, match=message):
        decode(msg)


def test_float_observations_must_be_finite():
    batch = StepBatch(np.array([[np.inf, 0.0]], np.float32), np.zeros(1, np.float32),
                      np.zeros(1, bool), np.zeros(1, bool), np.zeros(1, bool))
    msg = encode_steps(np.array([0]), batch)
    with pytest.raises(WireError, match="observations must be finite"):
        decode_steps(msg.steps, (0, 1), (2,), np.dtype(np.float32))


def test_rewards_beyond_the_limit_are_refused():
    batch = StepBatch(np.zeros((2, 2), np.float32), np.array([1.0, -3e38], np.float32),
                      np.zeros(2, bool), np.zeros(2, bool), np.zeros(2, bool))
    msg = encode_steps(np.array([0, 1]), batch)
    with pytest.raises(WireError, match="exceeds --max-abs-reward 1e\\+06"):
        decode_steps(msg.steps, (0, 2), (2,), np.dtype(np.float32), max_abs_reward=1e6)
    _, ok = decode_steps(msg.steps, (0, 2), (2,), np.dtype(np.float32))  # no limit given: any finite reward
    assert ok.rewards[1] == np.float32(-3e38)


def test_observations_outside_the_space_are_refused():
    from seedfleet.envs import observation_bounds

    low, high = observation_bounds("CartPole-v1")
    assert low[0] == np.float32(-4.8) and np.isinf(high[1]) and observation_bounds("ALE/Pong-v5") is None
    for x, ok in ((4.0, True), (1e19, False), (-5.0, False)):
        batch = StepBatch(np.array([[x, 1e30, 0.0, 0.0]], np.float32), np.zeros(1, np.float32),
                          np.zeros(1, bool), np.zeros(1, bool), np.zeros(1, bool))
        msg = encode_steps(np.array([0]), batch)
        if ok:
            decode_steps(msg.steps, (0, 1), (4,), np.dtype(np.float32), bounds=(low, high))
        else:
            with pytest.raises(WireError, match="outside the observation space's bounds"):
                decode_steps(msg.steps, (0, 1), (4,), np.dtype(np.float32), bounds=(low, high))


def test_each_family_describes_its_envs_and_an_actor_builds_the_same_from_the_wire():
    """The EnvConfig names the family and carries its settings; read back on the other side
    (after serialisation) it builds envs of the shape the learner probed. A config from a
    learner that names no family still works: Atari by its preprocessing, else by the id."""
    from seedfleet.envs import describe, family_named, family_of, make_envs_from
    from seedfleet.v1 import actor_learner_pb2 as pb

    for env_id, family, settings_field in (("ALE/Pong-v5", "ale", "atari"), ("MinAtar/Breakout-v1", "minatar", None),
                                           ("CartPole-v1", "gymnasium", None)):
        config, frame_skip = describe(env_id, seed=7)
        wire = pb.EnvConfig.FromString(config.SerializeToString())
        assert (wire.family, wire.WhichOneof("settings"), wire.seed) == (family, settings_field, 7)
        assert frame_skip == (4 if family == "ale" else 1)
        envs = make_envs_from(wire, 2, threads=1)
        try:
            assert envs.observation_shape == tuple(wire.observation.shape)
            assert envs.actions.equals(ActionSpec.from_proto(wire))
        finally:
            envs.close()
        old = pb.EnvConfig.FromString(wire.SerializeToString())
        old.ClearField("family")
        assert family_of(old).name == family
    pong, _ = describe("ALE/Pong-v5", 0)
    assert family_named("ale").settings_from_proto(pong).repeat_action_probability == 0.25
    with pytest.raises(ValueError, match="not known here"):
        family_of(pb.EnvConfig(env_id="X-v0", family="no-such-family"))



BOX = ActionSpec.box((2, 2), [[-1, -2], [0, -1]], [[1, 2], [3, 1]])


def test_box_actions_travel_in_the_config_and_come_back_clipped_to_their_bounds():
    config = pb.EnvConfig(env_id="x")
    BOX.to_proto(config)
    config = pb.EnvConfig.FromString(config.SerializeToString())
    spec = ActionSpec.from_proto(config)
    assert spec.equals(BOX) and config.num_actions == 0 and spec.dtype == np.dtype("<f4")
    drawn = np.array([[[0.5, -3.0], [4.0, 0.25]], [[-1.5, 2.5], [1.0, -0.5]]], np.float32)
    got = decode_actions(encode_actions(drawn, spec), 2, spec)
    expected = np.empty_like(drawn)  # clipped value by value, as the env's bounds say
    for e in range(2):
        for i in range(2):
            for j in range(2):
                expected[e, i, j] = min(max(drawn[e, i, j], BOX.low[i, j]), BOX.high[i, j])
    np.testing.assert_array_equal(got, expected)
    assert got.shape == (2, 2, 2) and got.dtype == np.float32


@pytest.mark.parametrize("actions,spec,message", [
    (np.array([[0.0, np.nan, 0.0, 0.0]], np.float32), BOX, "must be finite"),
    (np.array([[0.0, np.inf, 0.0, 0.0]], np.float32), BOX, "must be finite"),
    (np.zeros((1, 3), np.float32), BOX, "expected 16 bytes"),
    (np.array([2], np.int32), ActionSpec.discrete(2), "outside 0..1"),
    (np.array([-1], np.int32), ActionSpec.discrete(2), "outside 0..1"),
    (np.array([1, 0], np.int32), ActionSpec.discrete(2), "expected 4 bytes"),
])
def test_actions_that_no_env_may_see_are_refused(actions, spec, message):
    reply = pb.LearnerMessage(actions=pb.Actions(actions=actions.tobytes()))
    with pytest.raises(WireError, match=message):
        decode_actions(reply, 1, spec)


def test_action_spaces_seedfleet_cannot_clip_or_index_are_one_clear_error():
    import gymnasium as gym

    assert action_spec_of("x", gym.spaces.Discrete(3)).num_actions == 3
    assert action_spec_of("x", gym.spaces.Box(-2.0, 2.0, (1,))).describe() == "Box[1] in [-2, 2]"
    for space, message in ((gym.spaces.Box(-np.inf, np.inf, (2,)), "needs finite bounds"),
                           (gym.spaces.Discrete(3, start=1), "must start at 0"),
                           (gym.spaces.Box(-1.0, 1.0, (2, 2)), "must be one vector"),
                           (gym.spaces.MultiDiscrete([2, 3]), "acts in Discrete spaces and float Box")):
        with pytest.raises(UsageError, match=message):
            action_spec_of("x", space)
