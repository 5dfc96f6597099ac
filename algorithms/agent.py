"""What every agent offers the learner's one inference path and its trainer: the `Agent`
interface, what the learner knows when it builds one (`AgentContext`), the `act`
signature and the layout of the batches agents train on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import tensorflow as tf


@dataclass(frozen=True)
class AgentContext:
    """What the learner knows when it builds an agent."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    seed: int = 0
    max_envs: int = 1024  # env ids the learner serves
    exploration_envs: int = 0  # envs that per-env exploration rates spread over (0: max_envs)
    max_frames: int = 0  # the run's frame budget, where schedules end (0: none)
    frame_skip: int = 1  # frames per env step


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
            raise ValueError(f"overlap must be in 1..{self.length}, got {self.overlap}")

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
    extras_spec: dict[str, tuple[tuple[int, ...], np.dtype]]  # per-step outputs of `act` kept in sequences
    # act / policy (obs, reward, first, env_ids, state) -> (actions, extras or outputs, new state):
    # `act` explores as the algorithm trains (sampling, epsilons); `policy` is greedy (eval, export).
    act: Callable
    policy: Callable
    learn: Callable  # (batch-major batch[, importance weights]) -> metrics

    def initial_state(self, batch_size: int) -> dict[str, np.ndarray]: ...

    def assign_envs(self, lo: int, hi: int, evaluation: bool) -> None: ...

    def checkpointed(self) -> dict[str, tf.Module | tf.Variable]: ...


def act_signature(obs_shape: tuple[int, ...], obs_dtype: np.dtype, state: dict[str, np.ndarray]) -> list:
    """Input signature of `act(obs, reward, first, env_ids, state)` for any batch size."""
    return [
        tf.TensorSpec([None, *obs_shape], tf.as_dtype(obs_dtype)),
        tf.TensorSpec([None], tf.float32),
        tf.TensorSpec([None], tf.bool),
        tf.TensorSpec([None], tf.int32),
        {k: tf.TensorSpec([None, *v.shape[1:]], v.dtype) for k, v in state.items()},
    ]


def time_major(batch: dict) -> dict:
    """Batch-major [B, T, ...] arrays, as the learner's queue and replay hold them, to [T, B, ...].

    "state" (the agent state before row 0, [B, ...]) stays batch-major.
    """
    return {
        k: v if k == "state" else tf.transpose(v, [1, 0] + list(range(2, len(v.shape)))) for k, v in batch.items()
    }
