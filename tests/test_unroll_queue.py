"""The bounded queue between inference and training: order, back-pressure, no deadlock."""

import threading

import numpy as np

from seedfleet.algorithms.agent import Unroll
from seedfleet.server.unroll_queue import UnrollQueue


def chunk(start: int, n: int) -> Unroll:
    ids = np.arange(start, start + n)
    return Unroll(observation=ids[:, None] * 1.0, first=ids == 0, reward=ids * 0.5, terminated=ids < 0,
                  truncated=ids < 0, life_lost=ids < 0, action=ids, extras={"logits": -ids},
                  state={"h": ids * 10})


def put_in_thread(queue: UnrollQueue, item: Unroll) -> threading.Thread:
    thread = threading.Thread(target=queue.put, args=(item,), daemon=True)
    thread.start()
    return thread


def test_batches_are_cut_from_chunks_oldest_first():
    queue = UnrollQueue(capacity=64, batch_size=16)
    queue.put(chunk(0, 10))
    queue.put(chunk(10, 10))
    batch = queue.get_batch(16, timeout_s=0.1)
    np.testing.assert_array_equal(batch.action, np.arange(16))
    np.testing.assert_array_equal(batch.state["h"], np.arange(16) * 10)
    np.testing.assert_array_equal(batch.extras["logits"], -np.arange(16))
    np.testing.assert_array_equal(batch.observation[:, 0], np.arange(16))
    assert len(queue) == 4
    assert queue.get_batch(16, timeout_s=0.05) is None
    np.testing.assert_array_equal(queue.get_chunk(0.1).action, np.arange(16, 20))


def test_a_short_queue_admits_a_chunk_past_capacity_so_training_can_go_on():
    queue = UnrollQueue(capacity=32, batch_size=16)
    queue.put(chunk(0, 10))
    writer = put_in_thread(queue, chunk(10, 30))  # 40 > 32, but 10 is not a batch yet
    writer.join(timeout=2)
    assert not writer.is_alive(), "the producer waits on a trainer that waits on it"
    assert len(queue) == 40
    np.testing.assert_array_equal(queue.get_batch(16, timeout_s=0.1).action, np.arange(16))


def test_a_full_queue_holds_the_producer_until_a_batch_is_taken():
    queue = UnrollQueue(capacity=32, batch_size=16)
    queue.put(chunk(0, 32))
    writer = put_in_thread(queue, chunk(32, 16))
    writer.join(timeout=0.3)
    assert writer.is_alive() and len(queue) == 32
    queue.get_batch(16, timeout_s=0.1)
    writer.join(timeout=2)
    assert not writer.is_alive() and len(queue) == 32


def test_close_releases_a_waiting_producer():
    queue = UnrollQueue(capacity=16, batch_size=16)
    queue.put(chunk(0, 16))
    result = []
    writer = threading.Thread(target=lambda: result.append(queue.put(chunk(16, 16))), daemon=True)
    writer.start()
    queue.close()
    writer.join(timeout=2)
    assert result == [False]
    assert queue.get_batch(16, timeout_s=0.1) is None
