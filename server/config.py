"""The learner's settings, and those of `seedfleet eval` and `seedfleet export`: one dataclass
each, every field a flag (and a SEEDFLEET_* variable). TensorFlow-free, so the front-end
processes read them, and the CLI answers `--help` or refuses a mistake without loading it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from seedfleet.errors import UsageError

VIDEO_SUFFIXES = (".gif", ".mp4")  # what `seedfleet eval --video` writes


@dataclass
class LearnerConfig:
    env: str = "CartPole-v1"  # an id of any env family: gymnasium (discrete or Box), MuJoCo, ALE, MinAtar, Catch
    env_options: str = ""  # the env family's settings over the id's, NAME=VALUE,... (ALE: full_action_space=true)
    algo: str = "vtrace"  # the agent: vtrace (IMPALA), appo (IMPALA trained as PPO), pqn, r2d2, or sac (Box actions)
    address: str = "[::]:8470"  # where to listen: host:port (port 0 picks one) or unix:PATH
    seed: int = 0  # seeds the network, action sampling and the envs
    logdir: str = ""  # TensorBoard and summary.json; default runs/<env>-<algo>-seed<seed>
    max_frames: int = 0  # stop after this many env frames (0: no limit)
    target_return: float = math.nan  # stop once the mean return over 100 episodes reaches it
    max_envs: int = 1024  # env slots on the learner, over all actors
    max_abs_reward: float = 1e9  # a stream sending a larger reward is closed (INVALID_ARGUMENT)
    normalize_observations: bool = False  # float observations scaled by running mean and std (Box envs' default)
    scale_rewards: bool = False  # rewards divided by the running std of the discounted return (Box envs' default)
    check_observation_bounds: bool = True  # a stream sending observations outside the space's bounds is closed
    max_abs_observation: float = 1e6  # ... as is one sending a float observation larger in magnitude (inf: no limit)
    max_envs_per_stream: int = 256  # envs one actor stream may run (more is refused: INVALID_ARGUMENT)
    stream_idle_s: float = 60.0  # a stream silent this long is closed and its envs freed (DEADLINE_EXCEEDED)
    keepalive_s: float = 20.0  # the server pings idle connections this often; a dead peer's go within 2x
    inference_batch_size: int = 256  # flush a batch once this many envs wait
    inference_timeout_ms: float = 4.0  # ... or once the oldest request waited this long
    queue_unrolls: int = 0  # unrolls buffered for the trainer (0: two training batches)
    sync_acting: bool = False  # acting pauses from each complete batch until it is trained on (policy lag near 0;
    # server/unroll_queue.py); off: actors act on the next batch while the trainer trains on this one
    progress_interval_s: float = 5.0  # seconds between console progress lines
    checkpoint_interval_s: float = 600.0  # seconds between checkpoints in <logdir>/checkpoints (0: only on stop)
    keep_checkpoints: int = 3  # the newest this many checkpoints are kept
    fresh: bool = False  # ignore the logdir's checkpoints and start from scratch (new ones are still written)
    tls_cert: str = ""  # PEM certificate (chain) of the learner: TLS on its port, with --tls-key
    tls_key: str = ""  # PEM private key of --tls-cert
    tls_client_ca: str = ""  # PEM CA: every actor must present a certificate it signed (mTLS)
    token_file: str = ""  # file holding the token every actor must send (else UNAUTHENTICATED)
    insecure: bool = False  # allow plain TCP with no token off loopback (anyone who reaches the port takes part)
    target_from: str = "trusted"  # whose episodes can end a run on --target-return: trusted or any (see README)
    frontends: int = 0  # processes serving the actors' streams (gRPC and decoding) for this one; 0: none,
    # the learner serves them on its own event loop (server/frontends.py: when one core of gRPC is the limit)
    train_devices: int = 0  # devices each learner step is shared over: 0 = every GPU TensorFlow sees (one
    # device without), N: the first N GPUs, or N of TensorFlow's CPU devices on a host without GPUs
    wandb_project: str = ""  # log to this Weights & Biases project too (pip install 'seedfleet[wandb]'); "": none
    wandb_entity: str = ""  # the W&B entity (team or user); "": W&B's default
    wandb_group: str = ""  # the W&B group, to gather seeds of one experiment
    wandb_name: str = ""  # the W&B run's display name; "": W&B's own

    def log_dir(self) -> Path:
        """--logdir, or its default runs/<env>-<algo>-seed<seed>."""
        return Path(self.logdir or f"runs/{self.env.replace('/', '_')}-{self.algo}-seed{self.seed}")

    def check(self) -> None:
        """Refuses settings that cannot work on any machine: said before TensorFlow loads."""
        if self.frontends < 0:
            raise UsageError(f"--frontends {self.frontends}: 0 (none) or more")
        if self.frontends > 1 and self.address.startswith("unix:"):
            raise UsageError("--frontends: several processes share a TCP port, not a unix: socket")


@dataclass
class EvalConfig:
    checkpoint: str = ""  # a checkpoint directory, or a log dir (its newest checkpoint)
    episodes: int = 10  # episodes to play
    envs: int = 8  # envs stepped together
    epsilon: float = 0.0  # probability of a uniform random action (0: greedy)
    sample: bool = False  # act as training does (the agent's `act`: its policy's samples) instead of greedily
    seed: int = 12345  # seeds the envs and the random actions
    video: str = ""  # write env 0's first episode here (.gif or .mp4)
    video_fps: int = 30  # frames per second of the video

    def check(self) -> None:
        """Refuses what cannot play or be written: said before TensorFlow loads."""
        if not self.checkpoint:
            raise UsageError("--checkpoint is required")
        if self.episodes < 1:
            raise UsageError(f"--episodes {self.episodes}: at least 1")
        if self.video and Path(self.video).suffix not in VIDEO_SUFFIXES:
            raise UsageError(f"--video must end in .gif or .mp4, got {self.video}")


@dataclass
class ExportConfig:
    checkpoint: str = ""  # a checkpoint directory, or a log dir (its newest checkpoint)
    out: str = ""  # the SavedModel directory to write

    def check(self) -> None:
        """Both paths are needed: said before TensorFlow loads."""
        if not self.checkpoint or not self.out:
            raise UsageError("--checkpoint and --out are required")
