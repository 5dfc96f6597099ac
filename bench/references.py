"""Published learning results beside which the learning benchmark puts its own.

Only figures read in the sources named are listed, keyed by frames (agent steps x 4 on
Atari). CleanRL's tables give the return at the end of 10M agent steps (40M frames).
Dopamine's baseline data give value-based agents (DQN, Rainbow; sticky actions) at every 1M
frames: its training iterations are 1M frames each, so iteration i ends at i + 1 M.
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
        Reference("DQN, Dopamine (sticky 0.25; value-based), 5 runs",
                  "google/dopamine baselines/atari/data/pong.json, mean training return of the 1M-frame iterations "
                  "4, 9 and 19 of its five DQN runs: -17.2, -13.22, -11.354, -20.258, -14.775; -9.847, 6.912, "
                  "2.371, -19.063, -5.0; 1.2, 13.125, 12.932, -10.31, 11.704",
                  {5_000_000: -15.36, 10_000_000: -4.93, 20_000_000: 5.73}),
        Reference("Rainbow, Dopamine (sticky 0.25; value-based), 5 runs",
                  "google/dopamine baselines/atari/data/pong.json, the same iterations of its five Rainbow runs: "
                  "-13.188, -13.139, -11.889, -9.262, -15.352; 17.212, 12.627, 14.908, 15.681, 15.571; "
                  "19.669, 18.167, 17.367, 18.167, 18.549",
                  {5_000_000: -12.57, 10_000_000: 15.20, 20_000_000: 18.38}),
        Reference("PPO, Machado settings (sticky actions 0.25)", "openrlbenchmark static/machado_10M.md: "
                  "\"Pong-v5 | 15.23 +- 1.62 | 20.62 +- 0.18\" (sticky against none) after 10M steps (40M frames)",
                  {40_000_000: 15.23}),
    ),
    "pong-nosticky": (
        Reference("CleanRL PPO (envpool v5, no sticky)", "vwxyzjn/cleanrl docs/benchmark/ppo_atari_envpool.md: "
                  "Pong-v5 20.45 +- 0.09 after 10M agent steps (40M frames), 3 seeds; envpool's v5 has "
                  "repeat_action_probability 0", {40_000_000: 20.45}),
        Reference("SB3 zoo A2C (NoFrameskip-v4)", "DLR-RM/rl-baselines3-zoo benchmark.md: \"a2c | "
                  "PongNoFrameskip-v4 | 17.292 | 3.214 | 10M\" (10M steps, 40M frames)", {40_000_000: 17.29}),
    ),
    "breakout": (
        Reference("DQN, Dopamine (sticky 0.25; value-based), 3 runs",
                  "google/dopamine baselines/atari/data/breakout.json, mean training return of the 1M-frame "
                  "iterations 4, 9 and 19 of its first three runs: 10.56, 10.09, 8.26; 28.51, 21.04, 19.26; "
                  "61.86, 47.09, 50.72", {5_000_000: 9.64, 10_000_000: 22.94, 20_000_000: 53.22}),
        Reference("CleanRL PPO (envpool v5, no sticky)", "vwxyzjn/cleanrl docs/benchmark/ppo_atari_envpool.md: "
                  "Breakout-v5 211.24 +- 151.84 after 10M agent steps (40M frames), 3 seeds", {40_000_000: 211.24}),
        Reference("PPO, Machado settings (sticky actions 0.25)", "openrlbenchmark static/machado_10M.md: "
                  "\"Breakout-v5 | 198.37 +- 59.41 | 465.90 +- 14.30\" (sticky against none), 40M frames",
                  {40_000_000: 198.37}),
        Reference("RLlib IMPALA, 32 workers (NoFrameskip-v4)", "ray-project/rl-experiments README.md: "
                  "\"|Breakout|385|374|~150|\" (IMPALA, A2C, A3C paper) at 10M time-steps (40M frames)",
                  {40_000_000: 385.0}),
    ),
    "minatar-breakout": (
        Reference("random play (sticky 0.1)", "kenjyoung/MinAtar README.md: \"python examples/random_play.py -g "
                  "breakout ... # Avg Return: 0.5+/-0.023\" (1,000 episodes)", {}),
        Reference("gymnax PPO", "RobertTLange/gymnax README.md: \"PPO ... Breakout-MinAtar (R: 28)\"; "
                  "gymnax-blines agents/Breakout-MinAtar/ppo.yaml: num_train_steps 10000000", {10_000_000: 28.0}),
    ),
}
