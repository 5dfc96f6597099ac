"""What a SAC run's critics make of its own replay, oldest data first:

    python -m seedfleet.bench.sac_replay_probe runs/learn/halfcheetah-sac/seed2 --obs-index 1 8

Reads a checkpoint written with --checkpoint-replay (the one named, or a log dir's newest),
rebuilds its agent as `seedfleet eval` does, and cuts the replay, in the order it was filled,
into equal segments. For each segment's real transitions (x, a, r, x') it prints the mean
reward r, r / (1 - gamma) (what a return of r at every step is worth), the online critics'
mean Q_1(x, a) and Q_2(x, a), the mean soft target the run trained on (algorithms/sac/loss.py;
with `--n-step` n, G the n-step return and x_m the last observation of x's episode in reach)

    y = G + gamma_t (min(Q'_1, Q'_2)(x_m, a') - alpha log pi(a'|x_m)),   a' ~ pi(.|x_m),

and the root-mean-square TD error Q_1 - y, then the mean and the largest magnitude of each
observation component asked for.

Critics that have diverged read far above r / (1 - gamma) everywhere while their TD error stays
small: the values agree with themselves, not with the rewards. A segment whose observation
components leave the range of the earlier ones shows the states the critics extrapolate to.

`--sweep I V1 V2 ...` then sets observation component I to each value in turn on a uniform
sample of the replay's transitions (actions as stored) and prints the critics' mean Q there: how
the critics extrapolate along one component, e.g. an unbounded angle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.sac.agent import SACAgent
from seedfleet.algorithms.sac.loss import n_step_returns
from seedfleet.errors import UsageError
from seedfleet.server.checkpoint import read_trainer_arrays
from seedfleet.server.saved_policy import load_policy

CHUNK = 8192  # transitions per forward pass


def replay_in_order(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The replay's items ("items/<field>", [capacity, n + 1, ...]) oldest first, without the unfilled slots."""
    next_index, size, capacity = (int(v) for v in arrays["position"])
    order = (next_index - size + np.arange(size)) % capacity
    return {key[len("items/"):]: value[order] for key, value in arrays.items() if key.startswith("items/")}


def segment_rows(agent: SACAgent, items: dict[str, np.ndarray], segments: int, obs_indices: tuple[int, ...],
                 seed: int = 0) -> list[dict[str, float]]:
    """One row per segment of the transitions in `items` (replay_in_order's); the step into a
    reset observation is no transition and is left out. a' draws N(0, 1) noise from `seed`."""
    returns, discounts, last, mask = (v.numpy() for v in n_step_returns(
        tf.constant(items["reward"][:, 1:], tf.float32), tf.constant(items["first"][:, 1:]),
        tf.constant(items["terminated"]), agent.config.discount))
    real = mask > 0
    obs = items["observation"][:, 0].astype(np.float32)
    next_obs = items["observation"][np.arange(len(obs)), last].astype(np.float32)
    rewards = items["reward"][:, 1].astype(np.float32)
    noise = np.random.default_rng(seed).standard_normal((len(rewards), agent.actions.size)).astype(np.float32)
    q1, q2, targets = (np.empty(len(rewards), np.float32) for _ in range(3))
    for lo in range(0, len(rewards), CHUNK):
        part = slice(lo, lo + CHUNK)
        q1[part], q2[part] = (q.numpy() for q in agent.q_values(tf.constant(obs[part]),
                                                                tf.constant(items["action"][part, 0], tf.float32)))
        targets[part] = agent.soft_targets(tf.constant(returns[part]), tf.constant(discounts[part]),
                                           tf.constant(next_obs[part]), tf.constant(noise[part])).numpy()
    rows = []
    for index, part in enumerate(np.array_split(np.arange(len(rewards)), segments)):
        part = part[real[part]]
        if not len(part):
            continue
        row = {"segment": index, "first": int(part[0]), "last": int(part[-1]), "reward": float(rewards[part].mean())}
        row["worth"] = row["reward"] / (1.0 - agent.config.discount)
        row |= {"q1": float(q1[part].mean()), "q2": float(q2[part].mean()), "target": float(targets[part].mean()),
                "td_rms": float(np.sqrt(np.mean(np.square(q1[part] - targets[part]))))}
        for i in obs_indices:
            row[f"obs[{i}] mean"] = float(obs[part, i].mean())
            row[f"obs[{i}] |max|"] = float(np.abs(obs[part, i]).max())
        rows.append(row)
    return rows


def sweep_rows(agent: SACAgent, items: dict[str, np.ndarray], index: int, values: tuple[float, ...],
               sample: int = 2000, seed: int = 0) -> list[tuple[float, float, float]]:
    """(value, mean Q_1, mean Q_2) with observation component `index` set to each value on up to
    `sample` transitions drawn uniformly from `items`, their stored actions kept."""
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(items["reward"]), min(sample, len(items["reward"])), replace=False)
    obs = items["observation"][chosen, 0].astype(np.float32)
    actions = tf.constant(items["action"][chosen, 0], tf.float32)
    rows = []
    for value in values:
        obs[:, index] = value
        q1, q2 = agent.q_values(tf.constant(obs), actions)
        rows.append((value, float(np.mean(q1)), float(np.mean(q2))))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m seedfleet.bench.sac_replay_probe",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a SAC checkpoint with its replay, or a log dir (its newest)")
    parser.add_argument("--segments", type=int, default=10, help="equal parts of the replay, oldest first")
    parser.add_argument("--obs-index", type=int, nargs="*", default=(), help="observation components to summarise")
    parser.add_argument("--sweep", type=float, nargs="+", metavar=("I", "V"),
                        help="observation component I set to each value V on sampled replay transitions")
    args = parser.parse_args(argv)
    policy = load_policy(args.checkpoint)
    if not isinstance(policy.agent, SACAgent):
        raise UsageError(f"{policy.checkpoint} is not a SAC checkpoint")
    arrays = read_trainer_arrays(policy.checkpoint)
    if not arrays or "position" not in arrays:
        raise UsageError(f"{policy.checkpoint} kept no replay: it was written without --checkpoint-replay")
    if args.segments < 1:
        raise UsageError("--segments must be at least 1")
    items = replay_in_order(arrays)
    size = items["observation"].shape[-1]
    swept = [int(args.sweep[0])] if args.sweep else []
    if args.sweep and (len(args.sweep) < 2 or args.sweep[0] != swept[0]):
        raise UsageError("--sweep takes a component's index, then one value or more")
    if any(not 0 <= i < size for i in (*args.obs_index, *swept)):
        raise UsageError(f"--obs-index and --sweep take components 0 to {size - 1}")
    rows = segment_rows(policy.agent, items, args.segments, tuple(args.obs_index))
    alpha = float(np.exp(policy.agent.log_alpha.numpy()))
    print(f"{policy.checkpoint}: {len(items['reward']):,} transitions in replay, alpha {alpha:.4g}")
    keys = list(rows[0]) if rows else []
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:d}" if isinstance(row[k], int) else f"{row[k]:.2f}" for k in keys))
    if swept:
        print(f"obs[{swept[0]}] | q1 | q2")
        for value, q1, q2 in sweep_rows(policy.agent, items, swept[0], tuple(args.sweep[1:])):
            print(f"{value:g} | {q1:.2f} | {q2:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
