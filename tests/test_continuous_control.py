"""The Gaussian APPO on Box envs under their task defaults: acting and training through the
learner's own inference path, checkpoints with the observation statistics, resume, eval and
export; MuJoCo's Walker2d and Ant as smoke tests."""

import threading
import types

import imageio.v2 as imageio
import numpy as np
import pytest
import tensorflow as tf
from conftest import Proc, seedfleet
from in_process import train

from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import ALGORITHMS
from seedfleet.deploy.cli import build_parser
from seedfleet.deploy.flags import from_flags
from seedfleet.server.assembly import env_config_for, make_agent
from seedfleet.server.checkpoint import CheckpointStore, LearnerCheckpoints
from seedfleet.server.config import EvalConfig, LearnerConfig
from seedfleet.server.evaluate import play
from seedfleet.server.export import export
from seedfleet.server.metrics import Metrics
from seedfleet.server.normalization import make_normalization
from seedfleet.server.run_setup import CheckpointMismatch, RunSetup
from seedfleet.server.saved_policy import load_policy
from seedfleet.wire import EnvSpec


def box_task(env: str, logdir, *flags: str):
    """The learner's, APPO's and the network's configs as `seedfleet learner --env ENV` resolves them."""
    args = build_parser("learner", "appo", env).parse_args(["--env", env, "--logdir", str(logdir), *flags])
    return from_flags(LearnerConfig, args), from_flags(ImpalaConfig, args), from_flags(NetworkConfig, args)


def build(env: str, logdir, *flags: str):
    """An agent, its normalisation and its checkpoints, wired as Learner.build wires them."""
    config, algo_config, network = box_task(env, logdir, *flags)
    env_config, _ = env_config_for(config)
    spec = EnvSpec.from_proto(env_config)
    agent = make_agent(config, ALGORITHMS["appo"], algo_config, network, env_config, "/CPU:0")
    normalization = make_normalization(config.normalize_observations, config.scale_rewards, env, spec.obs_shape,
                                       spec.obs_dtype, config.max_envs, algo_config.discount)
    trainer = types.SimpleNamespace(lock=threading.Lock(), state=lambda: None)
    checkpoints = LearnerCheckpoints(CheckpointStore(logdir / "checkpoints"), agent, trainer, Metrics(1),
                                     RunSetup.of(config, algo_config, network), normalization)
    return agent, normalization, checkpoints


def test_box_defaults_build_a_gaussian_policy_on_separate_tanh_torsos(tmp_path):
    agent, normalization, _ = build("Pendulum-v1", tmp_path)
    assert agent.actions.kind == "box" and agent.net.value_torso is not None
    assert normalization.observations is not None and normalization.rewards is not None
    policy_vars = {id(v) for v in agent.net.torso.trainable_variables}
    assert not policy_vars & {id(v) for v in agent.net.value_torso.trainable_variables}
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    actions, extras, _ = agent.act(obs, np.zeros(5, np.float32), np.ones(5, bool), np.arange(5, dtype=np.int32), {})
    assert actions.shape == (5, 1) and actions.dtype == tf.float32
    assert extras["policy"].shape == (5, 2)  # mean and log std
    np.testing.assert_allclose(extras["policy"].numpy()[:, 1], -0.5)  # std 0.61 at the start


