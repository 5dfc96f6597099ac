"""`seedfleet eval` and `seedfleet export` on checkpoints the learner's own code wrote."""

import json
import re
import subprocess
import sys
import threading
import types

import imageio.v2 as imageio
import numpy as np
import pytest
import tensorflow as tf
from conftest import Proc, cli_in_process, seedfleet

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.r2d2.config import VECTOR_OBSERVATION_DEFAULTS
from seedfleet.algorithms.registry import ALGORITHMS
from seedfleet.deploy.cli import main
from seedfleet.server.assembly import LearnerConfig, env_config_for, make_agent
from seedfleet.server.checkpoint import CheckpointStore, LearnerCheckpoints
from seedfleet.server.config import EvalConfig
from seedfleet.server.evaluate import play
from seedfleet.server.metrics import Metrics
from seedfleet.server.run_setup import RunSetup
from seedfleet.server.saved_policy import load_policy


def _checkpoint(logdir, algo: str, env: str = "CartPole-v1", network: NetworkConfig | None = None,
                scale: float | None = 0.3):
    """An agent with weights moved off their initial values (by N(0, scale), or set to 0 if
    `scale` is None), saved as the learner saves."""
    config = LearnerConfig(env=env, algo=algo, logdir=str(logdir))
    algo_config = ALGORITHMS[algo].config_class(**(VECTOR_OBSERVATION_DEFAULTS if algo == "r2d2" else {}))
    network = network or NetworkConfig()
    env_config, _ = env_config_for(config)
    agent = make_agent(config, ALGORITHMS[algo], algo_config, network, env_config, "/CPU:0")
    rng = np.random.default_rng(1)
    for module in agent.checkpointed().values():
        for variable in getattr(module, "trainable_variables", ()):
            if scale is None:
                variable.assign(tf.zeros_like(variable))
            else:
                variable.assign_add(rng.normal(0, scale, variable.shape).astype(np.float32))
    trainer = types.SimpleNamespace(lock=threading.Lock(), state=lambda: None)
    store = CheckpointStore(logdir / "checkpoints")
    path = LearnerCheckpoints(store, agent, trainer, Metrics(1), RunSetup.of(config, algo_config, network)).save()
    return agent, path


