"""`seedfleet eval`: a checkpoint's policy played locally, with a video of its first episode.

    seedfleet eval --checkpoint runs/cartpole-seed0 --episodes 100 --video cartpole.gif

The agent is rebuilt from the setup the checkpoint recorded (server/saved_policy.py) and acts
with its greedy policy (`--epsilon` mixes in uniform random actions, 0.001 being the
usual Atari evaluation), or with `--sample` as training acts (the agent's `act`: V-trace and
APPO sample their policy, SAC its squashed Gaussian, R2D2 takes its per-env Ape-X epsilons),
which is what the training return measures. Envs are made as actors make them. Each env plays
its share of the episodes, so short episodes are not over-counted. The video shows env 0's first
episode: the rendered screen, or for Atari the 84x84 frames the agent sees.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.envs import VectorEnvs, make_envs_from
from seedfleet.server.config import EvalConfig
from seedfleet.server.saved_policy import LoadedPolicy, load_policy

log = logging.getLogger("seedfleet.eval")


VIDEO_MIN_HEIGHT = 240  # small pictures are scaled up by a whole factor to at least this


def as_picture(frame: np.ndarray) -> np.ndarray:
    """Any render or observation as RGB uint8 [H, W, 3]: floats and bools in [0, 1] scaled to
    [0, 255], grey repeated to three channels, other channel counts shown as their maximum,
    and images under VIDEO_MIN_HEIGHT pixels enlarged by a whole factor (10x10 MinAtar
    boards, 84x84 Atari frames)."""
    frame = np.asarray(frame)
    if frame.dtype != np.uint8:
        frame = (np.clip(frame.astype(np.float32), 0.0, 1.0) * 255).astype(np.uint8)
    if frame.ndim == 3 and frame.shape[-1] != 3:
        frame = frame.max(axis=-1)
    if frame.ndim == 2:
        frame = np.stack([frame] * 3, axis=-1)
    scale = -(-VIDEO_MIN_HEIGHT // frame.shape[0])
    return np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1) if scale > 1 else frame


def _screen(envs: VectorEnvs, observations: np.ndarray) -> np.ndarray:
    """Env 0's picture: its family's render (Atari's, which does not render: the observation)."""
    return as_picture(envs.render_first(observations))


def play(policy: LoadedPolicy, config: EvalConfig) -> tuple[np.ndarray, list[np.ndarray]]:
    """Plays `config.episodes` episodes; returns their returns and env 0's first episode's frames."""
    n = max(1, min(config.envs, config.episodes))
    quota = np.full(n, config.episodes // n) + (np.arange(n) < config.episodes % n)
    envs = make_envs_from(policy.env_config, n, render_mode="rgb_array" if config.video else None)
    rng = np.random.default_rng(config.seed)
    agent, returns, frames = policy.agent, [], []
    act = agent.act if config.sample else agent.policy
    try:
        batch = envs.reset([config.seed + i for i in range(n)])
        state = agent.initial_state(n)
        env_ids = np.arange(n, dtype=np.int32)
        running, finished = np.zeros(n), np.zeros(n, int)
        recording = bool(config.video)
        while (finished < quota).any():
            if recording:
                frames.append(_screen(envs, batch.observations))
            with tf.device(policy.device):
                actions, _, state = act(policy.observed(batch.observations), batch.rewards, batch.first,
                                        env_ids, state)
            actions = actions.numpy()
            explore = rng.random(n) < config.epsilon
            actions[explore] = envs.actions.random(rng, int(explore.sum()))
            batch = envs.step(envs.actions.bounded(actions))
            running += batch.rewards
            for i in np.flatnonzero(batch.terminated | batch.truncated):
                if finished[i] < quota[i]:
                    returns.append(running[i])
                    finished[i] += 1
                running[i] = 0.0
                if i == 0 and recording:
                    frames.append(_screen(envs, batch.observations))
                    recording = False
    finally:
        envs.close()
    return np.asarray(returns), frames


def write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gif":
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:  # .mp4, the only other suffix EvalConfig.check lets through
        imageio.mimsave(path, frames, fps=fps, macro_block_size=1)


def main(config: EvalConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config.check()
    policy = load_policy(config.checkpoint)
    returns, frames = play(policy, config)
    print(f"{policy.env_config.env_id} from {policy.checkpoint}: {len(returns)} episodes"
          f"{' (sampled)' if config.sample else ''}, "
          f"mean return {returns.mean():.2f}, std {returns.std():.2f}, min {returns.min():.1f}, "
          f"max {returns.max():.1f}", flush=True)
    if config.video:
        write_video(Path(config.video), frames, config.video_fps)
        print(f"video of the first episode ({len(frames)} frames): {config.video}", flush=True)
    return 0
