"""The wire both sides speak: protocol version, channel options, and the encoding and
checked decoding of the seedfleet.v1 messages' array payloads.

Arrays travel as little-endian bytes; decoding is `np.frombuffer`, no per-env loops.
`decode_steps` checks everything a learner must not trust: byte counts, env ids
(each of the sender's own, at most once) and finite rewards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seedfleet.actions import BOX, ActionSpec
from seedfleet.envs import StepBatch
from seedfleet.v1 import actor_learner_pb2 as pb

PROTOCOL_VERSION = 3  # 2: Steps.actions_read, lockstep enforced; 3: EnvConfig.box_actions, float32 Actions
STOP_METADATA = "seedfleet-stop"  # trailing metadata of a stream the learner ended on a clean stop: its reason
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
FLOAT32_MAX = float(np.finfo(np.float32).max)
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
    actions: ActionSpec

    @classmethod
    def from_proto(cls, config: pb.EnvConfig) -> EnvSpec:
        return cls(config.env_id, tuple(config.observation.shape), np.dtype(config.observation.dtype),
                   ActionSpec.from_proto(config))


class WireError(ValueError):
    """A message that breaks the protocol; the learner closes that stream."""


def _le(dtype: np.dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


def encode_steps(env_ids: np.ndarray, batch: StepBatch, actions_read: int = 0) -> pb.ActorMessage:
    """A Steps message; `actions_read` counts the Actions the stream has read so far (lockstep)."""
    return pb.ActorMessage(
        steps=pb.Steps(
            env_ids=np.asarray(env_ids, "<i4").tobytes(),
            observations=np.asarray(batch.observations, _le(batch.observations.dtype)).tobytes(),
            rewards=np.asarray(batch.rewards, "<f4").tobytes(),
            terminated=np.asarray(batch.terminated, np.uint8).tobytes(),
            truncated=np.asarray(batch.truncated, np.uint8).tobytes(),
            first=np.asarray(batch.first, np.uint8).tobytes(),
            life_lost=np.asarray(batch.life_lost, np.uint8).tobytes() if batch.life_lost.any() else b"",
            actions_read=actions_read,
        )
    )


def encode_actions(actions: np.ndarray, spec: ActionSpec) -> pb.LearnerMessage:
    """One Actions message: [K] indices or [K, *shape] values, as `spec` holds them."""
    return pb.LearnerMessage(actions=pb.Actions(actions=np.asarray(actions, spec.dtype).tobytes()))


def decode_actions(message: pb.LearnerMessage, num_envs: int, spec: ActionSpec) -> np.ndarray:
    """The actions of one Actions message for `num_envs` envs, checked before any env sees them:
    the byte count, indices within [0, n), finite values; Box values come back clipped to the
    bounds ([K, *shape] float32). WireError on a violation."""
    if message.WhichOneof("kind") != "actions":
        raise WireError(f"expected actions, got {message.WhichOneof('kind')}")
    raw = message.actions.actions
    expected = num_envs * math.prod(spec.row_shape) * spec.dtype.itemsize
    if len(raw) != expected:
        raise WireError(f"actions: expected {expected} bytes for {num_envs} envs' {spec.describe()}, got {len(raw)}")
    actions = np.frombuffer(raw, spec.dtype).reshape(num_envs, *spec.row_shape)
    if spec.kind == BOX:
        if not np.isfinite(actions).all():
            raise WireError("actions must be finite (got NaN or inf)")
        return spec.bounded(actions)
    if num_envs and not (0 <= actions.min() and actions.max() < spec.num_actions):
        raise WireError(f"actions: an index outside 0..{spec.num_actions - 1}")
    return actions.astype(np.int64)


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
    # Each bytes field is read once: every read of a protobuf bytes field copies it.
    raw_ids, raw_obs, raw_rewards = steps.env_ids, steps.observations, steps.rewards
    if len(raw_ids) % 4:
        raise WireError(f"env_ids: {len(raw_ids)} bytes is not a whole number of int32")
    env_ids = np.frombuffer(raw_ids, "<i4")
    n = env_ids.shape[0]
    lo, hi = id_range
    if n == 0:
        raise WireError("a Steps message must carry at least one env")
    ascending = n == 1 or bool((env_ids[1:] > env_ids[:-1]).all())  # as actors send them: no repeats
    if not (ascending and lo <= env_ids[0] and env_ids[-1] < hi):
        if env_ids.min() < lo or env_ids.max() >= hi:
            bad = env_ids[(env_ids < lo) | (env_ids >= hi)][0]
            raise WireError(f"unknown env id {bad}: this actor owns ids {lo}..{hi - 1}")
        if np.bincount(env_ids - lo, minlength=hi - lo).max() > 1:
            raise WireError("an env id appears twice in one message")
    dtype = _le(obs_dtype)
    expected = n * math.prod(obs_shape) * dtype.itemsize
    if len(raw_obs) != expected:
        raise WireError(f"observations: expected {expected} bytes for {n} x {obs_shape} {dtype.name}, "
                        f"got {len(raw_obs)}")
    if len(raw_rewards) != 4 * n:
        raise WireError(f"rewards: expected {4 * n} bytes, got {len(raw_rewards)}")
    rewards = np.frombuffer(raw_rewards, "<f4")
    if not (np.abs(rewards) <= min(max_abs_reward, FLOAT32_MAX)).all():  # also false for NaN and inf
        if not np.isfinite(rewards).all():
            raise WireError("rewards must be finite (got NaN or inf)")
        raise WireError(f"rewards: {np.abs(rewards).max():.3g} exceeds --max-abs-reward {max_abs_reward:g}")
    observations = np.frombuffer(raw_obs, dtype).reshape(n, *obs_shape)
    if observations.dtype.kind == "f" and not np.isfinite(observations).all():
        raise WireError("observations must be finite (got NaN or inf)")
    if bounds is not None and not ((observations >= bounds[0]).all() and (observations <= bounds[1]).all()):
        raise WireError("observations: outside the observation space's bounds or --max-abs-observation")
    raw_life_lost = steps.life_lost
    names = ("terminated", "truncated", "first", "life_lost")[: 4 if raw_life_lost else 3]
    raws = (steps.terminated, steps.truncated, steps.first, raw_life_lost)[: len(names)]
    for name, raw in zip(names, raws, strict=True):
        if len(raw) != n:
            raise WireError(f"{name}: expected {n} bytes, got {len(raw)}")
    flags = np.frombuffer(b"".join(raws), np.uint8).reshape(len(names), n)  # one check for every flag
    if flags.max() > 1:
        raise WireError(f"{names[int(np.argmax(flags.max(axis=1)))]}: flags must be 0 or 1")
    flags = flags.view(bool)
    batch = StepBatch(observations=observations, rewards=rewards, terminated=flags[0], truncated=flags[1],
                      first=flags[2], life_lost=flags[3] if raw_life_lost else None)
    return env_ids, batch
