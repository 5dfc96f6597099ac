"""The wire both sides speak: protocol version, channel options, and the encoding and
checked decoding of the seedfleet.v1 messages' array payloads.

Arrays travel as little-endian bytes; decoding is `np.frombuffer`, no per-env loops.
`decode_steps` checks everything a learner must not trust: byte counts, env ids
(each of the sender's own, at most once) and finite rewards.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from seedfleet.envs import AtariSettings, StepBatch
from seedfleet.v1 import actor_learner_pb2 as pb

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS = [  # both ends of the actor-learner channel
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


@dataclass(frozen=True)
class EnvSpec:
    """An env as both sides agree on it, read once off the handshake's EnvConfig."""

    env_id: str
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int

    @classmethod
    def from_proto(cls, config: pb.EnvConfig) -> EnvSpec:
        return cls(config.env_id, tuple(config.observation.shape), np.dtype(config.observation.dtype),
                   config.num_actions)


class WireError(ValueError):
    """A message that breaks the protocol; the learner closes that stream."""


def _le(dtype: np.dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


def atari_to_proto(settings: AtariSettings) -> pb.AtariPreprocessing:
    return pb.AtariPreprocessing(**dataclasses.asdict(settings))


def atari_from_proto(config: pb.EnvConfig) -> AtariSettings | None:
    """The Atari preprocessing a learner asks for, or None for a plain gymnasium env."""
    if not config.HasField("atari"):
        return None
    return AtariSettings(**{f.name: getattr(config.atari, f.name) for f in dataclasses.fields(AtariSettings)})


def encode_steps(env_ids: np.ndarray, batch: StepBatch) -> pb.ActorMessage:
    return pb.ActorMessage(
        steps=pb.Steps(
            env_ids=np.asarray(env_ids, "<i4").tobytes(),
            observations=np.asarray(batch.observations, _le(batch.observations.dtype)).tobytes(),
            rewards=np.asarray(batch.rewards, "<f4").tobytes(),
            terminated=np.asarray(batch.terminated, np.uint8).tobytes(),
            truncated=np.asarray(batch.truncated, np.uint8).tobytes(),
            first=np.asarray(batch.first, np.uint8).tobytes(),
            life_lost=np.asarray(batch.life_lost, np.uint8).tobytes() if batch.life_lost.any() else b"",
        )
    )


def encode_actions(actions: np.ndarray) -> pb.LearnerMessage:
    return pb.LearnerMessage(actions=pb.Actions(actions=np.asarray(actions, "<i4").tobytes()))


def decode_actions(message: pb.LearnerMessage, num_envs: int) -> np.ndarray:
    if message.WhichOneof("kind") != "actions":
        raise WireError(f"expected actions, got {message.WhichOneof('kind')}")
    actions = np.frombuffer(message.actions.actions, "<i4")
    if actions.shape != (num_envs,):
        raise WireError(f"expected {num_envs} actions, got {actions.shape[0]}")
    return actions.astype(np.int64)


def _flags(raw: bytes, n: int, name: str) -> np.ndarray:
    flags = np.frombuffer(raw, np.uint8)
    if flags.shape != (n,):
        raise WireError(f"{name}: expected {n} bytes, got {len(raw)}")
    if flags.max(initial=0) > 1:
        raise WireError(f"{name}: flags must be 0 or 1")
    return flags.view(bool)


def decode_steps(
    steps: pb.Steps,
    id_range: tuple[int, int],
    obs_shape: tuple[int, ...],
    obs_dtype: np.dtype,
    max_abs_reward: float = math.inf,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, StepBatch]:
    """Checks and decodes one Steps message from an actor owning env ids [lo, hi), with
    rewards at most `max_abs_reward` in magnitude and observations within `bounds` (low,
    high: the observation space's).

    Returns (env_ids int32 [K], StepBatch); raises WireError on any violation.
    """
    if len(steps.env_ids) % 4:
        raise WireError(f"env_ids: {len(steps.env_ids)} bytes is not a whole number of int32")
    env_ids = np.frombuffer(steps.env_ids, "<i4")
    n = env_ids.shape[0]
    lo, hi = id_range
    if n == 0:
        raise WireError("a Steps message must carry at least one env")
    if env_ids.min() < lo or env_ids.max() >= hi:
        bad = env_ids[(env_ids < lo) | (env_ids >= hi)][0]
        raise WireError(f"unknown env id {bad}: this actor owns ids {lo}..{hi - 1}")
    if np.bincount(env_ids - lo, minlength=hi - lo).max() > 1:
        raise WireError("an env id appears twice in one message")
    dtype = _le(obs_dtype)
    expected = n * int(np.prod(obs_shape)) * dtype.itemsize
    if len(steps.observations) != expected:
        raise WireError(
            f"observations: expected {expected} bytes for {n} x {obs_shape} {dtype.name}, "
            f"got {len(steps.observations)}"
        )
    if len(steps.rewards) != 4 * n:
        raise WireError(f"rewards: expected {4 * n} bytes, got {len(steps.rewards)}")
    rewards = np.frombuffer(steps.rewards, "<f4")
    if not np.isfinite(rewards).all():
        raise WireError("rewards must be finite (got NaN or inf)")
    if np.abs(rewards).max() > max_abs_reward:
        raise WireError(f"rewards: {np.abs(rewards).max():.3g} exceeds --max-abs-reward {max_abs_reward:g}")
    observations = np.frombuffer(steps.observations, dtype).reshape(n, *obs_shape)
    if observations.dtype.kind == "f" and not np.isfinite(observations).all():
        raise WireError("observations must be finite (got NaN or inf)")
    if bounds is not None and not ((observations >= bounds[0]).all() and (observations <= bounds[1]).all()):
        raise WireError("observations: outside the observation space's bounds")
    batch = StepBatch(
        observations=observations,
        rewards=rewards,
        terminated=_flags(steps.terminated, n, "terminated"),
        truncated=_flags(steps.truncated, n, "truncated"),
        first=_flags(steps.first, n, "first"),
        life_lost=_flags(steps.life_lost, n, "life_lost") if steps.life_lost else None,
    )
    return env_ids, batch
