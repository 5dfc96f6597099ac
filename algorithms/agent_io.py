"""What every agent shares with the learner's one inference path: the `act` signature
and the layout of the batches it trains on."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


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
