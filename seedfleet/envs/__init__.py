"""Env families behind one interface (family.py), picked by id in one registry
(registry.py): gymnasium, MuJoCo, ALE's C++ vector env, MinAtar, Catch."""

from seedfleet.envs.family import Bounds, EnvFamily, StepBatch, VectorEnvs
from seedfleet.envs.registry import (
    FAMILIES,
    check_env,
    describe,
    family_for,
    family_named,
    family_of,
    make_envs,
    make_envs_from,
    observation_bounds,
)

__all__ = ["FAMILIES", "Bounds", "EnvFamily", "StepBatch", "VectorEnvs", "check_env", "describe", "family_for",
           "family_named", "family_of", "make_envs", "make_envs_from", "observation_bounds"]
