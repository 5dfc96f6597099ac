"""Checkpoints that survive restarts, crashes and full disks.

A checkpoint is a directory `<logdir>/checkpoints/ckpt-<unix ms>-f<frames>/` with
  * `variables.index`, `variables.data-*`: the agent's checkpointed objects (weights,
    optimizer state; R2D2 adds the target network and its step counter), written by
    `tf.train.Checkpoint`, whose data files carry CRC32C checksums;
  * `trainer.npz` (optional): what the trainer keeps beside the variables (R2D2 with
    --checkpoint-replay: the replay's arrays and sum tree), uncompressed;
  * `state.json`, written last: format, counters, the configs it was made with, the
    observation and reward statistics (server/normalization.py) and the size of every other file.
It is built under `.tmp-*` and renamed into place only when complete (and fsynced), so a
crash or a full disk leaves either the whole checkpoint or a temporary directory that the
next start removes. On restore, a checkpoint whose files are missing, short or fail
their checksums is skipped with a warning, and the next older one is tried.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Agent
from seedfleet.algorithms.trainer import TrainerThread
from seedfleet.errors import UsageError
from seedfleet.server.metrics import Metrics
from seedfleet.server.normalization import Normalization
from seedfleet.server.run_setup import FORMAT, PREFIX, STATE, RunSetup, newest_first, read_state

log = logging.getLogger("seedfleet.checkpoint")

VARIABLES = "variables"
TRAINER_STATE = "trainer.npz"
TRAINER_STATE_NAMES = (TRAINER_STATE, "replay.npz")  # the second: R2D2's replay in checkpoints written before
NORMALIZATION = "normalization"  # state.json's entry of the observation and reward statistics


@dataclass
class Restored:
    path: Path
    state: dict  # state.json
    arrays: dict[str, np.ndarray] | None  # the trainer's state, if the checkpoint has one


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    """The checkpoints of one log dir: atomic saves, the newest `keep` kept, newest-first restore."""

    def __init__(self, directory: Path, keep: int = 3):
        if keep < 1:
            raise UsageError("--keep-checkpoints: keep at least one checkpoint")
        self.directory = Path(directory)
        self.keep = keep

    def complete(self) -> list[Path]:
        """Checkpoint directories, newest (last written) first."""
        return newest_first(self.directory)

    def remove_partial(self) -> None:
        """Deletes `.tmp-*` directories left by a save that never finished."""
        if not self.directory.is_dir():
            return
        for path in self.directory.glob(".tmp-*"):
            log.warning("removing %s: a checkpoint save was interrupted there", path)
            shutil.rmtree(path, ignore_errors=True)

    def save(self, objects: dict, state: dict, frames: int, arrays: dict[str, np.ndarray] | None = None) -> Path:
        """Writes a checkpoint and prunes old ones; on failure nothing but a removed temp dir changes."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{PREFIX}{int(time.time() * 1000)}-f{frames}"
        tmp = self.directory / f".tmp-{name}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            tf.train.Checkpoint(**objects).write(str(tmp / VARIABLES))
            if arrays is not None:
                with (tmp / TRAINER_STATE).open("wb") as f:
                    np.savez(f, **arrays)
            files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
            body = {"format": FORMAT, "saved_at": time.time(), **state, "files": files}
            (tmp / STATE).write_text(json.dumps(body, indent=1) + "\n")
            for path in tmp.iterdir():
                _fsync(path)
            _fsync(tmp)
            final = self.directory / name
            os.rename(tmp, final)
            _fsync(self.directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for old in self.complete()[self.keep:]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def restore_latest(self, objects: dict, check: Callable[[dict], None]) -> Restored | None:
        """Restores the newest readable checkpoint into `objects`; None if there is none.

        `check(state)` raises CheckpointMismatch when a checkpoint belongs to another run
        setup: that stops the restore (a user error, not damage). Damaged checkpoints are
        skipped with a warning.
        """
        self.remove_partial()
        for path in self.complete():
            try:
                state = read_state(path)
            except (OSError, ValueError) as error:
                log.warning("skipping checkpoint %s: %s", path, error)
                continue
            check(state)
            try:
                load_variables(path, objects)
                arrays = _trainer_arrays(path, state)
            except (tf.errors.OpError, AssertionError, OSError, ValueError) as error:
                log.warning("skipping checkpoint %s: %s", path, str(error).splitlines()[0])
                continue
            return Restored(path, state, arrays)
        return None


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:  # zip entries are CRC-checked as they are read
        return {key: data[key] for key in data.files}


def _trainer_arrays(path: Path, state: dict) -> dict[str, np.ndarray] | None:
    saved = [name for name in TRAINER_STATE_NAMES if name in state["files"]]
    return _read_arrays(path / saved[0]) if saved else None


def read_trainer_arrays(checkpoint: Path) -> dict[str, np.ndarray] | None:
    """The trainer's arrays one checkpoint kept (a replay, with --checkpoint-replay), after the
    checks a restore makes; None if it kept none."""
    return _trainer_arrays(checkpoint, read_state(checkpoint))


def read_setup(checkpoint: Path) -> RunSetup:
    """The run setup of one checkpoint, after the checks a restore makes (format, file sizes)."""
    return RunSetup.from_state(read_state(checkpoint))


def read_statistics(checkpoint: Path) -> dict:
    """The observation and reward statistics one checkpoint kept ({} if it kept none)."""
    return read_state(checkpoint).get(NORMALIZATION, {})


def load_variables(checkpoint: Path, objects: dict) -> None:
    """Reads a checkpoint's variables into `objects` (their data files' CRC32C checked); every
    object must find its values."""
    tf.train.Checkpoint(**objects).read(str(checkpoint / VARIABLES)).assert_existing_objects_matched()


def saved_frames(checkpoint: Path) -> int:
    """The run's frames when `checkpoint` was written, from the name `CheckpointStore.save` gives it."""
    frames = Path(checkpoint).name.rsplit("-f", 1)[-1]
    if not frames.isdigit():
        raise UsageError(f"{checkpoint}: not named as the learner names its checkpoints (..-f<frames>)")
    return int(frames)


def newest_checkpoint(path: Path) -> Path:
    """`path` itself if it is a checkpoint, else the newest complete checkpoint in a log dir."""
    path = Path(path)
    if (path / STATE).is_file():
        return path
    for directory in (path / "checkpoints", path):
        found = CheckpointStore(directory).complete()
        if found:
            return found[0]
    raise UsageError(f"--checkpoint {path}: no checkpoint there (give a checkpoint directory, or a log dir)")


class LearnerCheckpoints:
    """The learner's checkpoints: what goes in, what a restore gives back to whom.

    `setup` is written into every checkpoint and must fit the newest one to restore it
    (RunSetup.mismatch). Saves wait for the trainer's lock, so weights, optimizer state
    and the trainer's own state (R2D2's replay) are those between two learner steps.
    """

    def __init__(self, store: CheckpointStore, agent: Agent, trainer: TrainerThread, metrics: Metrics,
                 setup: RunSetup, normalization: Normalization | None = None):
        """`normalization`: the statistics the learner normalises with (none: it does not)."""
        self.store, self.agent, self.trainer, self.metrics = store, agent, trainer, metrics
        self.setup, self.normalization = setup, normalization or Normalization()

    def restore(self) -> Restored | None:
        restored = self.store.restore_latest(self.agent.checkpointed(),
                                              lambda state: self.setup.refuse(self.store.directory, state))
        if restored is None:
            return None
        self.metrics.restore(restored.state["metrics"])
        if self.normalization:
            try:
                self.normalization.restore(restored.state.get(NORMALIZATION, {}))
            except (KeyError, TypeError, ValueError) as error:
                log.warning("the normalisation statistics in %s do not fit this learner (%s); they start afresh",
                            restored.path, error)
        extra = ""
        if restored.arrays is not None:
            try:
                extra = ", " + self.trainer.restore(restored.arrays)
            except (KeyError, ValueError) as error:
                log.warning("the trainer's state in %s does not fit this learner (%s); it starts without it",
                            restored.path, error)
        log.info("restored %s: %d frames, %d learner steps%s", restored.path.name, self.metrics.frames,
                 self.metrics.learner_steps, extra)
        return restored

    def save(self) -> Path | None:
        """Saves one checkpoint; a failure (a full disk, say) is logged and training goes on."""
        started = time.monotonic()
        try:
            with self.trainer.lock:
                state = {"setup": self.setup.to_state(), "metrics": self.metrics.state(),
                         NORMALIZATION: self.normalization.state()}
                arrays = self.trainer.state()
                path = self.store.save(self.agent.checkpointed(), state, self.metrics.frames, arrays)
        except (OSError, tf.errors.OpError) as error:
            log.error("checkpoint not saved (training goes on): %s", error)
            return None
        log.info("saved %s in %.1f s", path.name, time.monotonic() - started)
        return path
