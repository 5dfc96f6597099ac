"""The environment ceiling: an actor's envs stepped with random actions and no learner.

    python -m seedfleet.actor_client.ceiling --env ALE/Pong-v5 --envs 32 --seconds 10

prints one JSON line: env steps and seconds over the measured window (after a warm-up),
with the machine's busy and stolen cores in that window.
The envs are built exactly as an actor builds them for this env id, so the figure is
what the same actor processes could step if inference and transport cost nothing.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from seedfleet.envs import make_envs
from seedfleet.machine_cpu import machine_cores, machine_cpu_s
from seedfleet.processes import exit_with_parent


def step_randomly(env_id: str, num_envs: int, seconds: float, warmup_s: float = 2.0, env_threads: int = 0,
                  seed: int = 0, env_groups: int = 1) -> dict:
    """Steps `num_envs` envs with uniform random actions; counts steps after `warmup_s`."""
    envs = make_envs(env_id, num_envs, env_threads, env_groups)
    rng = np.random.default_rng(seed)
    try:
        envs.reset([seed * 1_000_003 + i for i in range(num_envs)])
        def step() -> float:
            envs.step(envs.actions.random(rng, envs.group_size))
            return time.monotonic()

        warm_until = time.monotonic() + warmup_s
        while step() < warm_until:
            pass
        window_start = now = time.monotonic()
        cpu_start = machine_cpu_s()
        steps = 0
        while now - window_start < seconds:
            now = step()
            steps += envs.group_size
        return {"env_steps": steps, "seconds": now - window_start, "frame_skip": envs.frame_skip,
                **machine_cores(cpu_start, machine_cpu_s(), now - window_start)}
    finally:
        envs.close()


def main() -> None:
    exit_with_parent()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True)
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--env-threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-groups", type=int, default=1)
    args = parser.parse_args()
    result = step_randomly(args.env, args.envs, args.seconds, args.warmup_s, args.env_threads, args.seed,
                           args.env_groups)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
