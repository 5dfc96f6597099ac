"""Central inference: one agent step for a whole batch of envs, whatever the agent.

Runs on the single inference thread, which alone touches the per-env state, so no
locks are needed there. Both agents go through `InferenceEngine.process`: the agent's
`act(obs, reward, first, env_ids, state) -> (actions, extras, new_state)` is the only
part that differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from algorithms.agent import Agent
from seedfleet.envs import StepBatch
from server.env_slots import EnvSlots
from server.metrics import Metrics
from server.unroll_queue import UnrollQueue


@dataclass
class StepRequest:
    env_ids: np.ndarray  # int32 [K]
    step: StepBatch

    def __len__(self) -> int:
        return len(self.env_ids)


class InferenceEngine:
    def __init__(self, agent: Agent, slots: EnvSlots, unrolls: UnrollQueue, metrics: Metrics, device: str):
        self.agent = agent
        self.device = device
        self.slots = slots
        self.unrolls = unrolls
        self.metrics = metrics

    def reset(self, lo: int, hi: int, evaluation: bool = False) -> None:
        self.slots.reset(lo, hi, evaluation)
        self.agent.assign_envs(lo, hi, evaluation)

    def process(self, requests: Sequence[StepRequest]) -> list[np.ndarray]:
        """Acts for every env in the batch and returns each request's actions."""
        if len(requests) == 1:
            env_ids, step = requests[0].env_ids, requests[0].step
        else:
            env_ids = np.concatenate([r.env_ids for r in requests])
            step = StepBatch(
                *(np.concatenate([getattr(r.step, f) for r in requests]) for f in StepBatch.__dataclass_fields__)
            )
        pre_state = self.slots.gather_state(env_ids)
        with tf.device(self.device):
            actions, extras, new_state = self.agent.act(
                step.observations, step.rewards, step.first, env_ids, pre_state
            )
        actions = actions.numpy()
        extras = {k: v.numpy() for k, v in extras.items()}
        new_state = {k: v.numpy() for k, v in new_state.items()}
        unrolls, returns, lengths, evaluation = self.slots.record(
            env_ids, step, actions, extras, pre_state, new_state
        )
        evaluating = int(self.slots.evaluation[env_ids].sum())
        self.metrics.add_inference(len(env_ids) - evaluating, evaluating, returns, lengths, evaluation)
        if unrolls is not None:
            self.unrolls.put(unrolls)
        return np.split(actions, np.cumsum([len(r) for r in requests[:-1]]))