def _random_observations(rng, batch: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.uint8:
        return rng.integers(0, 256, (batch, *shape), dtype=np.uint8)
    if dtype == np.dtype(bool):
        return rng.random((batch, *shape)) < 0.3
    return rng.normal(0, 1, (batch, *shape)).astype(dtype)


def _assert_export_acts_as_the_agent(agent, out, obs_shape: tuple[int, ...], obs_dtype: np.dtype) -> None:
    """The SavedModel in `out` and the agent choose the same actions over a few steps, state fed back."""
    serving = tf.saved_model.load(str(out)).signatures
    rng = np.random.default_rng(0)
    batch = 16
    state = agent.initial_state(batch)
    stateful = bool(state)
    exported_state = {k: v for k, v in serving["initial_state"](batch_size=tf.constant(batch)).items()} \
        if stateful else {}
    assert set(exported_state) == {f"state_{k}" for k in state}
    first = np.ones(batch, bool)
    reward = np.zeros(batch, np.float32)
    differing = 0
    for _ in range(5):  # a few steps, feeding the state back
        obs = _random_observations(rng, batch, obs_shape, obs_dtype)
        actions, logits, state = agent.policy(obs, reward, first, np.zeros(batch, np.int32), state)
        if stateful:
            out_ = serving["serving_default"](observation=obs, first=first, reward=reward, **exported_state)
            exported_state = {k: v for k, v in out_.items() if k.startswith("state_")}
        else:
            out_ = serving["serving_default"](observation=obs)
        np.testing.assert_array_equal(out_["action"].numpy(), actions.numpy())
        np.testing.assert_allclose(out_["logits"].numpy(), logits.numpy(), rtol=1e-5, atol=1e-5)
        differing += len(np.unique(actions.numpy())) > 1
        first, reward = np.zeros(batch, bool), rng.normal(0, 1, batch).astype(np.float32)
    assert differing > 0  # the comparison saw more than one action


def _export(tmp_path, capsys) -> object:
    """`seedfleet export` on the checkpoint (in this process: test_native_logs.py starts the
    command on its own and checks that TensorFlow's lines stay quiet)."""
    out = tmp_path / "exported"
    code, output = cli_in_process(capsys, "export", "--checkpoint", str(tmp_path / "run"), "--out", str(out))
    lines = output.splitlines()
    assert code == 0 and len(lines) == 1 and lines[0].startswith("exported "), lines
    return out


@pytest.mark.parametrize("algo", ["vtrace", "r2d2", "iqn", "qrdqn"])
def test_the_exported_saved_model_acts_as_the_learner_does(tmp_path, capsys, algo):
    agent, _ = _checkpoint(tmp_path / "run", algo)
    _assert_export_acts_as_the_agent(agent, _export(tmp_path, capsys), (4,), np.dtype(np.float32))


IMAGE_ENVS = [  # [H, W, C] observations: colour images stacked on the learner, and MinAtar's bool planes
    ("seedfleet/MovingDotRGB-v0", (36, 36, 3), np.dtype(np.uint8), 4),
    ("MinAtar/Breakout-v1", (10, 10, 4), np.dtype(bool), 0),
]


@pytest.mark.parametrize("env,shape,dtype,frame_stack", IMAGE_ENVS)
def test_image_observations_through_checkpoint_eval_and_export(tmp_path, capsys, env, shape, dtype, frame_stack):
    agent, _ = _checkpoint(tmp_path / "run", "vtrace", env, NetworkConfig(frame_stack=frame_stack))
    assert agent.net.torso.obs_shape == shape and agent.net.torso.obs_dtype == dtype
    _assert_export_acts_as_the_agent(agent, _export(tmp_path, capsys), shape, dtype)
    video = tmp_path / "first.gif"
    code, output = cli_in_process(capsys, "eval", "--checkpoint", str(tmp_path / "run"), "--episodes", "3",
                                  "--envs", "3", "--video", str(video))
    assert code == 0 and re.search(r"3 episodes, mean return", output), output[-3000:]
    frames = imageio.mimread(video, memtest=False)
    assert frames[0].shape[0] >= 240 and frames[0].shape[-1] in (3, 4)
    assert len({frame.tobytes() for frame in frames}) > 1  # the picture moves


def _assert_video_of_cartpole(output: str, video, frames_merged: bool) -> None:
    """5 episodes played, and the first one filmed at CartPole's 600x400 with the pole moving."""
    found = re.search(r"(\d+) episodes, mean return ([\d.]+), std ([\d.]+)", output)
    assert found and int(found.group(1)) == 5 and float(found.group(2)) >= 8, output[-3000:]  # 1 a step
    count, shape, distinct = read_video(video)
    length = int(re.search(r"video of the first episode \((\d+) frames\)", output).group(1))
    assert length >= 9 and shape == [400, 600, 3]
    if frames_merged:  # a GIF merges frames that repeat the one before (a cart moving less than a pixel)
        assert 1 < count <= length
    else:
        assert count == length
    assert distinct > 1  # the pole moves


def test_eval_writes_an_mp4_video_on_a_headless_machine(tmp_path):
    """A process of its own, with no display variables: SDL looks for no display."""
    _checkpoint(tmp_path / "run", "vtrace")
    video = tmp_path / "first.mp4"
    run = Proc(seedfleet("eval", "--checkpoint", str(tmp_path / "run"), "--episodes", "5", "--envs", "2",
                         "--video", str(video)), env={"XDG_RUNTIME_DIR": None, "SDL_VIDEODRIVER": None})
    assert run.popen.wait(timeout=120) == 0, run.output()[-3000:]
    assert "XDG_RUNTIME_DIR" not in run.output()
    _assert_video_of_cartpole(run.output(), video, frames_merged=False)


def test_eval_writes_a_gif_video(tmp_path, capsys):
    _checkpoint(tmp_path / "run", "vtrace")
    video = tmp_path / "first.gif"
    code, output = cli_in_process(capsys, "eval", "--checkpoint", str(tmp_path / "run"), "--episodes", "5",
                                  "--envs", "2", "--video", str(video))
    assert code == 0, output[-3000:]
    _assert_video_of_cartpole(output, video, frames_merged=True)


READ_VIDEO = ("import imageio, json, sys; frames = imageio.mimread(sys.argv[1], memtest=False); "
              "print(json.dumps([len(frames), list(frames[0].shape), len({f.tobytes() for f in frames[:10]})]))")


def read_video(path) -> tuple[int, list[int], int]:
    """(frames, the first frame's shape, distinct frames among the first 10) of a video, read in a
    process of its own: in this one, gRPC's fork handlers can write a line into the stderr of the
    ffmpeg that imageio starts, and imageio parses that stderr (seen on a busy machine)."""
    done = subprocess.run([sys.executable, "-c", READ_VIDEO, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return tuple(json.loads(done.stdout))


def test_eval_samples_the_policy_only_when_asked(tmp_path):
    """All weights 0: the policy is 50/50 on CartPole. Greedy play takes the first of the tied
    actions every step, so the pole falls in about 9 steps; `--sample` plays as training acts,
    a coin flip a step, which a uniform random policy keeps up for about 22 steps."""
    _checkpoint(tmp_path / "run", "vtrace", scale=None)
    policy = load_policy(tmp_path / "run")
    greedy, _ = play(policy, EvalConfig(episodes=40))
    sampled, _ = play(policy, EvalConfig(episodes=40, sample=True))
    assert greedy.max() <= 11 and len(greedy) == 40, greedy
    assert sampled.mean() > 15 and sampled.max() > 20 and len(sampled) == 40, sampled


def test_eval_and_export_refuse_what_they_cannot_do_in_one_line(tmp_path, capsys):
    """Said before TensorFlow loads (test_cli.py's QUICK_COMMANDS checks that it stays unloaded)."""
    _checkpoint(tmp_path / "run", "vtrace")
    refusals = {("eval", "--checkpoint", str(tmp_path / "run"), "--video", str(tmp_path / "x.avi")):
                "--video must end in .gif or .mp4, got",
                ("eval", "--checkpoint", str(tmp_path / "run"), "--episodes", "0"): "--episodes 0: at least 1",
                ("eval", "--episodes", "3"): "--checkpoint is required",
                ("export", "--checkpoint", str(tmp_path / "run")): "--checkpoint and --out are required"}
    for argv, message in refusals.items():
        assert main(list(argv)) == 2
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"seedfleet {argv[0]}: error: {message}"), lines
    assert not (tmp_path / "x.avi").exists()
