"""The bounded queue between inference and training: order, back-pressure, no deadlock."""

import threading
import time

import numpy as np
import pytest

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.trainer import OnPolicyTrainer
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


def test_sync_acting_holds_the_chunk_that_completes_a_batch_until_the_trainer_is_done_with_it():
    queue = UnrollQueue(capacity=32, batch_size=16, sync_acting=True)
    queue.put(chunk(0, 10))  # 10 of 16: no batch yet, acting goes on
    writer = put_in_thread(queue, chunk(10, 10))  # completes the batch
    writer.join(timeout=0.3)
    assert writer.is_alive() and len(queue) == 20
    batch = queue.get_batch(16, timeout_s=0.1)
    writer.join(timeout=0.3)
    assert writer.is_alive(), "acting went on while the batch was still being trained on"
    queue.done_with(batch.size)
    writer.join(timeout=2)
    assert not writer.is_alive()
    # 4 unrolls left over count towards the next batch, which 12 more complete
    writer = put_in_thread(queue, chunk(20, 12))
    writer.join(timeout=0.3)
    assert writer.is_alive()
    queue.done_with(queue.get_batch(16, timeout_s=0.1).size)
    writer.join(timeout=2)
    assert not writer.is_alive() and len(queue) == 0


def test_without_sync_acting_or_for_chunks_taken_whole_the_producer_never_waits_for_training():
    queue = UnrollQueue(capacity=64, batch_size=16)
    queue.put(chunk(0, 16))
    queue.put(chunk(16, 16))  # a second batch while the first is neither taken nor trained on
    assert len(queue) == 32
    queue = UnrollQueue(capacity=64, batch_size=16, sync_acting=True)
    for start in (0, 16):
        writer = put_in_thread(queue, chunk(start, 16))
        queue.get_chunk(2)  # nobody calls done_with: a replay trainer's chunk is done with once taken
        writer.join(timeout=2)
        assert not writer.is_alive() and len(queue) == 0


def test_close_releases_a_producer_waiting_for_training():
    queue = UnrollQueue(capacity=32, batch_size=16, sync_acting=True)
    writer = put_in_thread(queue, chunk(0, 16))
    writer.join(timeout=0.3)
    assert writer.is_alive()
    queue.close()
    writer.join(timeout=2)
    assert not writer.is_alive()


class ActingWatcher:
    """Stands in for an on-policy agent: each learner step waits up to `watch_s` for acting to
    put another unroll (while any are left to act), and records whether it did."""

    batch_size = 16

    def __init__(self, queue: UnrollQueue, watch_s: float):
        self.queue, self.watch_s, self.acted_while_training = queue, watch_s, []

    def learn(self, batch: Unroll) -> dict:
        before, deadline = self.queue.accepted, time.monotonic() + self.watch_s
        while self.queue.accepted == before < ACTED and time.monotonic() < deadline:
            time.sleep(0.01)
        self.acted_while_training.append(self.queue.accepted != before)
        return {"loss": 0.0}


ACTED = 64  # unrolls the producer puts, in chunks of 8: 4 batches


class NoMetrics:
    def add_learner_step(self, losses: dict) -> None:
        pass


@pytest.mark.parametrize("sync_acting", [True, False])
def test_the_on_policy_trainer_lets_acting_go_on_only_once_it_has_trained_on_the_batch(sync_acting):
    queue = UnrollQueue(capacity=32, batch_size=16, sync_acting=sync_acting)
    agent = ActingWatcher(queue, watch_s=0.3 if sync_acting else 10.0)
    trainer = OnPolicyTrainer(agent, queue, NoMetrics(), "/cpu:0")
    trainer.start()
    producer = threading.Thread(target=lambda: [queue.put(chunk(8 * i, 8)) for i in range(ACTED // 8)], daemon=True)
    producer.start()
    producer.join(timeout=20)
    deadline = time.monotonic() + 20
    while len(agent.acted_while_training) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    trainer.stopping.set()
    queue.close()
    trainer.join(timeout=5)
    assert trainer.error is None and not producer.is_alive() and len(agent.acted_while_training) == 4
    assert queue.done == ACTED
    if sync_acting:
        assert not any(agent.acted_while_training)
    else:  # the actors act on the next batch while the trainer trains on this one
        assert any(agent.acted_while_training[:3])
