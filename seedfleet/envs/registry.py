"""Every env family, in the order they are asked to claim an id. Adding one is one module
and one line here; nothing outside seedfleet/envs picks a family by anything but these."""

from __future__ import annotations

from seedfleet.actions import ActionSpec
from seedfleet.envs.ale_family import AleFamily
from seedfleet.envs.catch_family import CatchFamily
from seedfleet.envs.family import Bounds, EnvFamily, VectorEnvs
from seedfleet.envs.gymnasium_family import GymnasiumFamily
from seedfleet.envs.minatar_family import MinAtarFamily
from seedfleet.envs.mujoco_family import MujocoFamily
from seedfleet.errors import UsageError
from seedfleet.v1 import actor_learner_pb2 as pb

FAMILIES: tuple[EnvFamily, ...] = (
    AleFamily(),
    MinAtarFamily(),
    CatchFamily(),
    MujocoFamily(),
    GymnasiumFamily(),  # last: it claims every id
)


def family_for(env_id: str) -> EnvFamily:
    """The first family that claims `env_id`."""
    return next(family for family in FAMILIES if family.claims(env_id))


def family_named(name: str) -> EnvFamily:
    for family in FAMILIES:
        if family.name == name:
            return family
    raise UsageError(f"env family {name!r} is not known here (known: {', '.join(f.name for f in FAMILIES)})")


def family_of(config: pb.EnvConfig) -> EnvFamily:
    """The family an EnvConfig names; for one from a learner older than families, the id's."""
    return family_named(config.family) if config.family else family_for(config.env_id)


def make_envs(env_id: str, num_envs: int, threads: int = 0, groups: int = 1,
              render_mode: str | None = None) -> VectorEnvs:
    """`num_envs` envs of `env_id` as an actor of its family builds them (groups only where
    the family steps groups: elsewhere they step together)."""
    family = family_for(env_id)
    return family.make(env_id, family.settings(env_id), num_envs, threads,
                       groups if family.steps_in_groups else 1, render_mode)


def make_envs_from(config: pb.EnvConfig, num_envs: int, threads: int = 0, groups: int = 1,
                   render_mode: str | None = None) -> VectorEnvs:
    """The envs a learner's EnvConfig asks an actor for (its family's settings included)."""
    family = family_of(config)
    return family.make(config.env_id, family.settings_from_proto(config), num_envs, threads,
                       groups if family.steps_in_groups else 1, render_mode)


def describe(env_id: str, seed: int, options: str = "") -> tuple[pb.EnvConfig, int]:
    """The EnvConfig a learner sends its actors for `env_id` with its family's `options`
    ("name=value,...", --env-options), and frames per env step."""
    return family_for(env_id).describe(env_id, seed, options)


def check_env(env_id: str, options: str = "") -> ActionSpec:
    """The env's actions; UsageError for an id no family makes, options its family lacks, or
    spaces seedfleet does not serve: a probe env is made and closed, as the learner's
    `describe` makes one (no TensorFlow needed)."""
    return ActionSpec.from_proto(describe(env_id, 0, options)[0])


def observation_bounds(env_id: str) -> Bounds | None:
    return family_for(env_id).observation_bounds(env_id)
