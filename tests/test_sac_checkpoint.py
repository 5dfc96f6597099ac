"""SAC through a checkpoint, as the learner wires it: the replay (with --checkpoint-replay)
and its ratio counters, the temperature, the critics and their targets, the steps acted, the
observation statistics and the learner's counters all come back in a second learner; eval and
the exported SavedModel act as the learner's greedy policy does."""

import numpy as np
import tensorflow as tf
from in_process import train

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import ALGORITHMS
from seedfleet.algorithms.sac.builder import replay_settings
from seedfleet.algorithms.sac.config import SACConfig
from seedfleet.deploy.cli import build_parser
from seedfleet.deploy.flags import from_flags
from seedfleet.server.assembly import env_config_for, make_agent
from seedfleet.server.checkpoint import CheckpointStore, LearnerCheckpoints
from seedfleet.server.config import EvalConfig, LearnerConfig
from seedfleet.server.evaluate import play
from seedfleet.server.export import export
from seedfleet.server.metrics import Metrics
from seedfleet.server.normalization import make_normalization
from seedfleet.server.run_setup import RunSetup
from seedfleet.server.saved_policy import load_policy
from seedfleet.wire import EnvSpec

ENV = "Pendulum-v1"
FLAGS = ("--checkpoint-replay", "--normalize-observations", "--batch-size", "8", "--learning-starts", "16",
         "--mlp-sizes", "32", "32", "--no-jit-compile")


class Steps:
    def __init__(self):
        self.losses: list[dict] = []

    def add_learner_step(self, losses: dict[str, float]) -> None:
        self.losses.append(losses)


def build(logdir, flags: tuple[str, ...] = FLAGS):
    """SAC's agent, replay trainer (its thread not started), normalisation and checkpoints."""
    algo = ALGORITHMS["sac"]
    args = build_parser("learner", "sac", ENV).parse_args(["--env", ENV, "--logdir", str(logdir), *flags])
    config, sac, network = from_flags(LearnerConfig, args), from_flags(SACConfig, args), from_flags(NetworkConfig, args)
    env_config, _ = env_config_for(config)
    spec = EnvSpec.from_proto(env_config)
    agent = make_agent(config, algo, sac, network, env_config, "/CPU:0")
    trainer = algo.make_trainer(agent, None, Steps(), "/CPU:0", sac, 0, None)
    normalization = make_normalization(config.normalize_observations, config.scale_rewards, ENV, spec.obs_shape,
                                       spec.obs_dtype, config.max_envs, sac.discount)
    checkpoints = LearnerCheckpoints(CheckpointStore(logdir / "checkpoints"), agent, trainer, Metrics(1),
                                     RunSetup.of(config, sac, network), normalization)
    return agent, trainer, normalization, checkpoints, sac


def variables(agent) -> dict[str, np.ndarray]:
    return {f"{name}/{i}": np.array(v) for name, module in agent.checkpointed().items()
            for i, v in enumerate(module.variables if hasattr(module, "variables") else [module])}


def test_sac_resumes_its_replay_temperature_targets_and_statistics_and_exports_as_it_acts(tmp_path):
    agent, trainer, normalization, checkpoints, sac = build(tmp_path)
    assert replay_settings(sac).checkpoint

    def insert_and_train(batch):  # what the trainer's thread does, in this thread
        trainer.insert(batch)
        while trainer.may_train():
            trainer.train_one_batch()

    initial_alpha = float(agent.log_alpha.numpy())
    train(agent, ENV, 4, 4 * 30, on_batch=insert_and_train, normalization=normalization)
    assert trainer.trained > 0 and trainer.metrics.losses
    assert float(agent.log_alpha.numpy()) != initial_alpha  # the temperature was tuned
    assert not np.array_equal(agent.targets[0].variables[0].numpy(), agent.critics[0].variables[0].numpy())
    checkpoints.metrics.env_steps, checkpoints.metrics.learner_steps = 120, len(trainer.metrics.losses)
    path = checkpoints.save()

    again, trainer_again, normalization_again, restoring, _ = build(tmp_path)
    restored = restoring.restore()
    assert restored is not None and restored.arrays is not None  # the replay and its counters
    saved, loaded = variables(agent), variables(again)
    assert saved.keys() == loaded.keys() and {"log_alpha/0", "target1/0", "target2/0", "acted/0"} <= saved.keys()
    for key in saved:
        np.testing.assert_array_equal(loaded[key], saved[key], err_msg=key)
    assert int(again.acted.numpy()) == 120
    assert (trainer_again.inserted, trainer_again.trained) == (trainer.inserted, trainer.trained)
    for key, value in trainer.replay.to_arrays().items():
        np.testing.assert_array_equal(trainer_again.replay.to_arrays()[key], value, err_msg=key)
    assert normalization_again.state() == normalization.state()
    assert (restoring.metrics.env_steps, restoring.metrics.learner_steps) == (120, len(trainer.metrics.losses))
    trainer_again.train_one_batch()  # it trains on from the restored replay, whose items have no extras or state
    assert trainer_again.trained == trainer.trained + again.batch_size

    rng = np.random.default_rng(5)
    obs = rng.normal([0.0, 0.0, 0.0], [1.0, 1.0, 6.0], (32, 3)).astype(np.float32)
    zeros, firsts, ids = np.zeros(32, np.float32), np.ones(32, bool), np.zeros(32, np.int32)
    served = np.asarray(agent.policy(normalization.observations.apply(obs), zeros, firsts, ids, {})[0])
    policy = load_policy(path)
    evaluated = np.asarray(policy.agent.policy(policy.observed(obs), zeros, firsts, ids, {})[0])
    np.testing.assert_array_equal(evaluated, served)
    assert (np.abs(served) <= 2.0).all() and np.ptp(served) > 0  # c + s tanh(mean), in the bounds
    out = tmp_path / "exported"
    export(policy, out)
    exported = tf.saved_model.load(str(out)).signatures["serving_default"](observation=obs)
    np.testing.assert_allclose(exported["action"].numpy(), evaluated, rtol=1e-6, atol=1e-6)
    returns, _ = play(policy, EvalConfig(episodes=2, envs=2))
    assert len(returns) == 2 and (returns < 0).all()
