"""What an env's actions are, as the learner and its actors agree on them: `ActionSpec`.

Two kinds, each named once here (`KINDS`), so that the rest of the system reads the kind
instead of testing spaces:

  discrete  `n` actions, int32 indices, one per env;
  box       float32 vectors of `shape` (D,) within [low, high] (gymnasium's Box), one per env.

The learner sends Box actions in the env's units as its policy drew them; the actor checks
them (shape, finite values) and clips them to the bounds before the env steps.
TensorFlow-free: the CLI, the actors and the wire read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seedfleet.errors import UsageError
from seedfleet.v1 import actor_learner_pb2 as pb

DISCRETE, BOX = "discrete", "box"
KINDS = (DISCRETE, BOX)


@dataclass(frozen=True)
class ActionSpec:
    """`kind` DISCRETE with `num_actions`, or BOX with `shape`; `low` and `high` bound one action
    (float32 of `shape`; for indices 0 and n - 1, so that clipping serves both kinds)."""

    kind: str
    num_actions: int = 0
    shape: tuple[int, ...] = ()
    low: np.ndarray = field(default=None, compare=False)
    high: np.ndarray = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"action kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.kind == DISCRETE:
            object.__setattr__(self, "low", np.zeros((), self.dtype))
            object.__setattr__(self, "high", np.asarray(self.num_actions - 1, self.dtype))
        for name in ("low", "high"):
            bound = np.broadcast_to(np.asarray(getattr(self, name), self.dtype), self.row_shape)
            object.__setattr__(self, name, np.ascontiguousarray(bound))

    @classmethod
    def discrete(cls, num_actions: int) -> ActionSpec:
        return cls(DISCRETE, num_actions=int(num_actions))

    @classmethod
    def box(cls, shape: tuple[int, ...], low: Any, high: Any) -> ActionSpec:
        return cls(BOX, shape=tuple(int(n) for n in shape), low=low, high=high)

    @property
    def size(self) -> int:
        """Discrete: the number of actions; Box: the number of values in one action."""
        return self.num_actions if self.kind == DISCRETE else math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """How one env's action is held and sent (little-endian): int32 indices or float32 values."""
        return np.dtype("<i4") if self.kind == DISCRETE else np.dtype("<f4")

    @property
    def row_shape(self) -> tuple[int, ...]:
        """One env's action: () for an index, `shape` for a Box."""
        return () if self.kind == DISCRETE else self.shape

    def invalid(self, actions: np.ndarray) -> np.ndarray:
        """[K] bool: the actions no env may take, indices outside [0, n) or values not finite
        (a Box's finite values are clipped to its bounds, not refused)."""
        if self.kind == DISCRETE:
            return (actions < 0) | (actions >= self.num_actions)
        return ~np.isfinite(actions.reshape(len(actions), -1)).all(axis=1)

    def bounded(self, actions: np.ndarray) -> np.ndarray:
        """Actions clipped to the bounds, as an env may take them (valid indices stay as they are)."""
        return np.clip(actions, self.low, self.high)

    def random(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` actions drawn uniformly: indices, or values within the bounds."""
        if self.kind == DISCRETE:
            return rng.integers(self.num_actions, size=count).astype(self.dtype)
        return rng.uniform(self.low, self.high, size=(count, *self.shape)).astype(self.dtype)

    def describe(self) -> str:
        if self.kind == DISCRETE:
            return f"{self.num_actions} actions"
        return f"Box{list(self.shape)} in [{self.low.min():g}, {self.high.max():g}]"

    @classmethod
    def from_proto(cls, config: pb.EnvConfig) -> ActionSpec:
        """The actions an EnvConfig names: box_actions where set, else num_actions."""
        if not config.HasField("box_actions"):
            return cls.discrete(config.num_actions)
        box = config.box_actions
        shape = tuple(box.shape)
        if not len(box.low) == len(box.high) == math.prod(shape):
            raise ValueError(f"box_actions: {len(box.low)} low and {len(box.high)} high bounds for shape {list(shape)}")
        return cls.box(shape, np.reshape(box.low, shape), np.reshape(box.high, shape))

    def to_proto(self, config: pb.EnvConfig) -> None:
        """Sets `config`'s actions: num_actions, or box_actions for a Box."""
        if self.kind == BOX:
            config.box_actions.CopyFrom(pb.BoxActions(shape=list(self.shape), low=self.low.ravel().tolist(),
                                                      high=self.high.ravel().tolist()))
        else:
            config.num_actions = self.num_actions

    def equals(self, other: ActionSpec) -> bool:
        """Same kind, count, shape and bounds (what an actor's envs must match)."""
        return ((self.kind, self.num_actions, self.shape) == (other.kind, other.num_actions, other.shape)
                and np.array_equal(self.low, other.low) and np.array_equal(self.high, other.high))


def action_spec_of(env_id: str, space: Any) -> ActionSpec:
    """The ActionSpec of a gymnasium action space; UsageError for a space no kind covers
    (a Box needs finite bounds: the actor clips to them)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if space.start != 0:
            raise UsageError(f"{env_id}: discrete actions must start at 0, got {space}")
        return ActionSpec.discrete(int(space.n))
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            raise UsageError(f"{env_id}: a Box of actions needs finite bounds to clip to, got {space}")
        if len(space.shape) != 1:
            raise UsageError(f"{env_id}: a Box of actions must be one vector, got shape {space.shape}")
        return ActionSpec.box(space.shape, space.low, space.high)
    raise UsageError(f"{env_id}: seedfleet acts in Discrete spaces and float Box spaces, got {space}")
