"""The replay trainer thread of the off-policy algorithms (R2D2, SAC): unrolls go into
(prioritized) replay, batches come out of it.

The learner holds the replay ratio in both directions, as a rate limiter: it trains on
one batch whenever the items trained on so far stay below `ReplaySettings.ratio` times the
items inserted, and otherwise waits for new data; and it takes no new items while it owes
more than `RATIO_TOLERANCE_BATCHES` batches of training. The unroll queue then fills, the
inference thread blocks on it and the actors wait: a slow learner slows the actors down
rather than training less per env step, so a run learns the same per env step on a fast
machine and on a slow one.

An item is one sequence as the agent's layout cuts them; each brings `steps_per_item` new
env steps (R2D2: consecutive sequences of an env share burn_in + 1 rows, so unroll_length;
SAC: one transition), and bytes per stored step are counted over those.

The agent gives each inserted item its priority (`initial_priorities`) and `learn(batch,
weights)` returns new ones under "priorities"; with a priority exponent of 0 sampling is
uniform and every weight is 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import ROW_FIELDS, Agent, Unroll
from seedfleet.algorithms.r2d2.replay import PrioritizedReplay, SumTree
from seedfleet.algorithms.trainer import LearnerStepRecorder, TrainerThread, UnrollSource
from seedfleet.errors import UsageError
from seedfleet.stage_clock import StageClock
from seedfleet.threads import name_this_thread


def available_memory_bytes() -> float:
    """MemAvailable from /proc/meminfo (Linux), or infinity where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def replay_bytes(chunk: dict, capacity: int) -> int:
    """What a replay of `capacity` sequences shaped like `chunk`'s takes once full."""
    def per_item(nest) -> int:
        if isinstance(nest, dict):
            return sum(per_item(v) for v in nest.values())
        return nest[0].nbytes
    return per_item(chunk) * capacity


def sum_tree_bytes(capacity: int, priority_exponent: float) -> int:
    """The sum tree of a prioritized replay; none for a uniform one."""
    return SumTree.nbytes_for(capacity) if priority_exponent else 0


class ReplayTooLarge(UsageError, MemoryError):
    """The replay asked for cannot fit in this machine's memory."""


def check_fits(needed: float, what: str, capacity_flag: str) -> None:
    """ReplayTooLarge, naming the flag to lower, if `needed` bytes exceed 90% of what is available."""
    available = available_memory_bytes()
    if needed > 0.9 * available:
        raise ReplayTooLarge(f"{what} needs {needed / 2**30:.1f} GiB, and {available / 2**30:.1f} GiB are available: "
                          f"lower {capacity_flag}")


RATIO_TOLERANCE_BATCHES = 2  # batches of training the learner may owe before it stops taking data


@dataclass(frozen=True)
class ReplaySettings:
    """What the replay trainer takes from an algorithm's config."""

    capacity: int  # items kept in replay
    min_size: int  # items in replay before training starts
    ratio: float  # items trained on per item inserted, held both ways
    priority_exponent: float = 0.0  # alpha of prioritized replay (0: uniform)
    importance_sampling_exponent: float = 0.0  # beta of prioritized replay
    checkpoint: bool = False  # checkpoints hold the replay too
    steps_per_item: int = 1  # new env steps each item brings
    owed_from: int = 0  # items inserted before training is owed any (SAC: its random phase; R2D2: from the first)
    capacity_flag: str = "--replay-capacity"  # the algorithm's flag that sets `capacity`, named when it cannot fit


