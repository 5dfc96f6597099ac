"""One learner step from a fixed seed on a fixed synthetic batch, hashed: whether two commits
compute the same training step for a task's defaults, bit for bit (float32, no XLA, TensorFlow's
deterministic ops), so a learning curve that moved between them moved by chance or by arithmetic
(the CPU's dtype), not by the code.

    python -m seedfleet.bench.step_hash --env ALE/Pong-v5 --algo appo

To run an older commit's code with this venv, check it out in a worktree and put a folder first
on PYTHONPATH whose seedfleet/ links the worktree's seedfleet/* files and its server, actor_client,
algorithms, deploy and bench folders (pyproject.toml's package-dir); copy this file beside it if
that commit has none. The agent acts on the batch's rows first, so its extras and state are its own.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Unroll
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import ALGORITHMS
from seedfleet.bench.run_config import todays_defaults
from seedfleet.server.assembly import env_config_for, make_agent
from seedfleet.server.config import LearnerConfig
from seedfleet.settings import config_from
from seedfleet.wire import EnvSpec


def batch_major(rows: np.ndarray) -> np.ndarray:
    return np.swapaxes(rows, 0, 1)


def step_hash(env: str, algo_name: str, seed: int) -> tuple[str, dict[str, float]]:
    """(sha256 of every trainable variable after one learner step, the step's losses)."""
    tf.random.set_seed(seed)
    tf.config.experimental.enable_op_determinism()
    algo = ALGORITHMS[algo_name]
    flags = todays_defaults([sys.executable, "-m", "seedfleet.deploy.cli", "learner", "--env", env, "--algo", algo_name,
                             "--seed", str(seed), "--compute-dtype", "float32", "--no-jit-compile"])
    config = config_from(LearnerConfig, flags)
    env_config, frame_skip = env_config_for(config)
    agent = make_agent(config, algo, config_from(algo.config_class, flags), config_from(NetworkConfig, flags),
                       env_config, "/CPU:0", frame_skip)
    spec = EnvSpec.from_proto(env_config)
    rng = np.random.default_rng(seed)
    n, rows = agent.batch_size, agent.layout.length + 1
    obs = rng.integers(0, 255, (rows, n, *spec.obs_shape)).astype(spec.obs_dtype)
    first = np.zeros((rows, n), bool)
    first[0], first[rows // 2, : n // 8] = True, True  # some episodes start mid-unroll
    reward = rng.choice([-1.0, 0.0, 1.0], (rows, n), p=[0.05, 0.9, 0.05]).astype(np.float32)
    state, actions, extras = agent.initial_state(n), [], []
    for t in range(rows):
        action, extra, state = agent.act(obs[t], reward[t], first[t], np.arange(n, dtype=np.int32), state)
        actions.append(np.asarray(action))
        extras.append({key: np.asarray(value) for key, value in extra.items()})
    flags = batch_major(np.zeros((rows, n), bool))
    batch = Unroll(observation=batch_major(obs), first=batch_major(first), reward=batch_major(reward),
                   terminated=flags, truncated=flags, life_lost=flags, action=batch_major(np.stack(actions)),
                   extras={key: batch_major(np.stack([e[key] for e in extras])) for key in extras[0]},
                   state=agent.initial_state(n))
    out = agent.learn(batch)
    digest = hashlib.sha256()
    for variable in sorted(agent.trainable_variables, key=lambda v: v.name):
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest(), {key: float(value) for key, value in sorted(out.items()) if key.startswith("loss/")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--algo", default="appo")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    digest, losses = step_hash(args.env, args.algo, args.seed)
    print(f"{args.env} {args.algo}: losses " + ", ".join(f"{k} {v:.6f}" for k, v in losses.items()))
    print(f"variables after one learner step: sha256 {digest}")


if __name__ == "__main__":
    main()
