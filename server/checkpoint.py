"""Checkpoints that survive restarts, crashes and full disks.

A checkpoint is a directory `<logdir>/checkpoints/ckpt-<unix ms>-f<frames>/` with
  * `variables.index`, `variables.data-*`: the agent's checkpointed objects (weights,
    optimizer state; R2D2 adds the target network and its step counter), written by
    `tf.train.Checkpoint`, whose data files carry CRC32C checksums;
  * `replay.npz` (optional, R2D2): the replay's arrays and sum tree, uncompressed;
  * `state.json`, written last: format, counters, the configs it was made with and the
    size of every other file.
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

log = logging.getLogger("seedfleet.checkpoint")

FORMAT = 1
PREFIX = "ckpt-"
VARIABLES = "variables"
REPLAY = "replay.npz"
STATE = "state.json"


class CheckpointMismatch(Exception):
    """The newest checkpoint was written for another env, algo or network."""


@dataclass
class Restored:
    path: Path
    state: dict  # state.json
    arrays: dict[str, np.ndarray] | None  # replay.npz, if the checkpoint has one


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
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX)]

        def written_at(path: Path) -> int:
            millis = path.name[len(PREFIX):].split("-", 1)[0]
            return int(millis) if millis.isdigit() else -1

        return sorted(found, key=written_at, reverse=True)

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
                with (tmp / REPLAY).open("wb") as f:
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
                state = _read_state(path)
            except (OSError, ValueError) as error:
                log.warning("skipping checkpoint %s: %s", path, error)
                continue
            check(state)
            try:
                status = tf.train.Checkpoint(**objects).read(str(path / VARIABLES))
                status.assert_existing_objects_matched()
                arrays = _read_arrays(path / REPLAY) if REPLAY in state["files"] else None
            except (tf.errors.OpError, AssertionError, OSError, ValueError) as error:
                log.warning("skipping checkpoint %s: %s", path, str(error).splitlines()[0])
                continue
            return Restored(path, state, arrays)
        return None


def _read_state(path: Path) -> dict:
    state = json.loads((path / STATE).read_text())
    if state.get("format") != FORMAT:
        raise ValueError(f"format {state.get('format')!r}, this learner reads format {FORMAT}")
    for name, size in state["files"].items():
        actual = (path / name).stat().st_size
        if actual != size:
            raise ValueError(f"{name} has {actual} bytes, {size} were written")
    return state


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:  # zip entries are CRC-checked as they are read
        return {key: data[key] for key in data.files}


def newest_checkpoint(path: Path) -> Path:
    """`path` itself if it is a checkpoint, else the newest complete checkpoint in a log dir."""
    path = Path(path)
    if (path / STATE).is_file():
        return path
    for directory in (path / "checkpoints", path):
        found = CheckpointStore(directory).complete()
        if found:
            return found[0]
    raise FileNotFoundError(f"no checkpoint in {path}")


def _shape_defining(value):
    """A setup entry without what may differ between runs of the same network (the torso's
    compute dtype, which follows the machine, and whether XLA compiles the training step)."""
    free = ("compute_dtype", "jit_compile")
    return {k: v for k, v in value.items() if k not in free} if isinstance(value, dict) else value


class LearnerCheckpoints:
    """The learner's checkpoints: what goes in, what a restore gives back to whom.

    `setup` (env, algo, network and agent configs) is written into every checkpoint;
    env, algo and network must match to restore (the agent's hyperparameters may change
    between runs). Saves wait for the trainer's lock, so weights, optimizer state and
    replay are those between two learner steps.
    """

    def __init__(self, store: CheckpointStore, agent: Agent, trainer: TrainerThread, metrics: Metrics, setup: dict,
                 with_replay: bool):
        self.store, self.agent, self.trainer, self.metrics = store, agent, trainer, metrics
        self.setup = setup
        self.with_replay = with_replay

    def _check(self, state: dict) -> None:
        saved = state["setup"]
        for key in ("env", "algo", "network"):
            if _shape_defining(saved[key]) != _shape_defining(self.setup[key]):
                raise CheckpointMismatch(
                    f"the checkpoints in {self.store.directory} were written for {key} {saved[key]}, "
                    f"this learner runs {self.setup[key]}: pass --fresh, or another --logdir"
                )

    def restore(self) -> Restored | None:
        restored = self.store.restore_latest(self.agent.checkpointed(), self._check)
        if restored is None:
            return None
        self.metrics.restore(restored.state["metrics"])
        if restored.arrays is not None:
            try:
                self.trainer.restore_replay(restored.arrays)
            except (KeyError, ValueError) as error:
                log.warning("the replay in %s does not fit this learner (%s); starting with an empty one",
                            restored.path, error)
        replay = f", replay of {self.trainer.replay_size():,} sequences" if restored.arrays is not None else ""
        log.info("restored %s: %d frames, %d learner steps%s", restored.path.name, self.metrics.frames,
                 self.metrics.learner_steps, replay)
        return restored

    def save(self) -> Path | None:
        """Saves one checkpoint; a failure (a full disk, say) is logged and training goes on."""
        started = time.monotonic()
        try:
            with self.trainer.lock:
                state = {"setup": self.setup, "metrics": self.metrics.state()}
                arrays = self.trainer.replay_arrays() if self.with_replay else None
                path = self.store.save(self.agent.checkpointed(), state, self.metrics.frames, arrays)
        except (OSError, tf.errors.OpError) as error:
            log.error("checkpoint not saved (training goes on): %s", error)
            return None
        log.info("saved %s in %.1f s", path.name, time.monotonic() - started)
        return path
