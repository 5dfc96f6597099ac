"""Per-env state kept on the learner: agent state, the partial unroll, episode counters.

Every array has the env id as its leading index, so a batch of envs is updated with
one fancy-indexed NumPy assignment per field: no per-env Python loop.

An unroll holds T + 1 rows; consecutive unrolls of an env overlap by `overlap` rows
(by default one: the last row of one is the first of the next, so every transition
t -> t+1 lands in exactly one unroll; R2D2 overlaps by its burn-in plus one). Each
unroll carries the agent state from before its row 0, which is what the learner
unrolls the network from (stored state, as in R2D2 and SEED).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import ROW_FIELDS, Agent, SequenceLayout, Unroll
from seedfleet.envs import StepBatch
from seedfleet.stage_clock import StageClock
from seedfleet.wire import EnvSpec

StateArrays = dict[str, np.ndarray]


class EnvSlots:
    def __init__(
        self,
        capacity: int,
        layout: SequenceLayout,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype,
        extras_spec: dict[str, tuple[tuple[int, ...], np.dtype]],
        initial_state: Callable[[int], StateArrays],
        clock: StageClock | None = None,
        actions: ActionSpec | None = None,
    ):
        """`actions`: what a step's action row holds (None: one int32 index)."""
        self.clock = clock or StageClock()  # record's CPU: env_state and unrolls
        self.rows_per_unroll = layout.rows
        self.overlap = layout.overlap
        shape = (capacity, self.rows_per_unroll)
        self.rows: dict[str, np.ndarray] = {
            "observation": np.zeros(shape + tuple(obs_shape), obs_dtype),
            "first": np.zeros(shape, bool),
            "reward": np.zeros(shape, np.float32),
            "terminated": np.zeros(shape, bool),
            "truncated": np.zeros(shape, bool),
            "life_lost": np.zeros(shape, bool),
            "action": np.zeros(shape + actions.row_shape, actions.dtype) if actions else np.zeros(shape, np.int32),
        }
        for name, (extra_shape, dtype) in extras_spec.items():
            self.rows[name] = np.zeros(shape + tuple(extra_shape), dtype)
        self._initial_state = initial_state
        self.state = initial_state(capacity)  # the agent state now
        self.start_state = initial_state(capacity)  # the agent state before row 0
        self.next_start_state = initial_state(capacity)  # ... before the next unroll's row 0
        self.length = np.zeros(capacity, np.int64)  # rows filled in the partial unroll
        self.episode_return = np.zeros(capacity, np.float64)
        self.episode_length = np.zeros(capacity, np.int64)
        self.evaluation = np.zeros(capacity, bool)  # evaluation envs: never trained on
        self.trusted = np.ones(capacity, bool)  # their episodes count for the target return

    @classmethod
    def for_agent(cls, capacity: int, agent: Agent, spec: EnvSpec, clock: StageClock | None = None) -> EnvSlots:
        """Slots for `capacity` envs of `spec`, laid out as `agent` trains."""
        return cls(capacity, agent.layout, spec.obs_shape, spec.obs_dtype, agent.extras_spec, agent.initial_state,
                   clock, spec.actions)

    def reset(self, lo: int, hi: int, evaluation: bool = False, trusted: bool = True) -> None:
        """Forgets envs lo..hi-1: a new actor owns them. Their partial unrolls are dropped."""
        self.evaluation[lo:hi] = evaluation
        self.trusted[lo:hi] = trusted
        self.length[lo:hi] = 0
        self.episode_return[lo:hi] = 0
        self.episode_length[lo:hi] = 0
        for name, value in self._initial_state(hi - lo).items():
            self.state[name][lo:hi] = value

    def gather_state(self, env_ids: np.ndarray) -> StateArrays:
        return {name: value[env_ids] for name, value in self.state.items()}

    def record(
        self,
        env_ids: np.ndarray,
        step: StepBatch,
        actions: np.ndarray,
        extras: dict[str, np.ndarray],
        pre_state: StateArrays,
        new_state: StateArrays,
        scores: np.ndarray | None = None,
    ) -> tuple[Unroll | None, np.ndarray, np.ndarray, np.ndarray]:
        """Appends one row per env and returns completed unrolls and finished episodes.

        `pre_state` is the agent state the step was taken from, `new_state` the state
        after it. `scores`: the env's own rewards, which episode returns add up, where the
        rows keep scaled ones (server/normalization.py); None: the step's. Returns (unrolls
        or None, episode returns, episode lengths, the env ids whose episodes ended, in that
        order): unrolls hold [N, T+1, ...] rows and the [N, ...] state from before their first
        row; evaluation envs' unrolls are left out.
        """
        lap = self.clock.start()
        pos = self.length[env_ids]
        for rows_at, states in ((pos == 0, self.start_state),
                                (pos == self.rows_per_unroll - self.overlap, self.next_start_state)):
            if rows_at.any():
                for name, value in states.items():
                    value[env_ids[rows_at]] = pre_state[name][rows_at]
        fields = {
            "observation": step.observations,
            "first": step.first,
            "reward": step.rewards,
            "terminated": step.terminated,
            "truncated": step.truncated,
            "life_lost": step.life_lost,
            "action": actions,
            **extras,
        }
        for name, value in fields.items():
            self.rows[name][env_ids, pos] = value
        pos = pos + 1
        self.length[env_ids] = pos
        for name, value in new_state.items():
            self.state[name][env_ids] = value

        lap = self.clock.lap("env_state", lap)
        unrolls = None
        complete = pos == self.rows_per_unroll
        if complete.any():
            done_ids = env_ids[complete]
            train_ids = done_ids[~self.evaluation[done_ids]]
            if len(train_ids):
                rows = {name: value[train_ids] for name, value in self.rows.items()}
                unrolls = Unroll(**{name: rows.pop(name) for name in ROW_FIELDS}, extras=rows,
                                 state={name: value[train_ids] for name, value in self.start_state.items()})
            keep = slice(self.rows_per_unroll - self.overlap, None)
            for value in self.rows.values():
                value[done_ids, : self.overlap] = value[done_ids, keep]
            for name, value in self.start_state.items():
                value[done_ids] = self.next_start_state[name][done_ids]
            self.length[done_ids] = self.overlap
        lap = self.clock.lap("unrolls", lap)

        first = step.first
        scores = step.rewards if scores is None else scores
        returns = np.where(first, 0.0, self.episode_return[env_ids] + scores)
        lengths = np.where(first, 0, self.episode_length[env_ids] + 1)
        ended = step.terminated | step.truncated
        self.episode_return[env_ids] = np.where(ended, 0.0, returns)
        self.episode_length[env_ids] = np.where(ended, 0, lengths)
        self.clock.lap("env_state", lap)
        return unrolls, returns[ended], lengths[ended], env_ids[ended]
