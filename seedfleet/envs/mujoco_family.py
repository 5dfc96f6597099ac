"""The MuJoCo family: gymnasium's MuJoCo ids (HalfCheetah, Hopper, Walker2d, Ant, Humanoid and
the rest), continuous control with Box actions.

They step as gymnasium's own synchronous vector env, as the gymnasium family's envs do; what
differs is that observations travel as float32 (MuJoCo returns float64: half the bytes on the
wire, and float32 is what the network computes in), and that pictures for `seedfleet eval
--video` come from MuJoCo's offscreen renderer, which needs OpenGL without a display: EGL
(Debian's libegl1 and libgl1-mesa-dri) or OSMesa (libosmesa6), chosen with MUJOCO_GL. The
`mujoco` module loads only when an env is made, so commands that make none stay quick.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import gymnasium as gym
import numpy as np

from seedfleet.envs.family import EnvFamily, StepBatch
from seedfleet.envs.gymnasium_family import GymnasiumEnvs, env_spec
from seedfleet.errors import UsageError

MUJOCO_ENTRY_POINTS = "gymnasium.envs.mujoco"  # where gymnasium registers its MuJoCo envs
HEADLESS_GL = "egl"  # MUJOCO_GL when none is set: rendering without a display
log = logging.getLogger("seedfleet.envs.mujoco")


_warned: set[str] = set()


def _log_warning(text: str) -> None:
    """MuJoCo's warnings as log lines, each once per process, instead of its default handler's
    stderr line and MUJOCO_LOG.TXT in the working directory (Ant's and HalfCheetah's models warn
    that `settotalmass` is deprecated each time one is built)."""
    if text not in _warned:
        _warned.add(text)
        log.debug("MuJoCo: %s", text.strip())


class MujocoEnvs(GymnasiumEnvs):
    """K MuJoCo envs stepped together, observations as float32."""

    def __init__(self, env_id: str, num_envs: int, render_mode: str | None = None):
        """With `render_mode` "rgb_array" (eval --video) the envs step in processes of their own,
        started afresh ("spawn"): Mesa's EGL and TensorFlow, both built on LLVM, crash a process
        that loads the two, so the pictures are drawn where TensorFlow never loads."""
        try:
            import mujoco
        except ImportError as error:
            raise UsageError(f"{env_id} needs MuJoCo: pip install 'seedfleet[actor]' ({error})") from None
        mujoco.set_mju_user_warning(_log_warning)
        filming = render_mode == "rgb_array"
        if filming:
            os.environ.setdefault("MUJOCO_GL", HEADLESS_GL)  # a backend the user chose stays; children inherit it
        try:
            super().__init__(env_id, num_envs, render_mode, "async" if filming else "sync",
                             {"context": "spawn"} if filming else None)
        except gym.error.DependencyNotInstalled as error:
            raise UsageError(f"{env_id} needs MuJoCo: pip install 'seedfleet[actor]' ({error})") from None
        self.observation_dtype = np.dtype(np.float32)
        if filming:
            self._check_renderer(env_id)

    def _check_renderer(self, env_id: str) -> None:
        """UsageError in one line when MuJoCo cannot draw off screen here (no OpenGL)."""
        try:
            self.env.reset(seed=0)
            self.render_first(np.zeros(0))
        except Exception as error:  # noqa: BLE001 - each GL backend fails its own way (ImportError, EGLError, ...)
            self.close()
            first = (str(error).strip().splitlines() or [type(error).__name__])[-1]
            raise UsageError(f"{env_id}: MuJoCo's offscreen renderer needs OpenGL, which is not available here "
                             f"(MUJOCO_GL={os.environ.get('MUJOCO_GL')}: {first}); install EGL (libegl1, "
                             "libgl1-mesa-dri) or OSMesa (libosmesa6 with MUJOCO_GL=osmesa), or drop --video") from None

    def render_first(self, observations: np.ndarray) -> np.ndarray:
        """Env 0's picture, drawn in its own process."""
        return self.env.call("render")[0]

    def reset(self, seeds: list[int] | None = None) -> StepBatch:
        return _as_float32(super().reset(seeds))

    def step(self, actions: np.ndarray) -> StepBatch:
        return _as_float32(super().step(actions))


def _as_float32(batch: StepBatch) -> StepBatch:
    return dataclasses.replace(batch, observations=batch.observations.astype(np.float32))


class MujocoFamily(EnvFamily):
    name = "mujoco"

    def claims(self, env_id: str) -> bool:
        """gymnasium's MuJoCo ids, known by where they are registered (without importing mujoco)."""
        try:
            entry_point = env_spec(env_id).entry_point
        except UsageError:
            return False
        return isinstance(entry_point, str) and entry_point.startswith(MUJOCO_ENTRY_POINTS)

    def make(self, env_id: str, settings: None, num_envs: int, threads: int = 0, groups: int = 1,
             render_mode: str | None = None) -> MujocoEnvs:
        if groups != 1:
            raise UsageError(f"{env_id}: env groups need a family that steps them (ALE); MuJoCo's step together")
        return MujocoEnvs(env_id, num_envs, render_mode)
