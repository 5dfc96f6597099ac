"""The MinAtar family (Young & Tian, 2019): "MinAtar/<Game>-v0" with all 6 actions,
"MinAtar/<Game>-v1" with the game's minimal action set; [10, 10, C] bool boards, sticky
actions with p = 0.1 and difficulty ramping, MinAtar's defaults.

The ids are registered here with string entry points, as MinAtar's own `minatar.gym`
registers them, so that nothing of MinAtar (nor the plotting libraries it imports)
loads until one of its envs is made. The envs step as the gymnasium family's do; the
family is its own so that algorithms can take defaults of their own on these boards.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym

from seedfleet.envs.gymnasium_family import GymnasiumFamily

PREFIX = "MinAtar/"
GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")

if importlib.util.find_spec("minatar") is not None:
    for _game in GAMES:
        for _version, _minimal in (("v0", False), ("v1", True)):
            _env_id = f"{PREFIX}{_game.title().replace('_', '')}-{_version}"
            if _env_id not in gym.registry:
                gym.register(_env_id, entry_point="minatar.gym:BaseEnv",
                             kwargs={"game": _game, "use_minimal_action_set": _minimal})


class MinAtarFamily(GymnasiumFamily):
    name = "minatar"

    def claims(self, env_id: str) -> bool:
        return env_id.startswith(PREFIX)
