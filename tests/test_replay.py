"""Prioritized sequence replay: sampling frequencies, exact weights, updates, eviction."""

import numpy as np
import pytest

from seedfleet.algorithms.r2d2.replay import PrioritizedReplay, SumTree


def items(values, steps=3):
    values = np.asarray(values)
    return {
        "frames": np.repeat(values[:, None, None], steps, axis=1).astype(np.uint8),
        "state": {"h": values[:, None].astype(np.float32)},
    }


def test_sum_tree_find_walks_prefix_sums():
    tree = SumTree(5)
    tree.set(np.arange(5), np.array([1.0, 0.0, 2.0, 3.0, 4.0]))
    assert tree.total == 10.0
    np.testing.assert_array_equal(tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99, 6.0, 9.99])),
                                  [0, 0, 2, 2, 3, 3, 4, 4])


def test_sampling_frequencies_follow_p_to_the_alpha():
    replay = PrioritizedReplay(8, priority_exponent=0.9, seed=0)
    priorities = np.array([1.0, 2.0, 3.0, 4.0, 0.5, 6.0, 7.0, 8.0])
    replay.add(items(np.arange(8)), priorities)
    counts = np.zeros(8)
    for _ in range(2000):
        indices, _, batch = replay.sample(64)
        np.testing.assert_array_equal(batch["frames"][:, 0, 0], indices)  # items match indices
        counts += np.bincount(indices, minlength=8)
    expected = priorities**0.9 / np.sum(priorities**0.9)
    observed = counts / counts.sum()
    np.testing.assert_allclose(observed, expected, atol=0.003)
    chi2 = np.sum((counts - expected * counts.sum()) ** 2 / (expected * counts.sum()))
    assert chi2 < 24.3  # 7 degrees of freedom, p = 0.001


def test_an_exponent_of_zero_samples_the_items_held_uniformly_with_weights_of_one():
    """p^0 = 1 for every priority: uniform over the items held (not the capacity), every weight 1,
    whatever priorities the items came with or were given later."""
    replay = PrioritizedReplay(16, priority_exponent=0.0, importance_sampling_exponent=0.6, seed=0)
    replay.add(items(np.arange(6)), np.array([0.0, 1.0, 50.0, 3.0, 0.1, 9.0]))
    replay.update_priorities(np.array([0, 1]), np.array([100.0, 0.0]))
    counts = np.zeros(6)
    for _ in range(1000):
        indices, weights, batch = replay.sample(60)
        np.testing.assert_array_equal(batch["frames"][:, 0, 0], indices)
        np.testing.assert_array_equal(weights, 1.0)
        counts += np.bincount(indices, minlength=16)[:6]
    assert counts.sum() == 60_000  # none beyond the 6 held
    chi2 = np.sum((counts - 10_000) ** 2 / 10_000)
    assert chi2 < 20.5  # 5 degrees of freedom, p = 0.001


def test_importance_weights_are_exact_on_a_small_case():
    replay = PrioritizedReplay(4, priority_exponent=1.0, importance_sampling_exponent=0.5, seed=1)
    replay.add(items([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    indices, weights, _ = replay.sample(32)
    probs = (indices + 1) / 10.0
    raw = (4 * probs) ** -0.5
    np.testing.assert_allclose(weights, raw / raw.max(), rtol=1e-6)
    # by hand: P = 0.1 .. 0.4, (N P)^-1/2 = 1.581, 1.118, 0.913, 0.791; the smallest P sets the max
    if 0 in indices:
        assert weights[indices == 3][0] == pytest.approx(0.791 / 1.581, rel=1e-3)


def test_update_priorities_changes_what_is_drawn():
    replay = PrioritizedReplay(4, priority_exponent=1.0, seed=2)
    replay.add(items([0, 1, 2, 3]), np.ones(4))
    replay.update_priorities(np.array([0, 1, 2]), np.zeros(3))
    indices, weights, _ = replay.sample(50)
    assert set(indices) == {3}
    np.testing.assert_allclose(weights, 1.0)
    with pytest.raises(ValueError):
        replay.update_priorities(np.array([0]), np.array([np.nan]))


def test_oldest_sequences_are_evicted_first():
    replay = PrioritizedReplay(3, priority_exponent=1.0, seed=3)
    replay.add(items([10, 11]), np.array([1.0, 1.0]))
    replay.add(items([12, 13]), np.array([1.0, 1.0]))  # 10 goes
    assert len(replay) == 3
    replay.add(items([14]), np.array([1.0]))  # then 11
    _, _, batch = replay.sample(300)
    assert set(batch["frames"][:, 0, 0]) == {12, 13, 14}
    assert set(batch["state"]["h"][:, 0]) == {12.0, 13.0, 14.0}


def test_bytes_per_step_counts_frames_once():
    replay = PrioritizedReplay(10)
    replay.add({"frames": np.zeros((2, 5, 84, 84), np.uint8)}, np.ones(2))
    assert replay.bytes_per_step(5) == 84 * 84


def test_bad_input_is_refused():
    replay = PrioritizedReplay(2)
    with pytest.raises(ValueError, match="capacity"):
        replay.add(items([1, 2, 3]), np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        replay.add(items([1]), np.array([-1.0]))
    with pytest.raises(ValueError, match="empty"):
        replay.sample(4)


def test_the_learner_refuses_a_replay_that_cannot_fit_in_memory():
    from seedfleet.algorithms.replay_trainer import available_memory_bytes, check_fits, replay_bytes, sum_tree_bytes

    chunk = {"observation": np.zeros((2, 121, 84, 84), np.uint8), "state": {"h": np.zeros((2, 512), np.float32)}}
    assert replay_bytes(chunk, 10) == 10 * (121 * 84 * 84 + 512 * 4)
    with pytest.raises(MemoryError, match="lower --replay-capacity"):
        check_fits(replay_bytes(chunk, int(available_memory_bytes() / (121 * 84 * 84)) + 1), "a replay",
                   "--replay-capacity")
    check_fits(replay_bytes(chunk, 10), "a replay", "--replay-capacity")
    assert sum_tree_bytes(1000, 0.9) == 16 * 1024 == PrioritizedReplay(1000, 0.9).tree.nodes.nbytes
    assert sum_tree_bytes(1024, 0.9) == 16 * 1024 and sum_tree_bytes(10**12, 0.0) == 0
    assert PrioritizedReplay(10**12, 0.0).tree is None  # uniform: nothing allocated before the first insert
