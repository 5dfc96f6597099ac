"""`seedfleet bench`'s own settings (bench/run.py runs them). TensorFlow-free, so the CLI reads
them and answers `--help` at once."""

from __future__ import annotations

from dataclasses import dataclass

from seedfleet.processes import LOCAL_ACTOR_NICE

MODES = ("env", "serve", "train", "train_only", "train_profile", "all")


@dataclass
class BenchConfig:
    actors: int = 4  # actor processes
    envs_per_actor: int = 64  # envs hosted by each actor
    env_groups: int = 1  # Atari: each actor steps its envs in this many groups (see seedfleet actor)
    env_threads: int = 1  # Atari: each actor's vector-env threads (0: one per core)
    actor_nice: int = LOCAL_ACTOR_NICE  # actors run this much nicer than the learner, as under seedfleet run
    seconds: float = 30.0  # measured seconds per phase, after its warm-up
    warmup_s: float = 10.0  # seconds of warm-up before each phase is measured
    mode: str = "all"  # env, serve, train, train_only, train_profile (oneDNN primitives of a learner step), or all
    json: str = ""  # write the results here as JSON
    plot: str = ""  # with --sweep-actors: a PNG of frames/s against actors
    sweep_actors: str = ""  # comma-separated actor counts (1,2,4,8): env and serve at each
