"""Random shifts of image observations in training: DrQ's augmentation (Kostrikov, Yarats and
Fergus, 2020, "Image Augmentation Is All You Need"), which RAD (Laskin et al., 2020) also ran
under PPO's loss. Each image is padded by p pixels of its own edge and cropped back to its size
at a random offset; the acting policy sees the frames as they are.

Padding with edge pixels then cropping at (p + dy, p + dx) is a gather at clipped indices:

    out[i, j] = image[clip(i + dy, 0, H - 1), clip(j + dx, 0, W - 1)],   dy, dx in [-p, p],

so no padded copy is made. One offset serves a whole unroll, its frame history included, so that
the frames the network stacks (algorithms/networks.py) move together."""

from __future__ import annotations

import tensorflow as tf

from seedfleet.algorithms.agent import Unroll

FRAME_HISTORY = "frames"  # the agent state's k - 1 frames before an unroll (RecurrentTorso.initial_state)


def shift_images(images: tf.Tensor, offsets: tf.Tensor) -> tf.Tensor:
    """[B, S, H, W(, C)] images, each row b's S images moved by offsets[b] = (dy, dx) pixels
    (out[b, s, i, j] = images[b, s, clip(i + dy), clip(j + dx)])."""
    height, width = images.shape[2], images.shape[3]
    rows = tf.clip_by_value(tf.range(height)[None] + offsets[:, :1], 0, height - 1)  # [B, H]
    cols = tf.clip_by_value(tf.range(width)[None] + offsets[:, 1:], 0, width - 1)  # [B, W]
    return tf.gather(tf.gather(images, rows, axis=2, batch_dims=1), cols, axis=3, batch_dims=1)


def random_offsets(count: tf.Tensor, pad: int) -> tf.Tensor:
    """[count, 2] offsets (dy, dx), each uniform over the integers in [-pad, pad]."""
    return tf.random.uniform(tf.stack([count, 2]), -pad, pad + 1, tf.int32)


def shifted_history(state: dict, offsets: tf.Tensor) -> dict:
    """The agent state with its frame history ([B, k-1, ...], if it has one) shifted by `offsets`."""
    if FRAME_HISTORY not in state:
        return state
    return {**state, FRAME_HISTORY: shift_images(state[FRAME_HISTORY], offsets)}


def shift_unrolls(batch: Unroll, pad: int) -> Unroll:
    """A time-major batch ([T+1, B, H, W(, C)] observations) with each unroll's rows and frame
    history shifted by one random offset of at most `pad` pixels each way."""
    observation = batch.observation
    offsets = random_offsets(tf.shape(observation)[1], pad)
    swap = [1, 0, *range(2, len(observation.shape))]  # time-major <-> batch-major
    return batch._replace(observation=tf.transpose(shift_images(tf.transpose(observation, swap), offsets), swap),
                          state=shifted_history(batch.state, offsets))


def shift_transitions(observation: tf.Tensor, state: dict, pad: int) -> tuple[tf.Tensor, dict]:
    """Single transitions' [N, H, W(, C)] observations and their frame histories ([N, k-1, ...]),
    each transition shifted by its own random offset of at most `pad` pixels each way."""
    offsets = random_offsets(tf.shape(observation)[0], pad)
    return shift_images(observation[:, None], offsets)[:, 0], shifted_history(state, offsets)
