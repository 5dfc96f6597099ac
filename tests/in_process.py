"""The learner's own inference and training path driven in one process, without gRPC.

Envs step in this process (built by their family, as an actor builds them); every step goes through
`InferenceEngine.process` (the agent's `act`, `EnvSlots`' per-env state, frame stacks
and unrolls) and every full batch of unrolls through `agent.learn`, as in the learner.
"""

from __future__ import annotations

import numpy as np

from seedfleet.envs import make_envs
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.inference import InferenceEngine, StepRequest
from seedfleet.server.metrics import Metrics
from seedfleet.server.normalization import Normalization
from seedfleet.server.unroll_queue import UnrollQueue


def train(agent, env_id: str, num_envs: int, max_env_steps: int, seed: int = 0, on_batch=None,
          stop_return: float | None = None, window: int = 200,
          normalization: Normalization | None = None) -> tuple[list[float], int]:
    """Acts until `max_env_steps`, or until the mean of the last `window` episode returns
    reaches `stop_return`; every full batch of unrolls goes to `on_batch` (default:
    `agent.learn`). Box actions are clipped to the bounds, as an actor clips them;
    `normalization` as the learner's (server/normalization.py). Returns (episode returns in
    order, env steps)."""
    on_batch = on_batch or agent.learn
    envs = make_envs(env_id, num_envs, threads=1)
    normalized = normalization is not None and normalization.observations is not None
    slots = EnvSlots(num_envs, agent.layout, envs.observation_shape,
                     np.dtype(np.float32) if normalized else envs.observation_dtype, agent.extras_spec,
                     agent.initial_state, actions=agent.actions)
    queue = UnrollQueue(10 * agent.batch_size, agent.batch_size)
    metrics = Metrics(envs.frame_skip)
    engine = InferenceEngine(agent, slots, queue, metrics, "/CPU:0", normalization)
    env_ids = np.arange(num_envs, dtype=np.int32)
    step = envs.reset([seed * 1000 + i for i in range(num_envs)])
    returns: list[float] = []
    steps = 0
    while steps < max_env_steps:
        (actions,) = engine.process([StepRequest(env_ids, step)])
        step = envs.step(envs.actions.bounded(actions))
        steps += num_envs
        returns.extend(metrics.take_interval()["returns"])
        while len(queue) >= agent.batch_size:
            on_batch(queue.get_batch(agent.batch_size, timeout_s=0))
        if stop_return is not None and len(returns) >= window and np.mean(returns[-window:]) >= stop_return:
            break
    envs.close()
    return returns, steps