def test_pendulum_trains_checkpoints_resumes_evaluates_and_exports_as_it_acted(tmp_path):
    """One run's statistics and weights go through a checkpoint: a second learner restores the
    same statistics and counters; eval and the SavedModel apply them as acting did; a learner
    that does not normalise refuses the checkpoint."""
    flags = ("--batch-size", "8", "--minibatches", "4", "--epochs", "2", "--no-jit-compile")  # XLA: the bench's runs
    agent, normalization, checkpoints = build("Pendulum-v1", tmp_path / "run", *flags)
    before = [v.numpy().copy() for v in agent.net.trainable_variables]
    learned = []
    train(agent, "Pendulum-v1", 8, 8 * 33, on_batch=lambda batch: learned.append(agent.learn(batch)),
          normalization=normalization)
    assert learned and all(np.isfinite(m["loss/total"]) for m in learned)
    assert "policy/action_std" in learned[0] and "policy/state_information" not in learned[0]
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(before, agent.net.trainable_variables, strict=True))
    assert normalization.observations.stats.count == 8 * 33
    checkpoints.metrics.env_steps, checkpoints.metrics.learner_steps = 264, len(learned)
    path = checkpoints.save()

    _, normalization_again, restoring = build("Pendulum-v1", tmp_path / "run", *flags)
    assert restoring.restore() is not None
    assert normalization_again.state() == normalization.state()
    assert (restoring.metrics.env_steps, restoring.metrics.learner_steps) == (264, len(learned))
    plain = build("Pendulum-v1", tmp_path / "run", "--no-normalize-observations")[2]
    with pytest.raises(CheckpointMismatch, match="normalize_observations"):
        plain.restore()

    rng = np.random.default_rng(5)
    obs = rng.normal([0.0, 0.0, 0.0], [1.0, 1.0, 6.0], (32, 3)).astype(np.float32)
    policy = load_policy(path)
    served = np.asarray(agent.policy(normalization.observations.apply(obs), np.zeros(32, np.float32),
                                     np.ones(32, bool), np.zeros(32, np.int32), {})[0])
    evaluated = np.asarray(policy.agent.policy(policy.observed(obs), np.zeros(32, np.float32), np.ones(32, bool),
                                               np.zeros(32, np.int32), {})[0])
    np.testing.assert_array_equal(evaluated, served)
    raw = np.asarray(policy.agent.policy(obs, np.zeros(32, np.float32), np.ones(32, bool),
                                         np.zeros(32, np.int32), {})[0])
    assert not np.allclose(raw, served)  # the statistics matter to the action
    assert (np.abs(served) <= 2.0).all()  # the mean, clipped to the bounds

    out = tmp_path / "exported"  # in this process: the CLI's export and eval are tested on discrete envs
    export(policy, out)
    exported = tf.saved_model.load(str(out)).signatures["serving_default"](observation=obs)
    np.testing.assert_allclose(exported["action"].numpy(), evaluated, rtol=1e-6, atol=1e-6)
    assert exported["logits"].shape == (32, 2)
    returns, _ = play(policy, EvalConfig(episodes=3, envs=2))
    assert len(returns) == 3 and (returns < 0).all()  # Pendulum pays -(angle^2 + ...) every step


@pytest.mark.parametrize("env,obs_size,action_size", [("Walker2d-v5", 17, 6), ("Ant-v5", 105, 8)])
def test_mujoco_envs_act_train_a_step_and_checkpoint(tmp_path, env, obs_size, action_size):
    agent, normalization, checkpoints = build(env, tmp_path / "run", "--batch-size", "4", "--minibatches", "2",
                                              "--epochs", "1", "--unroll-length", "8",
                                              "--no-jit-compile")  # Pendulum's test compiles the Gaussian step
    assert agent.net.torso.obs_shape == (obs_size,) and agent.actions.shape == (action_size,)
    learned = []
    train(agent, env, 4, 4 * 9, on_batch=lambda batch: learned.append(agent.learn(batch)),
          normalization=normalization)
    assert len(learned) == 1 and np.isfinite(learned[0]["loss/total"])
    path = checkpoints.save()
    assert load_policy(path).observations is not None
    if env == "Walker2d-v5":  # MuJoCo's offscreen renderer films the first episode, or one line says why not
        video = tmp_path / "walk.gif"
        run = Proc(seedfleet("eval", "--checkpoint", str(path), "--episodes", "1", "--envs", "1", "--video",
                             str(video)))
        code = run.popen.wait(timeout=180)
        if code == 2:
            lines = run.output().strip().splitlines()
            assert len(lines) == 1 and "offscreen renderer needs OpenGL" in lines[0], lines
        else:
            assert code == 0, run.output()[-3000:]
            frames = imageio.mimread(video, memtest=False)
            assert len(frames) > 2 and len({frame.tobytes() for frame in frames}) > 1
