"""`seedfleet run`'s own settings: the local actors it starts beside the learner
(deploy/local.py). TensorFlow-free, so the CLI reads them and answers `--help` at once."""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.processes import LOCAL_ACTOR_NICE


@dataclass
class LaunchConfig:
    actors: int = 2  # local actor processes
    envs_per_actor: int = 16  # envs hosted by each actor
    eval_actors: int = 0  # extra actors whose envs evaluate (greedy, not trained on, reported apart)
    eval_envs: int = 0  # envs hosted by each evaluation actor (0: --envs-per-actor)
    env_groups: int = 1  # Atari: each training actor steps its envs in this many groups (see seedfleet actor)
    actor_nice: int = LOCAL_ACTOR_NICE  # actors run this much nicer than the learner (seedfleet actor --nice)
