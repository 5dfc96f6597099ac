"""`seedfleet export`: a checkpoint's greedy policy as a TensorFlow SavedModel.

    seedfleet export --checkpoint runs/cartpole-seed0 --out exported/cartpole

Signature `serving_default`, for a batch of B envs:
  inputs   observation [B, *obs_shape] (the env's own dtype: uint8 frames for Atari)
           and, for agents with a state (frame stacking, LSTM, R2D2's previous action):
           first [B] bool (the observation opens an episode), reward [B] float32 (the
           reward that came with it) and state_<name> for each entry of the state;
  outputs  action: the greedy action, [B] int32 for discrete actions, [B, *shape] float32
           for a Box (the Gaussian's mean, clipped to the bounds); logits: the policy's
           parameters, [B, A] (R2D2: the Q values; a Gaussian: its mean and log std, [B, 2 * size]);
           and, with a state, state_<name>: feed them back with the next observation.
A run that normalised its observations (--normalize-observations) exports its statistics as
constants, applied to `observation` as in training (server/normalization.py): feed raw ones.
Signature `initial_state` (stateful agents only): batch_size -> state_<name> zeros.
Load with `tf.saved_model.load(DIR).signatures["serving_default"](observation=...)`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.graph import graph_function
from seedfleet.server.config import ExportConfig
from seedfleet.server.normalization import CLIP
from seedfleet.server.saved_policy import LoadedPolicy, load_policy
from seedfleet.wire import EnvSpec

log = logging.getLogger("seedfleet.export")


class ExportedPolicy(tf.Module):
    """The agent's variables and its greedy `policy`, with flat named inputs for serving."""

    def __init__(self, policy: LoadedPolicy):
        super().__init__()
        self.agent = policy.agent
        self.normalizer = None if policy.observations is None else tuple(
            tf.constant(value) for value in policy.observations.constants())  # (mean, 1 / std)
        spec = EnvSpec.from_proto(policy.env_config)
        state = self.agent.initial_state(1)
        self.state_names = sorted(state)
        specs = [tf.TensorSpec([None, *spec.obs_shape], tf.as_dtype(spec.obs_dtype), name="observation")]
        if state:
            specs += [tf.TensorSpec([None], tf.bool, name="first"), tf.TensorSpec([None], tf.float32, name="reward")]
            specs += [tf.TensorSpec([None, *state[k].shape[1:]], tf.as_dtype(state[k].dtype), name=f"state_{k}")
                      for k in self.state_names]
        self.serve = graph_function(self._serve, input_signature=specs)
        self._state_shapes = {k: (state[k].shape[1:], tf.as_dtype(state[k].dtype)) for k in self.state_names}
        self.initial_state = graph_function(self._initial_state, input_signature=[
            tf.TensorSpec([], tf.int32, name="batch_size")])

    def _serve(self, observation, *rest):
        batch = tf.shape(observation)[0]
        if self.normalizer is not None:  # ObservationNormalizer.apply's float32 arithmetic
            mean, scale = self.normalizer
            observation = tf.clip_by_value((tf.cast(observation, tf.float32) - mean) * scale, -CLIP, CLIP)
        if self.state_names:
            first, reward, *values = rest
            state = dict(zip(self.state_names, values, strict=True))
        else:
            first, reward, state = tf.zeros([batch], tf.bool), tf.zeros([batch], tf.float32), {}
        actions, logits, new_state = self.agent.policy(observation, reward, first, tf.zeros([batch], tf.int32), state)
        return {"action": actions, "logits": tf.cast(logits, tf.float32),
                **{f"state_{k}": new_state[k] for k in self.state_names}}

    def _initial_state(self, batch_size):
        return {f"state_{k}": tf.zeros(tf.concat([[batch_size], np.asarray(shape, np.int32)], 0), dtype)
                for k, (shape, dtype) in self._state_shapes.items()}


def export(policy: LoadedPolicy, out: Path) -> None:
    module = ExportedPolicy(policy)
    signatures = {"serving_default": module.serve.get_concrete_function()}
    if module.state_names:
        signatures["initial_state"] = module.initial_state.get_concrete_function()
    tf.saved_model.save(module, str(out), signatures=signatures)


def main(config: ExportConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config.check()
    policy = load_policy(config.checkpoint)
    export(policy, Path(config.out))
    print(f"exported {policy.checkpoint} to {config.out} (signatures: serving_default"
          f"{', initial_state' if policy.agent.initial_state(1) else ''})", flush=True)
    return 0
