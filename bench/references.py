"""Published learning results beside which the learning benchmark puts its own.

Only figures read in the sources named are listed, keyed by frames (agent steps x 4 on
Atari). CleanRL's tables give the return at the end of 10M agent steps (40M frames).
cleanba and openrlbenchmark ship their curves only as plots (their CSVs hold final scores):
the values "read off" a plot below were read at the marks from the PNG named, from the
mean curve over its seeds, to about +-2 to 3 points on Pong's steep part and +-10 to 15 on
Breakout's.
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

# cleanba's curves of IMPALA, PPO and TorchBeast's monobeast, all under the same settings
CLEANBA = ("vwxyzjn/cleanba static/cleanba/main_10CPU.png (commit d1f8979), read off the plot; Machado settings "
           "(sticky 0.25, full action set, envpool), 3 seeds; final scores in static/cleanba/main_10CPU.csv")

REFERENCES: dict[str, tuple[Reference, ...]] = {  # by env id
    "ALE/Pong-v5": (
        Reference("IMPALA, cleanba (sticky 0.25), 3 seeds",
                  CLEANBA + ": Pong-v5 19.09 +- 0.34 at 200M frames",
                  {2_500_000: -17.5, 5_000_000: -9.0, 10_000_000: 11.0, 20_000_000: 16.0}),
        Reference("PPO, cleanba (sticky 0.25), 3 seeds",
                  CLEANBA + ": Pong-v5 18.07 +- 0.35 at 200M frames",
                  {2_500_000: -19.5, 5_000_000: -12.0, 10_000_000: 10.0, 20_000_000: 15.5}),
        Reference("IMPALA, TorchBeast monobeast (sticky 0.25), 3 seeds",
                  CLEANBA + " (monobeast of vwxyzjn/torchbeast, branch envpool): Pong-v5 18.87 +- 0.09 at 200M frames",
                  {2_500_000: -20.0, 5_000_000: -11.0, 10_000_000: 7.5, 20_000_000: 15.0}),
        Reference("PPO, CleanRL with Machado settings (sticky 0.25)",
                  "openrlbenchmark static/machado_10M.png (commit 7c6119b), read off the plot; "
                  "static/machado_10M.csv: Pong-v5 15.23 +- 1.62 at 40M frames",
                  {2_500_000: -6.0, 5_000_000: -1.0, 10_000_000: 8.0, 20_000_000: 12.0, 40_000_000: 15.23}),
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
    ),
    "PongNoFrameskip-v4": (
        Reference("PPO, CleanRL (no sticky actions)",
                  "openrlbenchmark static/cleanrl_vs_baselines_atari.png (commit d67da55), PongNoFrameskip-v4 panel, "
                  "ppo_atari_envpool_xla_jax_truncation, read off the plot; the CSV: 20.62 +- 0.18 at 40M frames",
                  {2_500_000: -12.0, 5_000_000: 1.0, 10_000_000: 17.5, 20_000_000: 20.0}),
        Reference("PPO2, openai/baselines (no sticky actions)",
                  "openrlbenchmark static/cleanrl_vs_baselines_atari.png (commit d67da55), baselines-ppo2-cnn, "
                  "read off the plot; the CSV: 20.45 +- 0.81 at 40M frames",
                  {2_500_000: -10.0, 5_000_000: 6.0, 10_000_000: 14.0, 20_000_000: 19.5}),
        Reference("CleanRL PPO (envpool v5, no sticky)", "vwxyzjn/cleanrl docs/benchmark/ppo_atari_envpool.md: "
                  "Pong-v5 20.45 +- 0.09 after 10M agent steps (40M frames), 3 seeds; envpool's v5 has "
                  "repeat_action_probability 0", {40_000_000: 20.45}),
        Reference("SB3 zoo A2C (NoFrameskip-v4)", "DLR-RM/rl-baselines3-zoo benchmark.md: \"a2c | "
                  "PongNoFrameskip-v4 | 17.292 | 3.214 | 10M\" (10M steps, 40M frames)", {40_000_000: 17.29}),
    ),
    "ALE/Breakout-v5": (
        Reference("IMPALA, cleanba (sticky 0.25), 3 seeds",
                  CLEANBA + ": Breakout-v5 482.12 +- 9.36 at 200M frames",
                  {2_500_000: 10.0, 5_000_000: 19.5, 10_000_000: 41.5, 20_000_000: 160.0}),
        Reference("PPO, CleanRL with Machado settings (sticky 0.25)",
                  "openrlbenchmark static/machado_10M.png (commit 7c6119b), read off the plot",
                  {2_500_000: 10.0, 5_000_000: 15.0, 10_000_000: 26.0, 20_000_000: 61.0}),
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
    "MinAtar/Breakout-v1": (
        Reference("random play (sticky 0.1)", "kenjyoung/MinAtar README.md: \"python examples/random_play.py -g "
                  "breakout ... # Avg Return: 0.5+/-0.023\" (1,000 episodes)", {}),
        Reference("gymnax PPO", "RobertTLange/gymnax README.md: \"PPO ... Breakout-MinAtar (R: 28)\"; "
                  "gymnax-blines agents/Breakout-MinAtar/ppo.yaml: num_train_steps 10000000", {10_000_000: 28.0}),
    ),
    # Continuous control (Box actions): counts are env steps (frame skip 1)
    "Pendulum-v1": (
        Reference("PPO, rl-baselines3-zoo (gamma 0.9, gSDE, tuned for Pendulum), deterministic evaluation, 1 run",
                  "DLR-RM/rl-baselines3-zoo benchmark.md (commit 22e3ff2): ppo Pendulum-v1 -172.225 +- 104.159 "
                  "at 100k steps; hyperparams/ppo.yml: n_envs 4, n_steps 1024, gamma 0.9, gae_lambda 0.95, "
                  "10 epochs, lr 1e-3, use_sde", {100_000: -172.2}),
        Reference("PPO, RLlib tuned example (gamma 0.95, lambda 0.1, 20 envs)",
                  "ray-project/ray rllib/tuned_examples/ppo/pendulum-ppo.yaml: \"Can expect improvement to -140 "
                  "reward in ~300-500k timesteps\" (drawn at 300k, the early end)", {300_000: -140.0}),
    ),
    "HalfCheetah-v5": (
        Reference("PPO, CleanRL ppo_continuous_action (v4), 3 seeds",
                  "vwxyzjn/cleanrl docs/benchmark/ppo_continuous_action.md (commit fe8d8a0, pr-424 runs): "
                  "HalfCheetah-v4 1442.64 +- 46.03 at 1M steps", {1_000_000: 1442.6}),
        Reference("PPO, CleanRL ppo_continuous_action (v4), earlier release, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/ppo.md (commit fe8d8a0): HalfCheetah-v4 2905.85 +- 1129.37 "
                  "at 1M steps", {1_000_000: 2905.9}),
        Reference("PPO2, openai/baselines (v2)",
                  "openrlbenchmark static/baseline_vs_cleanrl.md: baselines ppo2 HalfCheetah-v2 1428.55 +- 62.40 "
                  "at 1M steps", {1_000_000: 1428.6}),
        Reference("PPO, rl-baselines3-zoo tuned for HalfCheetah (v3), deterministic evaluation",
                  "DLR-RM/rl-baselines3-zoo benchmark.md (commit 22e3ff2): ppo HalfCheetah-v3 5819.099 at 1M steps "
                  "(per-env hyperparameters in hyperparams/ppo.yml)", {1_000_000: 5819.1}),
    ),
    "Hopper-v4": (
        Reference("PPO, CleanRL ppo_continuous_action, 3 seeds",
                  "vwxyzjn/cleanrl docs/benchmark/ppo_continuous_action.md (commit fe8d8a0, pr-424 runs): "
                  "Hopper-v4 2382.86 at 1M steps", {1_000_000: 2382.9}),
        Reference("PPO, CleanRL ppo_continuous_action, earlier release, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/ppo.md (commit fe8d8a0): Hopper-v4 2051.80 +- 313.94 at 1M "
                  "steps", {1_000_000: 2051.8}),
        Reference("PPO2, openai/baselines (v2)",
                  "openrlbenchmark static/baseline_vs_cleanrl.md: baselines ppo2 Hopper-v2 2158.65 +- 302.33 at "
                  "1M steps", {1_000_000: 2158.7}),
    ),
    "Pendulum-v1 (SAC)": (
        Reference("SAC, rl-baselines3-zoo (SB3 defaults, lr 1e-3), deterministic evaluation, 1 run",
                  "DLR-RM/rl-baselines3-zoo benchmark.md (commit 22e3ff2): sac Pendulum-v1 -156.995 +- 88.714 at "
                  "20k steps; hyperparams/sac.yml: n_timesteps 20000, learning_rate 1e-3, the rest SB3's "
                  "defaults (learning_starts 100, batch 256, one update per step)", {20_000: -157.0}),
        Reference("SAC, RLlib tuned example",
                  "ray-project/ray rllib/tuned_examples/sac/pendulum-sac.yaml (commit 048f73e): \"Pendulum SAC can "
                  "attain -150+ reward in 6-7k\" (drawn at 7k)", {7_000: -150.0}),
    ),
    "MountainCarContinuous-v0 (SAC)": (
        Reference("SAC with gSDE, rl-baselines3-zoo (tuned: gamma 0.9999, fixed entropy coefficient 0.1), "
                  "deterministic evaluation, 1 run",
                  "DLR-RM/rl-baselines3-zoo benchmark.md (commit 22e3ff2): sac MountainCarContinuous-v0 94.679 +- "
                  "1.134 at 50k steps; hyperparams/sac.yml: lr 3e-4, buffer 50000, batch 512, ent_coef 0.1, "
                  "train_freq 32, gradient_steps 32, gamma 0.9999, tau 0.01, learning_starts 0, use_sde, "
                  "log_std_init -3.67, net_arch [64, 64]", {50_000: 94.7}),
    ),
    "HalfCheetah-v5 (SAC)": (
        Reference("SAC, CleanRL sac_continuous_action (v2), training return, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/sac/HalfCheetah-v2.png (commit fe8d8a0), mean curve read off "
                  "the plot (+-150 at 100k, +-100 at 300k); 10310.37 +- 1873.21 at 1M in the table of "
                  "docs/rl-algorithms/sac.md at commit 7e24ae2",
                  {100_000: 5450.0, 300_000: 7900.0, 1_000_000: 10310.4}),
        Reference("SAC, CleanRL sac_continuous_action (v4, pr-424 runs), training return, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/sac.md (commit fe8d8a0; docs/benchmark/sac.md names them "
                  "v4): 9634.89 +- 1423.73 at 1M steps", {1_000_000: 9634.9}),
        Reference("SAC, jaxrl (v2), training return",
                  "openrlbenchmark static/baselines_vs_cleanrl_vs_jaxrl.png (commit d67da55), read off the plot "
                  "(+-150); 10311.50 +- 771.90 at 1M in static/baselines_vs_cleanrl_vs_jaxrl.md",
                  {100_000: 5100.0, 300_000: 8000.0, 1_000_000: 10311.5}),
        Reference("SAC, Tianshou (v3), deterministic evaluation, 10 seeds",
                  "thu-ml/tianshou examples/mujoco/benchmark/HalfCheetah-v3/result.json (commit 63f0e9a), agent SAC: "
                  "6514.62 / 9059.26 / 12121.86 at 100k / 300k / 1M", {100_000: 6514.6, 300_000: 9059.3,
                                                                          1_000_000: 12121.9}),
    ),
    "Hopper-v4 (SAC)": (
        Reference("SAC, CleanRL sac_continuous_action (v2), training return, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/sac/Hopper-v2.png (commit fe8d8a0), mean curve read off the "
                  "plot (+-100 at 100k, +-75 at 300k); 2685.76 +- 762.16 at 1M in the table of "
                  "docs/rl-algorithms/sac.md at commit 7e24ae2", {100_000: 1380.0, 300_000: 2340.0, 1_000_000: 2685.8}),
        Reference("SAC, CleanRL sac_continuous_action (v4, pr-424 runs), training return, 3 seeds",
                  "vwxyzjn/cleanrl docs/rl-algorithms/sac.md (commit fe8d8a0): 2310.46 +- 342.82 at 1M steps",
                  {1_000_000: 2310.5}),
        Reference("SAC, jaxrl (v2), training return",
                  "openrlbenchmark static/baselines_vs_cleanrl_vs_jaxrl.png (commit d67da55), read off the plot "
                  "(+-200 at 100k, +-150 at 300k); 3018.90 +- 330.19 at 1M in static/baselines_vs_cleanrl_vs_jaxrl.md",
                  {100_000: 1350.0, 300_000: 2750.0, 1_000_000: 3018.9}),
        Reference("SAC, Tianshou (v3), deterministic evaluation, 10 seeds",
                  "thu-ml/tianshou examples/mujoco/benchmark/Hopper-v3/result.json (commit 63f0e9a), agent SAC: "
                  "2613.46 / 3387.66 / 3531.60 at 100k / 300k / 1M", {100_000: 2613.5, 300_000: 3387.7,
                                                                      1_000_000: 3531.6}),
    ),
}
