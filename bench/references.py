"""Published learning results beside which the learning benchmark puts its own.

Only figures read in the sources named are listed, keyed by frames (agent steps x 4 on
Atari). CleanRL's tables give the return at the end of 10M agent steps (40M frames);
no stored source gave returns at 5M, 10M or 20M frames, so those columns of the report
stay empty for the references until such a source is found.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reference:
    name: str
    source: str
    returns: dict[int, float] = field(default_factory=dict)  # frames -> mean return


REFERENCES: dict[str, tuple[Reference, ...]] = {
    "pong": (
        Reference("CleanRL PPO (v5, envpool)", "vwxyzjn/cleanrl docs/benchmark/ppo_atari_envpool.md: Pong-v5 "
                  "20.45 +- 0.09 after 10M agent steps (40M frames), 3 seeds", {40_000_000: 20.45}),
    ),
    "breakout": (
        Reference("CleanRL PPO (v5, envpool)", "vwxyzjn/cleanrl docs/benchmark/ppo_atari_envpool.md: Breakout-v5 "
                  "211.24 +- 151.84 after 10M agent steps (40M frames), 3 seeds", {40_000_000: 211.24}),
    ),
    "minatar-breakout": (),
}