class ReplayTrainer(TrainerThread):
    """`lock` is held while the replay or the variables change (checkpoints wait)."""

    def __init__(self, agent: Agent, queue: UnrollSource, metrics: LearnerStepRecorder, device: str,
                 config: ReplaySettings, seed: int, clock: StageClock | None = None):
        super().__init__(agent, queue, metrics, device, clock)
        self.config = config
        check_fits(sum_tree_bytes(config.capacity, config.priority_exponent),
                   f"the priorities of a replay of {config.capacity:,} sequences", config.capacity_flag)
        self.replay = PrioritizedReplay(
            config.capacity, config.priority_exponent, config.importance_sampling_exponent, seed=seed
        )
        self.inserted = 0
        self.trained = 0

    PROGRESS_COLUMNS = ("replay_size", "replay_bytes_per_step", "replay_ratio_held")

    def state(self) -> dict[str, np.ndarray] | None:
        """With `checkpoint_replay`, the replay and the replay-ratio counters as arrays (call
        with `lock` held); else None, and a restored run starts with an empty replay."""
        if not self.config.checkpoint:
            return None
        return {**self.replay.to_arrays(), "trainer/inserted": np.asarray(self.inserted),
                "trainer/trained": np.asarray(self.trained)}

    def restore(self, arrays: dict[str, np.ndarray]) -> str:
        """Loads what `state` gave; raises ValueError if it does not fit this replay (another
        capacity, or items laid out otherwise than an Unroll)."""
        fields = {key.split("/")[1] for key in arrays if key.startswith("items/")}
        if fields - {*ROW_FIELDS, "extras", "state"}:
            raise ValueError(f"its items are laid out otherwise: {sorted(fields)}")
        self.replay.load_arrays({k: v for k, v in arrays.items() if not k.startswith("trainer/")})
        if self.replay.storage is not None:  # an empty nest (SAC's extras and state) left no arrays to load
            for nest in ("extras", "state"):
                self.replay.storage.setdefault(nest, {})
        self.inserted, self.trained = int(arrays["trainer/inserted"]), int(arrays["trainer/trained"])
        return f"replay of {len(self.replay):,} sequences"

    def progress(self) -> dict[str, float]:
        owed_for = max(self.inserted - self.config.owed_from, 0)
        return {"replay_size": float(len(self.replay)),
                "replay_bytes_per_step": self.replay.bytes_per_step(self.config.steps_per_item),
                # items trained on over what the ratio asks for the items inserted since training was owed: 1 when held
                "replay_ratio_held": self.trained / (self.config.ratio * owed_for) if owed_for else float("nan")}

    def _owed(self) -> float:
        """Sequences of training the replay ratio asks for and the learner has not done."""
        return self.config.ratio * max(self.inserted - self.config.owed_from, 0) - self.trained

    def may_train(self) -> bool:
        """Replay can be sampled and the ratio owes at least one batch of training."""
        return len(self.replay) >= self.config.min_size and self._owed() >= self.agent.batch_size

    def _may_insert(self) -> bool:
        """Until replay can be sampled, always; then only while the learner keeps up. Owing
        more than the tolerance (at least one batch) implies it may train: no deadlock."""
        return (len(self.replay) < self.config.min_size
                or self._owed() <= RATIO_TOLERANCE_BATCHES * self.agent.batch_size)

    def insert(self, chunk: Unroll) -> None:
        """Adds one chunk of items to replay with the agent's initial priorities."""
        if not len(self.replay):  # fails at the first insert, not hours later
            check_fits(replay_bytes(chunk.as_nest(), self.config.capacity),
                       f"a replay of {self.config.capacity:,} sequences once full", self.config.capacity_flag)
        with self.lock:
            with tf.device(self.device):
                priorities = self.agent.initial_priorities(chunk)
            self.replay.add(chunk.as_nest(), priorities.numpy())
            self.inserted += len(priorities)

    def train_one_batch(self) -> None:
        """Samples one batch, trains on it, updates its priorities and reports the step."""
        with self.lock:
            indices, weights, items = self.replay.sample(self.agent.batch_size)
            with tf.device(self.device):
                out = self.agent.learn(Unroll(**items), weights)
            priorities = out.pop("priorities")
            uniform = self.config.priority_exponent == 0  # p^0 = 1 whatever the priorities
            if not uniform and not float(out.get("skipped_steps", 0.0)):  # a skipped step's are not finite
                self.replay.update_priorities(indices, priorities.numpy())
            self.trained += self.agent.batch_size
        self.record_step(out)

    def _insert_from_queue(self, timeout_s: float) -> None:
        chunk = self.queue.get_chunk(timeout_s)
        while chunk is not None:
            self.insert(chunk)
            chunk = self.queue.get_chunk(0.0) if self._may_insert() else None

    def run(self) -> None:
        name_this_thread("trainer")
        try:
            while not self.stopping.is_set():
                if self._may_insert():
                    self._insert_from_queue(0.0 if self.may_train() else 0.5)
                if self.may_train():
                    self.train_one_batch()
        except BaseException as error:  # noqa: BLE001 - reported by the main loop
            self.error = error
