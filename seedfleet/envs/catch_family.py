"""The Catch family, bsuite's Catch (Osband et al., 2020) stepped as one NumPy batch: the
example of a family that is not gymnasium's and carries settings of its own.

A ball starts in a random column of the top row and falls one row per step; the agent
moves a paddle along the bottom row (action 0: left, 1: stay, 2: right). When the ball
reaches the bottom the episode ends with reward +1 if the paddle is under it, else -1.
Observations are the [rows, columns] float32 board, 1 at the ball and the paddle.
Uniform random play scores about -0.6 (the ball lands in one of 5 columns); the optimal
return is +1.

Ids: "catch/Catch-v0" (10 rows x 5 columns, bsuite's) or "catch/Catch-<R>x<C>-v0". The
board size is read off the id on the learner and sent to actors as settings. Each env draws
its balls from its own seed alone (episode k of the env seeded s: splitmix64(s, k)), so an
env's episodes do not depend on which other envs share its actor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from seedfleet.actions import ActionSpec
from seedfleet.envs.family import Bounds, EnvFamily, StepBatch
from seedfleet.errors import UsageError

ID = re.compile(r"catch/Catch(?:-(\d+)x(\d+))?-v0")
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Steele, Lea and Flood's 64-bit mix (SplittableRandom), on a uint64 array."""
    with np.errstate(over="ignore"):
        z = x + GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class CatchSettings:
    rows: int = 10
    columns: int = 5


class CatchEnvs:
    """K Catch boards stepped together (`VectorEnvs`, seedfleet/envs/family.py)."""

    frame_skip = 1
    actions = ActionSpec.discrete(3)  # left, stay, right
    observation_dtype = np.dtype(np.float32)

    def __init__(self, settings: CatchSettings, num_envs: int):
        if settings.rows < 2 or settings.columns < 1:
            raise UsageError(f"Catch needs at least 2 rows and 1 column, got {settings.rows}x{settings.columns}")
        self.settings = settings
        self.num_envs = self.group_size = num_envs
        self.ready = np.arange(num_envs)
        self.observation_shape = (settings.rows, settings.columns)
        self._seeds = splitmix64(np.random.SeedSequence().generate_state(num_envs, np.uint64))  # until reset(seeds)
        self._episodes = np.zeros(num_envs, np.uint64)
        self._ball_row = np.zeros(num_envs, np.int64)
        self._ball_column = np.zeros(num_envs, np.int64)
        self._paddle = np.zeros(num_envs, np.int64)
        self._done = np.zeros(num_envs, bool)
        self._envs = np.arange(num_envs)

    def _start(self, envs: np.ndarray) -> None:
        self._ball_row[envs] = 0
        with np.errstate(over="ignore"):
            draws = splitmix64(self._seeds[envs] ^ (self._episodes[envs] * GOLDEN))
        self._ball_column[envs] = (draws % np.uint64(self.settings.columns)).astype(np.int64)
        self._episodes[envs] += np.uint64(1)
        self._paddle[envs] = self.settings.columns // 2

    def _boards(self) -> np.ndarray:
        boards = np.zeros((self.num_envs, *self.observation_shape), np.float32)
        boards[self._envs, self._ball_row, self._ball_column] = 1.0
        boards[self._envs, -1, self._paddle] = 1.0
        return boards

    def reset(self, seeds: list[int] | None = None) -> StepBatch:
        if seeds is not None:
            self._seeds = np.asarray(seeds, np.int64).astype(np.uint64)
            self._episodes[:] = 0
        self._start(self._envs)
        self._done[:] = False
        zeros = np.zeros(self.num_envs, bool)
        return StepBatch(self._boards(), np.zeros(self.num_envs, np.float32), zeros, zeros, ~zeros)

    def step(self, actions: np.ndarray) -> StepBatch:
        first = self._done.copy()  # envs whose last step ended an episode start over, their action ignored
        self._start(np.flatnonzero(first))
        moving = ~first
        shift = np.clip(np.asarray(actions, np.int64), 0, 2) - 1
        self._paddle[moving] = np.clip(self._paddle[moving] + shift[moving], 0, self.settings.columns - 1)
        self._ball_row[moving] += 1
        landed = moving & (self._ball_row == self.settings.rows - 1)
        rewards = np.where(landed, np.where(self._paddle == self._ball_column, 1.0, -1.0), 0.0).astype(np.float32)
        self._done[:] = landed
        return StepBatch(self._boards(), rewards, landed.copy(), np.zeros(self.num_envs, bool), first)

    def render_first(self, observations: np.ndarray) -> np.ndarray:
        return observations[0]

    def close(self) -> None:
        pass


class CatchFamily(EnvFamily):
    name = "catch"
    settings_class = CatchSettings

    def claims(self, env_id: str) -> bool:
        return ID.fullmatch(env_id) is not None

    def settings(self, env_id: str) -> CatchSettings:
        rows, columns = ID.fullmatch(env_id).groups()
        return CatchSettings(int(rows), int(columns)) if rows else CatchSettings()

    def make(self, env_id: str, settings: CatchSettings, num_envs: int, threads: int = 0, groups: int = 1,
             render_mode: str | None = None) -> CatchEnvs:
        return CatchEnvs(settings, num_envs)

    def observation_bounds(self, env_id: str) -> Bounds:
        shape = (self.settings(env_id).rows, self.settings(env_id).columns)
        return np.zeros(shape), np.ones(shape)
