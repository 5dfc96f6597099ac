"""Gymnasium ids seedfleet makes known beside ALE's: its MovingDot check env and, when the
`minatar` package is installed, MinAtar's games (Young & Tian, 2019).

MinAtar's ids are registered here with string entry points, as its own `minatar.gym`
would register them, so that nothing of MinAtar (nor the plotting libraries it imports)
loads until one of its envs is made: `MinAtar/<Game>-v0` with all 6 actions,
`MinAtar/<Game>-v1` with the game's minimal action set. Observations are [10, 10, C]
bool planes; sticky actions with p = 0.1 and difficulty ramping, MinAtar's defaults.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym

from seedfleet.moving_dot import MovingDot

MOVING_DOT_IDS = {"seedfleet/MovingDot-v0": {}, "seedfleet/MovingDotRGB-v0": {"channels": 3}}
MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


def register() -> None:
    """Registers the ids above that gymnasium does not know yet (idempotent)."""
    for env_id, kwargs in MOVING_DOT_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=MovingDot, kwargs=kwargs)
    if importlib.util.find_spec("minatar") is None:
        return
    for game in MINATAR_GAMES:
        name = game.title().replace("_", "")
        for version, minimal in (("v0", False), ("v1", True)):
            env_id = f"MinAtar/{name}-{version}"
            if env_id not in gym.registry:
                gym.register(env_id, entry_point="minatar.gym:BaseEnv",
                             kwargs={"game": game, "use_minimal_action_set": minimal})
