"""The ALE family: gymnasium's ALE ids ("ALE/Pong-v5", "PongNoFrameskip-v4", ...) run by
ALE's C++ vector env with DeepMind-style preprocessing, stepped in groups if asked."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np

from seedfleet.envs.family import EnvFamily, StepBatch, batch_of, checked_actions
from seedfleet.envs.gymnasium_family import env_spec
from seedfleet.errors import UsageError
from seedfleet.v1 import actor_learner_pb2 as pb

gym.register_envs(ale_py)


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


class AleEnvs:
    """K Atari envs in ALE's C++ pool (`VectorEnvs`, seedfleet/envs/family.py).

    With `groups` > 1 the pool steps groups of K / groups envs asynchronously: `step`
    hands the last returned group its actions and returns the next group that is ready,
    which lets a group step while another group's actions are computed. Lives are read
    to flag each transition that lost one (`life_lost`).
    """

    def __init__(self, settings: AtariSettings, num_envs: int, threads: int = 0, groups: int = 1):
        if groups < 1 or num_envs % groups:
            raise UsageError(f"{num_envs} envs do not split into {groups} equal groups")
        self.num_envs = num_envs
        self.group_size = num_envs // groups
        self.ready = np.arange(self.group_size)
        self.frame_skip = settings.frame_skip
        self.env = ale_py.AtariVectorEnv(
            settings.game, num_envs, batch_size=self.group_size, num_threads=threads, stack_num=1,
            img_height=settings.image_size, img_width=settings.image_size, frameskip=settings.frame_skip,
            noop_max=settings.noop_max, repeat_action_probability=settings.repeat_action_probability,
            full_action_space=settings.full_action_space, max_num_frames_per_episode=settings.max_frames_per_episode,
            reward_clipping=False,
        )
        self.observation_shape = (settings.image_size, settings.image_size)
        self.observation_dtype = np.dtype(self.env.single_observation_space.dtype)
        self.actions = checked_actions(settings.game, self.env.single_action_space, self.env.close)
        self._done = np.zeros(num_envs, bool)
        self._lives = np.zeros(num_envs, np.int64)

    def reset(self, seeds: list[int] | None = None) -> StepBatch:
        """Resets every env; the first ready group comes back, marked `first`."""
        obs, info = self.env.reset(seed=None if seeds is None else np.asarray(seeds, np.int64))
        self.ready = np.asarray(info["env_id"], np.int64)
        self._done[:] = True  # the other groups' reset observations arrive with their next step
        self._done[self.ready] = False
        self._lives[self.ready] = info["lives"]
        n = len(self.ready)
        zeros = np.zeros(n, bool)
        return StepBatch(batch_of(obs, self.observation_shape),
                         np.zeros(n, np.float32), zeros, zeros, ~zeros)

    def step(self, actions: np.ndarray) -> StepBatch:
        if self.group_size < self.num_envs:
            self.env.send(actions)
            obs, rewards, terminated, truncated, info = self.env.recv()
        else:
            obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.ready = np.asarray(info["env_id"], np.int64)
        first = self._done[self.ready]  # these envs were autoreset by this step
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        self._done[self.ready] = terminated | truncated
        lives = np.asarray(info["lives"], np.int64)
        life_lost = (lives < self._lives[self.ready]) & ~first
        self._lives[self.ready] = lives
        return StepBatch(batch_of(obs, self.observation_shape),
                         np.asarray(rewards, np.float32), terminated, truncated, first, life_lost)

    def render_first(self, observations: np.ndarray) -> np.ndarray:
        return observations[0]  # the vector env does not render: the 84x84 frame the agent sees

    def close(self) -> None:
        self.env.close()


class AleFamily(EnvFamily):
    name = "ale"
    settings_class = AtariSettings
    steps_in_groups = True

    def claims(self, env_id: str) -> bool:
        try:
            return "ale_py" in str(gym.spec(env_id).entry_point)
        except gym.error.Error:
            return False

    def settings(self, env_id: str) -> AtariSettings:
        """The preprocessing for an ALE id, keeping the id's own semantics."""
        kwargs = env_spec(env_id).kwargs
        return AtariSettings(
            game=kwargs["game"],
            repeat_action_probability=float(kwargs.get("repeat_action_probability", 0.25)),
            full_action_space=bool(kwargs.get("full_action_space", False)),
            max_frames_per_episode=int(kwargs.get("max_num_frames_per_episode", 108_000)),
        )

    def make(self, env_id: str, settings: AtariSettings, num_envs: int, threads: int = 0, groups: int = 1,
             render_mode: str | None = None) -> AleEnvs:
        return AleEnvs(settings, num_envs, threads, groups)

    def settings_to_proto(self, settings: AtariSettings, config: pb.EnvConfig) -> None:
        config.atari.CopyFrom(pb.AtariPreprocessing(**dataclasses.asdict(settings)))

    def settings_from_proto(self, config: pb.EnvConfig) -> AtariSettings:
        if not config.HasField("atari"):
            raise UsageError(f"the learner's config for {config.env_id} carries no Atari preprocessing")
        return AtariSettings(**{f.name: getattr(config.atari, f.name) for f in dataclasses.fields(AtariSettings)})
