"""What every agent offers the learner's one inference path and its trainer: the `Agent`
interface, what the learner knows when it builds one (`AgentContext`), the `act`
signature and the layout of the batches agents train on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.graph import graph_function
from seedfleet.errors import UsageError

Array = Any  # a NumPy array or a tf.Tensor

EVAL_EPSILON = 0.001  # exploration of the evaluation envs of epsilon-greedy agents (R2D2, PQN)


def over_steps(steps: list[dict[str, float]], name: str) -> float:
    """A metric over a pass's learner-step metrics: the maximum for "..._max" names, else the mean."""
    return float((np.max if name.endswith("_max") else np.mean)([step[name] for step in steps]))


@dataclass(frozen=True)
class AgentContext:
    """What the learner knows when it builds an agent."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    actions: ActionSpec  # discrete or Box (seedfleet/actions.py)
    seed: int = 0
    max_envs: int = 1024  # env ids the learner serves
    launched_envs: int = 0  # training envs the launcher started with the learner (seedfleet run); 0: not known
    max_frames: int = 0  # the run's frame budget, where schedules end (0: none)
    frame_skip: int = 1  # frames per env step
    train_devices: tuple[str, ...] = ()  # devices a learner step shares out (algorithms/distribute.py); (): one


@dataclass(frozen=True)
class SequenceLayout:
    """How the learner cuts each env's steps into the sequences an agent trains on.

    A sequence has `length` transitions (`length + 1` rows); consecutive sequences of an
    env share `overlap` rows, so each brings `new_steps` env steps. IMPALA: T transitions,
    overlap 1 (every transition in exactly one unroll). R2D2: burn-in + T transitions,
    overlap burn-in + 1 (every transition trained in exactly one sequence, after its burn-in).
    """

    length: int
    overlap: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.overlap <= self.length:
            raise UsageError(f"overlap must be in 1..{self.length}, got {self.overlap}")

    @property
    def rows(self) -> int:
        return self.length + 1

    @property
    def new_steps(self) -> int:
        return self.rows - self.overlap


class Agent(Protocol):
    """An algorithm's agent: acting for the inference path, learning for the trainer."""

    batch_size: int  # sequences per learner step
    layout: SequenceLayout
    actions: ActionSpec  # what `act` and `policy` pick: indices in [0, n), or Box values (unclipped)
    extras_spec: dict[str, tuple[tuple[int, ...], np.dtype]]  # per-step outputs of `act` kept in sequences
    # act / policy (obs, reward, first, env_ids, state) -> (actions, extras or outputs, new state):
    # `act` explores as the algorithm trains (sampling, epsilons); `policy` is greedy (eval, export).
    act: Callable
    policy: Callable
    learn: Callable  # (batch-major batch[, importance weights]) -> metrics

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]: ...

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None: ...

    def checkpointed(self) -> dict[str, tf.Module | tf.Variable]: ...


def acting_graphs(act: Callable, policy: Callable, env: AgentContext, state: dict[str, np.ndarray]
                  ) -> tuple[Callable, Callable]:
    """An agent's `act` and `policy` as graphs for any batch size of `env`'s observations, with
    agent state shaped like `state`'s."""
    signature = act_signature(env.obs_shape, env.obs_dtype, state)
    return graph_function(act, input_signature=signature), graph_function(policy, input_signature=signature)


def act_signature(obs_shape: tuple[int, ...], obs_dtype: np.dtype, state: dict[str, np.ndarray]) -> list:
    """Input signature of `act(obs, reward, first, env_ids, state)` for any batch size."""
    return [
        tf.TensorSpec([None, *obs_shape], tf.as_dtype(obs_dtype)),
        tf.TensorSpec([None], tf.float32),
        tf.TensorSpec([None], tf.bool),
        tf.TensorSpec([None], tf.int32),
        {k: tf.TensorSpec([None, *v.shape[1:]], v.dtype) for k, v in state.items()},
    ]


class Unroll(NamedTuple):
    """Sequences of rows as the learner assembles them: each array is [N, rows, ...]
    batch-major (the queue, replay), or [rows, N, ...] once `time_major` (the losses).

    Row t holds what the env returned at t (observation x_t; the reward, termination
    flags and lost life of the transition into x_t; `first` where x_t opens an episode)
    and what the agent did at x_t (action a_t and its `extras`, the per-step outputs of
    `act` the algorithm keeps: IMPALA's behaviour policy params, R2D2's Q values). `state` is the
    agent state before row 0, [N, ...], whatever the layout of the rows.
    """

    observation: Array
    first: Array
    reward: Array
    terminated: Array
    truncated: Array
    life_lost: Array
    action: Array
    extras: dict[str, Array]
    state: dict[str, Array]

    @property
    def size(self) -> int:
        """Sequences held (batch-major)."""
        return len(self.action)

    def map(self, fn: Callable[[Array], Array], state: bool = True) -> Unroll:
        """`fn` applied to every array, the state's too unless `state` is False."""
        rows = {name: fn(getattr(self, name)) for name in ROW_FIELDS}
        extras = {name: fn(value) for name, value in self.extras.items()}
        kept = {name: fn(value) for name, value in self.state.items()} if state else self.state
        return Unroll(**rows, extras=extras, state=kept)

    @staticmethod
    def concat(unrolls: list[Unroll]) -> Unroll:
        """One batch-major Unroll of several, in order."""
        if len(unrolls) == 1:
            return unrolls[0]
        first = unrolls[0]
        rows = {name: np.concatenate([getattr(u, name) for u in unrolls]) for name in ROW_FIELDS}
        extras = {name: np.concatenate([u.extras[name] for u in unrolls]) for name in first.extras}
        state = {name: np.concatenate([u.state[name] for u in unrolls]) for name in first.state}
        return Unroll(**rows, extras=extras, state=state)

    def as_nest(self) -> dict:
        """A dict of arrays (extras and state as sub-dicts), as replay stores items."""
        return {**{name: getattr(self, name) for name in ROW_FIELDS}, "extras": self.extras, "state": self.state}


ROW_FIELDS = ("observation", "first", "reward", "terminated", "truncated", "life_lost", "action")


def time_major(batch: Unroll) -> Unroll:
    """Batch-major [B, T, ...] rows, as the learner's queue and replay hold them, to [T, B, ...];
    the state stays [B, ...]."""
    return batch.map(lambda v: tf.transpose(v, [1, 0] + list(range(2, len(v.shape)))), state=False)
