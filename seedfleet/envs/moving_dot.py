"""MovingDot: a tiny image env whose right action depends on more than the newest frame.

A 2x2 dot sits at a random place and moves `speed` pixels per step, left or right
(wrapping round the edges), in a direction drawn at every reset. The agent is paid
1 for naming that direction (action 0: left, 1: right) and 0 otherwise, for
`episode_length` steps. One frame shows where the dot is but not where it goes, so a
policy that sees only the newest frame earns 0.5 a step at best (half the episode's
length); a policy that sees two consecutive frames can earn everything but the guess
at the first step: `optimal_return` = episode_length - 0.5.

It checks that a conv torso, the learner's frame stacking and the learning rule
together solve a problem that needs memory of frames. Observations are [size, size]
uint8, or [size, size, channels] with the dot in a different shade per channel
(`channels` > 0), as colour images arrive.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class MovingDot(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, size: int = 36, channels: int = 0, speed: int = 2, episode_length: int = 16,
                 render_mode: str | None = None):
        shape = (size, size, channels) if channels else (size, size)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.size, self.channels, self.speed, self.episode_length = size, channels, speed, episode_length
        self.render_mode = render_mode
        self.shades = np.linspace(255, 96, max(channels, 1)).astype(np.uint8)
        self.optimal_return = episode_length - 0.5
        self._y = self._x = self._direction = self._t = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros(self.observation_space.shape, np.uint8)
        rows = [self._y, (self._y + 1) % self.size]
        cols = [self._x, (self._x + 1) % self.size]
        frame[np.ix_(rows, cols)] = self.shades if self.channels else self.shades[0]
        return frame

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._y, self._x = (int(v) for v in self.np_random.integers(0, self.size, 2))
        self._direction = int(self.np_random.integers(0, 2))
        self._t = 0
        return self._frame(), {}

    def step(self, action):
        reward = float(int(action) == self._direction)
        self._x = (self._x + (self.speed if self._direction else -self.speed)) % self.size
        self._t += 1
        return self._frame(), reward, self._t >= self.episode_length, False, {}

    def render(self) -> np.ndarray:
        frame = self._frame()
        grey = frame[..., 0] if self.channels else frame
        return np.repeat(grey[..., None], 3, -1)

