"""Unroll assembly on the learner: overlap, episode boundaries, actors restarting mid-unroll."""

import numpy as np

from seedfleet.algorithms.agent import SequenceLayout
from seedfleet.envs import StepBatch
from seedfleet.server.env_slots import EnvSlots

T = 3  # unroll length: 4 rows


def make_slots(capacity=4):
    def initial_state(n):
        return {"h": np.zeros((n, 2), np.float32)}

    return EnvSlots(capacity, SequenceLayout(T), (2,), np.dtype(np.float32), {"logits": ((3,), np.dtype(np.float32))},
                    initial_state)


def step(env_ids, t, first=None, terminated=None, reward=None):
    n = len(env_ids)
    obs = np.stack([np.full(2, 100 * e + t, np.float32) for e in env_ids])
    return StepBatch(
        observations=obs,
        rewards=np.full(n, float(t), np.float32) if reward is None else np.asarray(reward, np.float32),
        terminated=np.zeros(n, bool) if terminated is None else np.asarray(terminated),
        truncated=np.zeros(n, bool),
        first=np.zeros(n, bool) if first is None else np.asarray(first),
    )


def feed(slots, env_ids, t, **kw):
    env_ids = np.asarray(env_ids)
    batch = step(env_ids, t, **kw)
    pre = slots.gather_state(env_ids)
    new = {"h": pre["h"] + 1.0}  # the state counts the steps taken
    actions = (env_ids * 10 + t).astype(np.int32)
    extras = {"logits": np.zeros((len(env_ids), 3), np.float32)}
    return slots.record(env_ids, batch, actions, extras, pre, new)


def test_unrolls_overlap_by_one_row_and_carry_their_start_state():
    slots = make_slots()
    ids = [0, 1]
    emitted = []
    for t in range(10):
        unrolls, *_ = feed(slots, ids, t, first=[t == 0] * 2)
        if unrolls is not None:
            emitted.append(unrolls)
    # rows 0..3, 3..6, 6..9
    assert len(emitted) == 3
    for k, unrolls in enumerate(emitted):
        times = unrolls.observation[:, :, 0] % 100
        np.testing.assert_array_equal(times, [[3 * k + r for r in range(4)]] * 2)
        np.testing.assert_array_equal(unrolls.action[1], [10 + 3 * k + r for r in range(4)])
        # the state before row 0 had seen exactly the 3k steps before it
        np.testing.assert_array_equal(unrolls.state["h"], np.full((2, 2), 3.0 * k))
    assert emitted[0].first[0, 0] and not emitted[1].first.any()


def test_episode_boundaries_stay_in_the_unroll_as_flags():
    slots = make_slots()
    feed(slots, [2], 0, first=[True])
    feed(slots, [2], 1, terminated=[True], reward=[5.0])
    unrolls, *_ = feed(slots, [2], 2, first=[True])  # the autoreset observation
    unrolls, returns, lengths, _ = feed(slots, [2], 3)
    assert unrolls is not None
    np.testing.assert_array_equal(unrolls.terminated[0], [False, True, False, False])
    np.testing.assert_array_equal(unrolls.first[0], [True, False, True, False])


def test_episode_returns_and_lengths():
    slots = make_slots()
    feed(slots, [0, 1], 0, first=[True, True])
    _, r, n, _ = feed(slots, [0, 1], 1, reward=[1.0, 2.0])
    assert len(r) == 0
    _, r, n, _ = feed(slots, [0, 1], 2, reward=[1.0, 2.0], terminated=[False, True])
    np.testing.assert_array_equal(r, [4.0])
    np.testing.assert_array_equal(n, [2])
    _, r, n, _ = feed(slots, [0, 1], 3, reward=[1.0, 0.0], first=[False, True], terminated=[True, False])
    np.testing.assert_array_equal(r, [3.0])
    np.testing.assert_array_equal(n, [3])


def test_an_actor_restart_mid_unroll_drops_the_partial_unroll():
    slots = make_slots()
    feed(slots, [0, 1], 0, first=[True, True])
    feed(slots, [0, 1], 1)  # two rows in each partial unroll
    slots.reset(0, 1)  # env 0's actor went away; a new one owns id 0
    np.testing.assert_array_equal(slots.state["h"][0], [0.0, 0.0])
    assert slots.state["h"][1, 0] == 2.0
    emitted = {}
    for t in range(50, 56):
        unrolls, *_ = feed(slots, [0, 1], t, first=[t == 50, False])
        if unrolls is not None:
            for i, row in zip(unrolls.observation[:, 0, 0] // 100, unrolls.observation[:, :, 0], strict=True):
                emitted.setdefault(int(i), []).append(row % 100)
    # env 1 continues its unroll: rows t = 0, 1, 50, 51
    np.testing.assert_array_equal(emitted[1][0], [0, 1, 50, 51])
    # env 0 starts afresh: nothing from before the restart is ever emitted
    np.testing.assert_array_equal(emitted[0][0], [50, 51, 52, 53])


def test_longer_overlaps_keep_every_transition_and_the_matching_start_state():
    def initial_state(n):
        return {"h": np.zeros((n, 2), np.float32)}

    slots = EnvSlots(2, SequenceLayout(5, overlap=3), (2,), np.dtype(np.float32),
                     {"logits": ((3,), np.dtype(np.float32))}, initial_state)
    emitted = []
    for t in range(14):
        unrolls, *_ = feed(slots, [0], t, first=[t == 0])
        if unrolls is not None:
            emitted.append(unrolls)
    # 6 rows overlapping by 3: rows 0..5, 3..8, 6..11
    assert len(emitted) == 3
    for k, unrolls in enumerate(emitted):
        np.testing.assert_array_equal(unrolls.observation[0, :, 0] % 100, [3 * k + r for r in range(6)])
        np.testing.assert_array_equal(unrolls.state["h"][0], [3.0 * k] * 2)  # 3k steps taken before row 0


def test_evaluation_envs_are_never_trained_on_and_report_apart():
    slots = make_slots()
    slots.reset(2, 4, evaluation=True)
    emitted = []
    for t in range(4):
        unrolls, returns, _, ended = feed(slots, [0, 2], t, first=[t == 0] * 2,
                                          terminated=[t == 3, t == 3], reward=[1.0, 2.0])
        evaluation = slots.evaluation[ended]
        if unrolls is not None:
            emitted.append(unrolls)
    assert len(emitted) == 1 and emitted[0].observation.shape[0] == 1  # env 0 only
    assert emitted[0].observation[0, 0, 0] // 100 == 0
    np.testing.assert_array_equal(returns, [3.0, 6.0])
    np.testing.assert_array_equal(evaluation, [False, True])
    slots.reset(2, 4)  # a training actor takes the ids over
    assert not slots.evaluation[2:4].any()
