"""A checkpoint's policy, rebuilt for `seedfleet eval` and `seedfleet export`.

The agent is rebuilt from the run setup the checkpoint recorded (server/checkpoint.py,
`RunSetup`: env, algo, network and agent configs), read with the same checks a restore
makes (format, file sizes, the variables' checksums), with the observation statistics the run
normalised with (server/normalization.py), which eval and export apply as training did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Agent
from seedfleet.server.assembly import compute_device, env_config_for, make_agent
from seedfleet.server.checkpoint import load_variables, newest_checkpoint, read_setup, read_statistics
from seedfleet.server.normalization import ObservationNormalizer, saved_observation_normalizer
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import EnvSpec


@dataclass
class LoadedPolicy:
    agent: Agent
    env_config: pb.EnvConfig
    checkpoint: Path
    device: str
    observations: ObservationNormalizer | None  # the run's observation statistics, if it normalised

    def observed(self, observations: np.ndarray) -> np.ndarray:
        """Observations as the agent saw them in training: normalised where the run normalised."""
        return observations if self.observations is None else self.observations.apply(observations)


def load_policy(path: str | Path) -> LoadedPolicy:
    """The agent of a checkpoint (or a log dir's newest), rebuilt from its recorded setup."""
    checkpoint = newest_checkpoint(Path(path))
    learner, algo, algo_config, network = read_setup(checkpoint).configs()
    env_config, _ = env_config_for(learner)
    device = compute_device()
    with tf.device(device):
        agent = make_agent(learner, algo, algo_config, network, env_config, device)
    load_variables(checkpoint, agent.checkpointed())
    normalizer = None
    if learner.normalize_observations:
        normalizer = saved_observation_normalizer(EnvSpec.from_proto(env_config).obs_shape,
                                                  read_statistics(checkpoint))
    return LoadedPolicy(agent, env_config, checkpoint, device, normalizer)
