"""Central inference: one agent step for a whole batch of envs, whatever the agent.

Runs on the single inference thread, which alone touches the per-env state, so no
locks are needed there. Both agents go through `InferenceEngine.process`: the agent's
`act(obs, reward, first, env_ids, state) -> (actions, extras, new_state)` is the only
part that differs.

No output an actor or the trainer must not see leaves here: a request whose envs drove
the policy to a non-finite output (observations of 1e19, say) or to an action outside
[0, n) is refused whole with `PolicyOutputError`, its envs' rows and state
are left as they were, and the other requests of the batch are served as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Agent
from seedfleet.envs import StepBatch
from seedfleet.server.backend import PolicyOutputError, StepRequest
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.metrics import Metrics
from seedfleet.server.normalization import Normalization
from seedfleet.server.unroll_queue import UnrollQueue


class InferenceEngine:
    def __init__(self, agent: Agent, slots: EnvSlots, unrolls: UnrollQueue, metrics: Metrics, device: str,
                 normalization: Normalization | None = None):
        """`normalization`: observations and rewards as the agent acts on and trains from them
        (server/normalization.py; none: as the envs sent them)."""
        self.agent = agent
        self.normalization = normalization or Normalization()
        self.device = device
        self.slots = slots
        self.unrolls = unrolls
        self.metrics = metrics
        self.clock = slots.clock  # the stages of seedfleet/stage_clock.py, with the slots' own

    def reset(self, lo: int, hi: int, evaluation: bool = False, trusted: bool = True) -> None:
        self.slots.reset(lo, hi, evaluation, trusted)
        if self.normalization.rewards is not None:
            self.normalization.rewards.reset(lo, hi)
        self.agent.assign_envs(lo, hi, evaluation)

    def process(self, requests: Sequence[StepRequest]) -> list[np.ndarray | PolicyOutputError]:
        """Acts for every env in the batch and returns each request's actions (or the
        PolicyOutputError that refuses it)."""
        lap = self.clock.start()
        if len(requests) == 1:
            env_ids, step = requests[0].env_ids, requests[0].step
        else:
            env_ids = np.concatenate([r.env_ids for r in requests])
            step = StepBatch(
                *(np.concatenate([getattr(r.step, f) for r in requests]) for f in StepBatch.__dataclass_fields__)
            )
        scores = step.rewards  # the env's own: episode returns add these up
        step = self._normalized(env_ids, step)
        pre_state = self.slots.gather_state(env_ids)
        lap = self.clock.lap("batch", lap)
        with tf.device(self.device):
            actions, extras, new_state = self.agent.act(
                step.observations, step.rewards, step.first, env_ids, pre_state
            )
        actions = actions.numpy()
        extras = {k: v.numpy() for k, v in extras.items()}
        new_state = {k: v.numpy() for k, v in new_state.items()}
        lap = self.clock.lap("policy", lap)
        sizes = [len(r) for r in requests]
        refused = self._refused_requests(actions, extras, new_state, sizes)
        if refused.any():
            keep = np.repeat(~refused, sizes)
            self.metrics.add_refused(int((~keep).sum()))
            env_ids, actions, scores = env_ids[keep], actions[keep], scores[keep]
            step = StepBatch(*(getattr(step, f)[keep] for f in StepBatch.__dataclass_fields__))
            extras, pre_state, new_state = ({k: v[keep] for k, v in d.items()} for d in (extras, pre_state, new_state))
            if not len(env_ids):
                return [PolicyOutputError(REFUSAL)] * len(requests)
        self.clock.lap("checks", lap)
        unrolls, returns, lengths, ended = self.slots.record(  # laps env_state and unrolls
            env_ids, step, actions, extras, pre_state, new_state, scores
        )
        lap = self.clock.start()
        if unrolls is not None:
            self.unrolls.put(unrolls)
        lap = self.clock.lap("unrolls", lap)
        evaluating = int(self.slots.evaluation[env_ids].sum())
        self.metrics.add_inference(len(env_ids) - evaluating, evaluating, returns, lengths,
                                   self.slots.evaluation[ended], self.slots.trusted[ended])
        served = iter(np.split(actions, np.cumsum([n for n, bad in zip(sizes, refused, strict=True) if not bad])[:-1]))
        results = [PolicyOutputError(REFUSAL) if bad else next(served) for bad in refused]
        self.clock.lap("metrics", lap)
        return results

    def _normalized(self, env_ids: np.ndarray, step: StepBatch) -> StepBatch:
        """The step as the agent acts on it and unrolls keep it: observations normalised and
        rewards scaled where the learner does so, the statistics updated by training envs only."""
        if not self.normalization:
            return step
        update = ~self.slots.evaluation[env_ids]
        changed = {}
        if self.normalization.observations is not None:
            changed["observations"] = self.normalization.observations(step.observations, update)
        if self.normalization.rewards is not None:
            changed["rewards"] = self.normalization.rewards(env_ids, step.rewards, step.first, update)
        return dataclasses.replace(step, **changed)

    def _refused_requests(self, actions: np.ndarray, extras: dict[str, np.ndarray], new_state: dict[str, np.ndarray],
                          sizes: list[int]) -> np.ndarray:
        """Per request: does any of its envs have an action out of range or a non-finite output?"""
        bad = self.agent.actions.invalid(actions)
        for value in (*extras.values(), *new_state.values()):
            if np.issubdtype(value.dtype, np.floating):
                bad |= ~np.isfinite(value.reshape(len(value), -1)).all(axis=1)
        if not bad.any():
            return np.zeros(len(sizes), bool)
        return np.logical_or.reduceat(bad, np.cumsum([0, *sizes[:-1]]))


REFUSAL = "observations drove the policy to a non-finite output or an action out of range"
