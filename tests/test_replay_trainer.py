"""The R2D2 trainer thread holds the replay ratio both ways: never more training per
inserted sequence than asked, and actors held back when the learner falls behind."""

import json
import subprocess
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import seedfleet

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.r2d2.builder import replay_settings
from seedfleet.algorithms.r2d2.config import R2D2Config
from seedfleet.algorithms.replay_trainer import RATIO_TOLERANCE_BATCHES, ReplayTooLarge, ReplayTrainer
from seedfleet.server.metrics import Metrics
from seedfleet.server.unroll_queue import UnrollQueue

BATCH, CHUNK, RATIO = 4, 4, 2.0


class SlowAgent:
    """Stands in for R2D2Agent: unit priorities, and a learner step that takes 5 ms."""

    batch_size = BATCH

    def __init__(self):
        self.trainer: ReplayTrainer | None = None
        self.owed_at_steps: list[float] = []

    def initial_priorities(self, chunk: dict) -> tf.Tensor:
        return tf.ones(chunk.size)

    def learn(self, batch: dict, weights: np.ndarray) -> dict:
        self.owed_at_steps.append(RATIO * self.trainer.inserted - self.trainer.trained)
        time.sleep(0.005)
        return {"priorities": tf.ones(len(weights)), "loss": tf.constant(0.0)}


def chunk() -> Unroll:
    rows = np.zeros((CHUNK, 3), np.int32)
    return Unroll(observation=rows, first=rows == 1, reward=rows * 1.0, terminated=rows == 1, truncated=rows == 1,
                  life_lost=rows == 1, action=rows, extras={}, state={"h": np.zeros((CHUNK, 2), np.float32)})


def produce_and_train(settings, chunks: int) -> tuple[SlowAgent, ReplayTrainer]:
    """A producer puts `chunks` chunks as fast as the queue takes them while the trainer runs;
    returns once everything is inserted and the trainer has worked off what it owed."""
    agent = SlowAgent()
    queue = UnrollQueue(capacity=2 * BATCH, batch_size=BATCH)
    trainer = ReplayTrainer(agent, queue, Metrics(frame_skip=1), "/cpu:0", settings, seed=0)
    agent.trainer = trainer
    producer = threading.Thread(target=lambda: [queue.put(chunk()) for _ in range(chunks)])
    trainer.start()
    producer.start()
    producer.join(timeout=60)
    deadline = time.monotonic() + 30
    while trainer.inserted < chunks * CHUNK and time.monotonic() < deadline:
        time.sleep(0.01)
    while trainer._owed() >= BATCH and time.monotonic() < deadline + 30:  # the learner works off what it owes
        time.sleep(0.01)
    trainer.stopping.set()
    queue.close()
    trainer.join(timeout=10)
    assert trainer.error is None and trainer.inserted == chunks * CHUNK
    return agent, trainer


def test_a_fast_producer_is_held_to_the_replay_ratio():
    config = R2D2Config(replay_ratio=RATIO, min_replay_size=8, replay_capacity=1_000, unroll_length=2)
    agent, trainer = produce_and_train(replay_settings(config), chunks=60)
    # the producer could have put everything in at once; it waited for the learner instead
    assert max(agent.owed_at_steps) <= RATIO_TOLERANCE_BATCHES * BATCH + RATIO * CHUNK
    assert min(agent.owed_at_steps) >= BATCH  # and never trained beyond the ratio
    assert RATIO * trainer.inserted - BATCH < trainer.trained <= RATIO * trainer.inserted


def test_a_replay_saved_in_another_layout_is_refused_not_half_loaded():
    """A checkpoint's replay whose items are not laid out as an Unroll (Q values at the
    top level, as before the Unroll record) raises ValueError, on which the learner starts
    with an empty replay, instead of failing the trainer thread at its first insert."""
    config = R2D2Config(replay_capacity=8, checkpoint_replay=True)
    trainer = ReplayTrainer(SlowAgent(), UnrollQueue(capacity=8, batch_size=BATCH), Metrics(frame_skip=1),
                            "/cpu:0", replay_settings(config), seed=0)
    trainer.replay.add(chunk().as_nest(), np.ones(CHUNK))
    saved = trainer.state()
    fresh = ReplayTrainer(SlowAgent(), UnrollQueue(capacity=8, batch_size=BATCH), Metrics(frame_skip=1),
                          "/cpu:0", replay_settings(config), seed=0)
    assert fresh.restore(saved) == f"replay of {CHUNK:,} sequences"
    assert fresh.progress()["replay_size"] == CHUNK
    older = {("items/q" if key == "items/action" else key): value for key, value in saved.items()}
    with pytest.raises(ValueError, match="laid out otherwise"):
        fresh.restore(older)
    without = ReplayTrainer(SlowAgent(), UnrollQueue(capacity=8, batch_size=BATCH), Metrics(frame_skip=1),
                            "/cpu:0", replay_settings(R2D2Config(replay_capacity=8)), seed=0)
    assert without.state() is None  # the replay goes into checkpoints only when asked


def test_sac_is_owed_training_only_after_its_random_steps_and_then_held_to_one_update_per_step():
    """SAC's settings: a batch of BATCH transitions per env step, nothing owed for the
    learning_starts random steps; a slow learner (5 ms a step) holds a fast producer to it."""
    from seedfleet.algorithms.sac.builder import replay_settings as sac_settings
    from seedfleet.algorithms.sac.config import SACConfig

    settings = sac_settings(SACConfig(batch_size=BATCH, learning_starts=8, replay_ratio=1.0))
    assert (settings.ratio, settings.min_size, settings.owed_from) == (BATCH, 8, 8)
    _, trainer = produce_and_train(settings, chunks=30)
    updates, steps = trainer.trained // BATCH, trainer.inserted - 8
    assert steps - 1 <= updates <= steps  # one update per env step after the random ones, not for them
    assert 0.95 <= trainer.progress()["replay_ratio_held"] <= 1.0


def test_a_replay_too_large_for_memory_stops_the_run_in_one_line_naming_the_flag(tmp_path):
    """SAC's --buffer-size at its first insert (uniform: nothing allocated before), and a
    prioritized replay's sum tree at once, each refused in one line without a traceback. The
    run still writes its summary, marked failed, and keeps no checkpoint of the failed trainer."""
    out = subprocess.run(seedfleet("run", "--env", "Pendulum-v1", "--algo", "sac", "--buffer-size", str(10**11),
                                   "--max-frames", "6000", "--logdir", str(tmp_path), "--no-jit-compile"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "stopping: trainer failed: a replay of 100,000,000,000 sequences once full needs" in out.stderr
    assert out.stderr.count("lower --buffer-size") == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stop_reason"] == "trainer_failed" and summary["learner_steps"] == 0
    assert not list((tmp_path / "checkpoints").glob("ckpt-*"))
    with pytest.raises(ReplayTooLarge, match="priorities of a replay of 1,099,511,627,776 sequences .* lower "
                                             "--replay-capacity"):
        ReplayTrainer(SlowAgent(), UnrollQueue(capacity=8, batch_size=BATCH), Metrics(frame_skip=1), "/cpu:0",
                      replay_settings(R2D2Config(replay_capacity=2**40)), seed=0)
