"""Vector environments for actors: ALE's C++ vector env for Atari, gymnasium's otherwise.

Both use gymnasium's NEXT_STEP autoreset: the step after a terminated or truncated
one ignores its action and returns the reset observation (reward 0). `EnvBatch`
makes that explicit with a `first` flag per env, so the learner never joins a
transition across an episode boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ale_py
import gymnasium as gym
import numpy as np

from seedfleet import extra_envs
from seedfleet.errors import UsageError

gym.register_envs(ale_py)
extra_envs.register()


@dataclass(frozen=True)
class AtariSettings:
    """DeepMind-style preprocessing, done in C++ by `ale_py.AtariVectorEnv`.

    The id's own semantics are kept (v5: sticky actions with p = 0.25, minimal action
    set, 108,000 frames at most). Frames are 84x84 grey, max-pooled over the last two
    of `frame_skip` frames, one frame per step: the learner stacks them. Rewards are
    not clipped here, so returns are game scores; the learner clips for training.
    """

    game: str
    repeat_action_probability: float
    full_action_space: bool
    max_frames_per_episode: int
    frame_skip: int = 4
    image_size: int = 84
    noop_max: int = 30


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """gymnasium's registration of `env_id`; UsageError if there is none."""
    try:
        return gym.spec(env_id)
    except gym.error.Error as error:  # NameNotFound, VersionNotFound, DeprecatedEnv, ...
        raise UsageError(f"env id {env_id!r}: {error}") from None


def atari_settings(env_id: str) -> AtariSettings | None:
    """The preprocessing for an ALE id such as "ALE/Pong-v5", or None for other ids."""
    spec = env_spec(env_id)
    if "ale_py" not in str(spec.entry_point):
        return None
    kwargs = spec.kwargs
    return AtariSettings(
        game=kwargs["game"],
        repeat_action_probability=float(kwargs.get("repeat_action_probability", 0.25)),
        full_action_space=bool(kwargs.get("full_action_space", False)),
        max_frames_per_episode=int(kwargs.get("max_num_frames_per_episode", 108_000)),
    )


def observation_bounds(env_id: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) of a non-Atari env's float observations, where its space bounds any of
    them; None otherwise (Atari frames and integer or bool observations are bounded by their
    dtype). The learner refuses observations outside them."""
    if atari_settings(env_id) is not None:
        return None
    env = gym.make(env_id)
    try:
        space = env.observation_space
    finally:
        env.close()
    if not isinstance(space, gym.spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        return None
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    return (low, high) if np.isfinite(low).any() or np.isfinite(high).any() else None


@dataclass
class StepBatch:
    """What K envs return in one step, ready for the wire."""

    observations: np.ndarray  # [K, *obs_shape]
    rewards: np.ndarray  # [K] float32
    terminated: np.ndarray  # [K] bool
    truncated: np.ndarray  # [K] bool
    first: np.ndarray  # [K] bool: the observation opens an episode
    life_lost: np.ndarray = field(default=None)  # [K] bool: the transition lost a life (Atari); default none

    def __post_init__(self) -> None:
        if self.life_lost is None:
            self.life_lost = np.zeros(len(self.rewards), bool)


class EnvBatch:
    """K envs with explicit episode starts, stepped together or in groups.

    With `groups` > 1 (Atari only) the C++ pool steps groups of K / groups envs
    asynchronously: `step(actions)` hands the last returned group its actions and
    returns the next group that is ready, which lets a group step while another
    group's actions are computed. `ready` holds the indices (0..K-1) of the envs
    the last `reset` or `step` returned. `render_mode` goes to gymnasium's envs
    (seedfleet eval's videos); the Atari vector env does not render.
    """

    def __init__(self, env_id: str, num_envs: int, atari: AtariSettings | None, num_threads: int = 0,
                 groups: int = 1, render_mode: str | None = None):
        if groups < 1 or num_envs % groups:
            raise UsageError(f"{num_envs} envs do not split into {groups} equal groups")
        if groups > 1 and atari is None:
            raise UsageError("env groups need the Atari vector env; other envs step in lockstep")
        self.num_envs = num_envs
        self.group_size = num_envs // groups
        self.ready = np.arange(self.group_size)
        self.is_atari = atari is not None
        self.frame_skip = atari.frame_skip if atari else 1
        if atari is not None:
            self.env = ale_py.AtariVectorEnv(
                atari.game,
                num_envs,
                batch_size=self.group_size,
                num_threads=num_threads,
                stack_num=1,
                img_height=atari.image_size,
                img_width=atari.image_size,
                frameskip=atari.frame_skip,
                noop_max=atari.noop_max,
                repeat_action_probability=atari.repeat_action_probability,
                full_action_space=atari.full_action_space,
                max_num_frames_per_episode=atari.max_frames_per_episode,
                reward_clipping=False,
            )
            self.observation_shape = (atari.image_size, atari.image_size)
        else:
            env_spec(env_id)  # an unknown id is a UsageError
            self.env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", render_mode=render_mode)
            self.observation_shape = tuple(self.env.single_observation_space.shape)
        space = self.env.single_action_space
        if not isinstance(space, gym.spaces.Discrete):
            self.env.close()
            raise UsageError(f"{env_id}: seedfleet needs discrete actions, got {space}")
        self.num_actions = int(space.n)
        self.observation_dtype = np.dtype(self.env.single_observation_space.dtype)
        self._done = np.zeros(num_envs, bool)
        self._lives = np.zeros(num_envs, np.int64)  # Atari: lives left, to flag life losses

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(obs.reshape(len(obs), *self.observation_shape))

    def _ready_from(self, info: dict) -> np.ndarray:
        return np.asarray(info["env_id"], np.int64) if self.is_atari else np.arange(self.num_envs)

    def reset(self, seeds: list[int] | None = None) -> StepBatch:
        """Resets every env; the first ready group comes back, marked `first`."""
        if seeds is not None:  # ALE takes an array of seeds, gymnasium's vector envs a list
            seeds = np.asarray(seeds, np.int64) if self.is_atari else [int(s) for s in seeds]
        obs, info = self.env.reset(seed=seeds)
        self.ready = self._ready_from(info)
        self._done[:] = True  # the other groups' reset observations arrive with their next step
        self._done[self.ready] = False
        if self.is_atari:
            self._lives[self.ready] = info["lives"]
        n = len(self.ready)
        zeros = np.zeros(n, bool)
        return StepBatch(self._obs(obs), np.zeros(n, np.float32), zeros, zeros, ~zeros)

    def step(self, actions: np.ndarray) -> StepBatch:
        """Acts in the envs of `ready`; returns the next ready group (`ready` moves on)."""
        if self.group_size < self.num_envs:
            self.env.send(actions)
            obs, rewards, terminated, truncated, info = self.env.recv()
        else:
            obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.ready = self._ready_from(info)
        first = self._done[self.ready]  # these envs were autoreset by this step
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        self._done[self.ready] = terminated | truncated
        life_lost = None
        if self.is_atari:
            lives = np.asarray(info["lives"], np.int64)
            life_lost = (lives < self._lives[self.ready]) & ~first
            self._lives[self.ready] = lives
        return StepBatch(self._obs(obs), np.asarray(rewards, np.float32), terminated, truncated, first, life_lost)

    def close(self) -> None:
        self.env.close()
