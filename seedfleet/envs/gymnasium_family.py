"""The gymnasium family: any id gymnasium knows with discrete or bounded Box actions, as
gymnasium's own synchronous vector env (vectors, images, classic control such as Pendulum,
seedfleet's MovingDot check env). It claims every id, so the registry asks it last."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

from seedfleet.envs.family import Bounds, EnvFamily, StepBatch, batch_of, checked_actions
from seedfleet.envs.moving_dot import MovingDot
from seedfleet.errors import UsageError

MOVING_DOT_IDS = {"seedfleet/MovingDot-v0": {}, "seedfleet/MovingDotRGB-v0": {"channels": 3}}
for _env_id, _kwargs in MOVING_DOT_IDS.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=MovingDot, kwargs=_kwargs)


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """gymnasium's registration of `env_id`; UsageError if there is none."""
    try:
        return gym.spec(env_id)
    except gym.error.Error as error:  # NameNotFound, VersionNotFound, DeprecatedEnv, ...
        raise UsageError(f"env id {env_id!r}: {error}") from None


class GymnasiumEnvs:
    """K gymnasium envs stepped together (`VectorEnvs`, seedfleet/envs/family.py)."""

    frame_skip = 1

    def __init__(self, env_id: str, num_envs: int, render_mode: str | None = None, vectorization_mode: str = "sync",
                 vector_kwargs: dict | None = None):
        """`vectorization_mode` and `vector_kwargs` as gymnasium's make_vec takes them (sync: in this process)."""
        env_spec(env_id)  # an unknown id is a UsageError
        if render_mode == "rgb_array":
            # Pictures drawn off screen need no display. Without this, SDL (pygame, which the
            # classic-control envs draw with) looks for one and prints "XDG_RUNTIME_DIR is
            # invalid" on a headless machine. A driver the user chose stays.
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        self.env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                                vector_kwargs=vector_kwargs, render_mode=render_mode)
        self.num_envs = self.group_size = num_envs
        self.ready = np.arange(num_envs)
        self.observation_shape = tuple(self.env.single_observation_space.shape)
        self.observation_dtype = np.dtype(self.env.single_observation_space.dtype)
        self.actions = checked_actions(env_id, self.env.single_action_space, self.env.close)
        self._done = np.zeros(num_envs, bool)

    def reset(self, seeds: list[int] | None = None) -> StepBatch:
        obs, _ = self.env.reset(seed=None if seeds is None else [int(s) for s in seeds])
        self._done[:] = False
        zeros = np.zeros(self.num_envs, bool)
        return StepBatch(batch_of(obs, self.observation_shape),
                         np.zeros(self.num_envs, np.float32), zeros, zeros, ~zeros)

    def step(self, actions: np.ndarray) -> StepBatch:
        obs, rewards, terminated, truncated, _ = self.env.step(actions)
        first = self._done.copy()  # these envs were autoreset by this step
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        self._done[:] = terminated | truncated
        return StepBatch(batch_of(obs, self.observation_shape),
                         np.asarray(rewards, np.float32), terminated, truncated, first)

    def render_first(self, observations: np.ndarray) -> np.ndarray:
        return self.env.envs[0].render()

    def close(self) -> None:
        self.env.close()


class GymnasiumFamily(EnvFamily):
    name = "gymnasium"

    def claims(self, env_id: str) -> bool:
        return True  # the fallback: an id gymnasium does not know fails in `make`, with gymnasium's reason

    def make(self, env_id: str, settings: None, num_envs: int, threads: int = 0, groups: int = 1,
             render_mode: str | None = None) -> GymnasiumEnvs:
        if groups != 1:
            raise UsageError(f"{env_id}: env groups need a family that steps them (ALE); gymnasium's step together")
        return GymnasiumEnvs(env_id, num_envs, render_mode)

    def observation_bounds(self, env_id: str) -> Bounds | None:
        """(low, high) of float observations where the space bounds any of them; None otherwise
        (integer and bool observations are bounded by their dtype)."""
        env = gym.make(env_id)
        try:
            space = env.observation_space
        finally:
            env.close()
        if not isinstance(space, gym.spaces.Box) or not np.issubdtype(space.dtype, np.floating):
            return None
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        return (low, high) if np.isfinite(low).any() or np.isfinite(high).any() else None
