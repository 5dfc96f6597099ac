"""What every env family offers: the vector envs an actor steps, and the family record.

A family (gymnasium, ALE, MinAtar, ...) claims env ids, builds K envs of one id as one
`VectorEnvs`, bounds their observations, and describes them to actors: the `EnvConfig`
the learner sends names the family and carries the family's own settings (a frozen
dataclass; ALE's travel in the proto's `atari` message, any other family's as JSON), so
an actor builds exactly the envs the learner probed.

Every family uses gymnasium's NEXT_STEP autoreset: the step after a terminated or
truncated one ignores its action and returns the reset observation (reward 0).
`StepBatch` makes that explicit with a `first` flag per env, so the learner never joins
a transition across an episode boundary.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from seedfleet.actions import ActionSpec, action_spec_of
from seedfleet.errors import UsageError
from seedfleet.settings import parse_setting
from seedfleet.v1 import actor_learner_pb2 as pb

Bounds = tuple[np.ndarray, np.ndarray]  # (low, high) of float observations


@dataclass
class StepBatch:
    """What K envs return in one step, ready for the wire."""

    observations: np.ndarray  # [K, *obs_shape]
    rewards: np.ndarray  # [K] float32
    terminated: np.ndarray  # [K] bool
    truncated: np.ndarray  # [K] bool
    first: np.ndarray  # [K] bool: the observation opens an episode
    life_lost: np.ndarray = field(default=None)  # [K] bool, Atari: the transition lost a life; default none

    def __post_init__(self) -> None:
        if self.life_lost is None:
            self.life_lost = np.zeros(len(self.rewards), bool)


def batch_of(observations: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A vector env's observations as one C-contiguous [K, *shape] array, as the wire sends them."""
    return np.ascontiguousarray(observations.reshape(len(observations), *shape))


class VectorEnvs(Protocol):
    """K envs of one id with explicit episode starts, stepped together or in groups.

    `step(actions)` acts in the envs of `ready` (indices 0..K-1) and returns the next
    group that is ready; a family that steps all K together keeps `ready` = 0..K-1.
    """

    num_envs: int
    group_size: int  # envs per `step` (num_envs unless the family steps groups)
    ready: np.ndarray  # the envs the last `reset` or `step` returned
    observation_shape: tuple[int, ...]
    observation_dtype: np.dtype
    actions: ActionSpec  # discrete or Box (seedfleet/actions.py)
    frame_skip: int  # emulator frames per env step (1 for most families)

    def reset(self, seeds: list[int] | None = None) -> StepBatch: ...

    def step(self, actions: np.ndarray) -> StepBatch: ...

    def render_first(self, observations: np.ndarray) -> np.ndarray:
        """Env 0's picture for a video: its own render, or the observation where it has none."""
        ...

    def close(self) -> None: ...


class EnvFamily:
    """One family of envs; subclasses set `name` and `make`, and whatever else differs.

    `settings_class` is the family's frozen dataclass of settings read off an id on the
    learner and sent to actors (None: the id says everything). `steps_in_groups`: its
    vector env can step groups of envs asynchronously (`--env-groups`).
    """

    name: ClassVar[str]
    settings_class: ClassVar[type | None] = None
    steps_in_groups: ClassVar[bool] = False

    def claims(self, env_id: str) -> bool:
        """Whether this family makes `env_id` (the registry asks the families in order)."""
        raise NotImplementedError

    def settings(self, env_id: str) -> Any:
        """The settings actors need beyond the id (learner side); None without a settings class."""
        return None

    def make(self, env_id: str, settings: Any, num_envs: int, threads: int = 0, groups: int = 1,
             render_mode: str | None = None) -> VectorEnvs:
        """`num_envs` envs of `env_id` built with `settings`; `threads` and `groups` for families that use them."""
        raise NotImplementedError

    def observation_bounds(self, env_id: str) -> Bounds | None:
        """(low, high) of float observations where the space bounds any; None when the dtype bounds them."""
        return None

    def settings_with(self, env_id: str, options: str = "") -> Any:
        """The id's settings with `options` ("name=value,...", the learner's --env-options) set over
        them, each typed as the settings field it names; UsageError for a name the family's
        settings lack, a value of another type, or options for a family without settings."""
        settings = self.settings(env_id)
        given = parse_options(options)
        if not given:
            return settings
        if settings is None:
            raise UsageError(f"--env-options {options!r}: the {self.name} family takes no options")
        fields = {f.name: f for f in dataclasses.fields(settings)}
        unknown = sorted(set(given) - set(fields))
        if unknown:
            raise UsageError(f"--env-options: {', '.join(unknown)} is no setting of the {self.name} family "
                             f"(its settings: {', '.join(fields)})")
        return dataclasses.replace(settings, **{name: typed_option(name, raw, getattr(settings, name))
                                                for name, raw in given.items()})

    # What the learner tells actors, and what they read back.

    def describe(self, env_id: str, seed: int, options: str = "") -> tuple[pb.EnvConfig, int]:
        """The EnvConfig actors receive, read off one probe env made here with `options` set
        over the id's settings (`settings_with`); and its frame skip."""
        settings = self.settings_with(env_id, options)
        probe = self.make(env_id, settings, 1, threads=1)
        try:
            config = pb.EnvConfig(env_id=env_id, seed=seed, family=self.name,
                                  observation=pb.ObservationSpec(dtype=probe.observation_dtype.name,
                                                                 shape=list(probe.observation_shape)))
            probe.actions.to_proto(config)
            if settings is not None:
                self.settings_to_proto(settings, config)
            return config, probe.frame_skip
        finally:
            probe.close()

    def settings_to_proto(self, settings: Any, config: pb.EnvConfig) -> None:
        config.settings_json = json.dumps(dataclasses.asdict(settings), sort_keys=True)

    def settings_from_proto(self, config: pb.EnvConfig) -> Any:
        """The settings an EnvConfig carries; UsageError if they are not this family's."""
        if self.settings_class is None:
            return None
        try:
            return self.settings_class(**json.loads(config.settings_json))
        except (ValueError, TypeError) as error:
            raise UsageError(f"{self.name} settings from the learner do not fit this actor: {error}") from None


def parse_options(options: str) -> dict[str, str]:
    """`name=value,name=value` as a dict; UsageError for a part without `=`."""
    parts = [part.strip() for part in options.split(",") if part.strip()]
    bad = [part for part in parts if "=" not in part]
    if bad:
        raise UsageError(f"--env-options: {', '.join(bad)} is not NAME=VALUE")
    return dict(part.split("=", 1) for part in parts)


def typed_option(name: str, raw: str, like: object) -> object:
    """`raw` as a value of `like`'s type, as a flag's value is read; UsageError otherwise."""
    try:
        return parse_setting(raw, like)
    except ValueError:
        raise UsageError(f"--env-options {name}={raw}: a {type(like).__name__} is expected") from None


def checked_actions(env_id: str, space: Any, close: Any) -> ActionSpec:
    """The ActionSpec of a gymnasium action space; UsageError (after `close()`) for one that
    no kind of seedfleet/actions.py covers."""
    try:
        return action_spec_of(env_id, space)
    except UsageError:
        close()
        raise
