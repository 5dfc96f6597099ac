"""R2D2's hyperparameters (the paper's, for Atari), the defaults it takes on other envs,
and the Ape-X exploration rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seedfleet.settings import Presets


@dataclass
class R2D2Config:
    discount: float = 0.997  # gamma
    burn_in: int = 40  # rows that only warm up the LSTM
    unroll_length: int = 80  # transitions trained on per sequence
    n_step: int = 5  # steps in the bootstrapped target
    batch_size: int = 32  # sequences per learner step
    learning_rate: float = 1e-4  # Adam step size
    adam_epsilon: float = 1e-3  # Adam epsilon
    max_grad_norm: float = 40.0  # gradients are clipped to this global norm
    target_update_period: int = 2500  # learner steps between target-network copies
    priority_eta: float = 0.9  # priority = eta * max|td| + (1 - eta) * mean|td|
    priority_exponent: float = 0.9  # alpha of prioritized replay
    importance_sampling_exponent: float = 0.6  # beta of prioritized replay
    value_rescale_eps: float = 1e-3  # epsilon of h(x)
    replay_capacity: int = 10_000  # sequences kept in replay (Atari: about 8.6 GB once full)
    min_replay_size: int = 100  # sequences in replay before training starts
    replay_ratio: float = 2.0  # sequences trained on per sequence inserted, held both ways by the learner
    exploration_envs: int = 0  # N of the Ape-X epsilons over env ids 0..N-1 (0: the envs `run` starts, else max_envs)
    checkpoint_replay: bool = False  # checkpoints hold the replay too (bytes/step x steps stored: GBs on Atari)


# The defaults above are the paper's, for Atari. Envs with vector observations (CartPole
# and friends) have short episodes and small networks; there shorter sequences, a 3-step
# target, a target net copied 25x as often and 4x the replay per inserted sequence learn
# in minutes, where the Atari values barely move within an hour (BENCHMARKS.md). Their
# sequences are small, so the replay holds twice as many.
VECTOR_OBSERVATION_DEFAULTS: dict[str, float | int] = {
    "discount": 0.99,
    "burn_in": 10,
    "unroll_length": 20,
    "n_step": 3,
    "learning_rate": 1e-3,
    "target_update_period": 100,
    "min_replay_size": 64,
    "replay_ratio": 8.0,
    "replay_capacity": 20_000,
}

# By env family (seedfleet/envs): ALE keeps the paper's values above; any family not named here
# (gymnasium's, Catch, one added later) takes the vector values. MinAtar's boards take them too:
# its curves in BENCHMARKS.md ("R2D2 on MinAtar Breakout") were run with them, and a 5-step
# target tracked the 3-step one at equal learner steps.
R2D2_FAMILY_DEFAULTS: dict[str, dict[str, float | int]] = {
    "ale": {},
    "minatar": {**VECTOR_OBSERVATION_DEFAULTS},
}

# On every env: its training step unrolls the LSTM over burn-in + T steps in Python, a graph
# XLA took 33 s to compile on CartPole (two CPU cores) for no gain in steady state (10.3
# against 9.8 learner steps/s without it); a checkpoint, and so a stop, would wait out that
# compile. `seedfleet run` starts one evaluation actor: under Ape-X epsilons (up to 0.4) the
# training returns say little of the policy, so progress and --target-return read the
# evaluation episodes.
R2D2_EVERYWHERE = Presets(network={"jit_compile": False}, launch={"eval_actors": 1})


def r2d2_presets(family: str, kind: str) -> Presets:
    """The paper's values on Atari, the env family's own elsewhere (discrete actions only)."""
    del kind  # R2D2 acts in discrete actions alone (its registry entry's action_kinds)
    return R2D2_EVERYWHERE | Presets(algorithm=R2D2_FAMILY_DEFAULTS.get(family, VECTOR_OBSERVATION_DEFAULTS))


def ape_x_epsilons(num_envs: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Per-env exploration rates of Ape-X: eps_i = base ** (1 + alpha * i / (N - 1))."""
    if num_envs == 1:
        return np.array([base], np.float32)
    return (base ** (1.0 + alpha * np.arange(num_envs) / (num_envs - 1))).astype(np.float32)
