"""Poison: observations that drive the policy to non-finite outputs (and sampling to an
action out of range) are refused for their own request only; nothing of them reaches an
actor, the slots or the trainer."""

import numpy as np
import tensorflow as tf

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext, Unroll
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.trainer import MAX_NONFINITE_IN_A_ROW, NonFiniteTraining, OnPolicyTrainer
from seedfleet.envs import StepBatch
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.inference import InferenceEngine, PolicyOutputError, StepRequest
from seedfleet.server.metrics import Metrics
from seedfleet.server.unroll_queue import UnrollQueue


class PolicyPoisonedByInf:
    """The real agent, except that an infinite observation gives NaN logits and action
    n (one past the last), as sampling from NaN logits does. Whether the network itself gets there
    depends on the CPU: oneDNN's AVX-512 ReLU maps NaN to 0 and the logits stay finite, its
    AVX2 one passes NaN on. The engine must refuse such outputs on any hardware."""

    def __init__(self, agent: ImpalaAgent):
        self.agent = agent

    def __getattr__(self, name):
        return getattr(self.agent, name)

    def act(self, observations, rewards, first, env_ids, state):
        actions, extras, new_state = self.agent.act(observations, rewards, first, env_ids, state)
        poisoned = ~np.isfinite(observations).all(axis=1)
        logits = np.where(poisoned[:, None], np.nan, extras["policy"].numpy())
        actions = np.where(poisoned, self.agent.actions.num_actions, actions.numpy())
        return tf.constant(actions), {**extras, "policy": tf.constant(logits)}, new_state


def make_engine():
    agent = PolicyPoisonedByInf(ImpalaAgent(ImpalaConfig(unroll_length=2, batch_size=1),
                                            NetworkConfig(jit_compile=False),
                                            AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0)))
    slots = EnvSlots(8, agent.layout, (4,), np.dtype(np.float32), agent.extras_spec, agent.initial_state)
    queue = UnrollQueue(64, 1)
    engine = InferenceEngine(agent, slots, queue, Metrics(frame_skip=1), "/CPU:0")
    engine.reset(0, 8)
    return engine, queue


def request(env_ids, observations):
    n = len(env_ids)
    step = StepBatch(observations=np.asarray(observations, np.float32), rewards=np.zeros(n, np.float32),
                     terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), first=np.ones(n, bool))
    return StepRequest(np.asarray(env_ids, np.int32), step)


def test_a_poisoned_request_is_refused_and_the_rest_of_its_batch_served():
    engine, queue = make_engine()
    good = request([0, 1, 2], np.random.default_rng(0).normal(size=(3, 4)))
    poisoned = request([3, 4], [[np.inf, 0.0, 0.0, 0.0]] * 2)  # NaN logits, action 2 of 2
    later = request([5], np.ones((1, 4)))
    for _ in range(3):  # enough rows for whole unrolls of the served envs
        served, refused, served_later = engine.process([good, poisoned, later])
        assert isinstance(refused, PolicyOutputError)
        assert served.shape == (3,) and served_later.shape == (1,)
        assert set(np.concatenate([served, served_later]).tolist()) <= {0, 1}
    assert engine.slots.length[[3, 4]].tolist() == [0, 0]  # no row of theirs was kept
    assert engine.metrics.refused_steps == 6 and engine.metrics.env_steps == 12
    batch = queue.get_chunk(0.1)
    assert batch is not None and np.isfinite(batch.extras["policy"]).all()
    only_poison = engine.process([poisoned])
    assert len(only_poison) == 1 and isinstance(only_poison[0], PolicyOutputError)


def test_a_non_finite_loss_leaves_the_variables_and_the_optimizer_as_they_were():
    agent = ImpalaAgent(ImpalaConfig(unroll_length=2, batch_size=2, reward_clip=0.0), NetworkConfig(jit_compile=False),
                        AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0))
    rng = np.random.default_rng(0)
    rows = (2, 3)
    batch = Unroll(observation=rng.normal(size=(*rows, 4)).astype(np.float32), first=np.zeros(rows, bool),
                   reward=np.full(rows, np.nan, np.float32), terminated=np.zeros(rows, bool),
                   truncated=np.zeros(rows, bool), life_lost=np.zeros(rows, bool),
                   action=np.zeros(rows, np.int32), extras={"policy": np.zeros((*rows, 2), np.float32),
                                                              "policy_version": np.zeros(rows, np.int64)},
                   state={})
    before = [v.numpy().copy() for v in agent.net.trainable_variables]
    out = agent.learn(batch)
    assert float(out["skipped_steps"]) == 1.0 and int(agent.optimizer.iterations) == 0
    for old, new in zip(before, agent.net.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
    out = agent.learn(batch._replace(reward=np.zeros(rows, np.float32)))
    assert float(out["skipped_steps"]) == 0.0 and int(agent.optimizer.iterations) == 1


def test_training_stops_after_too_many_non_finite_steps_in_a_row():
    class Diverged:
        batch_size = 1

        def learn(self, batch):
            return {"loss": np.nan, "skipped_steps": 1.0}

    queue, metrics = UnrollQueue(64, 1), Metrics(frame_skip=1)
    trainer = OnPolicyTrainer(Diverged(), queue, metrics, "/CPU:0")
    rows = np.zeros((1, 2), np.int32)
    one = Unroll(observation=rows, first=rows == 1, reward=rows * 1.0, terminated=rows == 1, truncated=rows == 1,
                 life_lost=rows == 1, action=rows, extras={}, state={})
    for _ in range(MAX_NONFINITE_IN_A_ROW + 5):
        queue.put(one)
    trainer.start()
    trainer.join(timeout=30)
    assert isinstance(trainer.error, NonFiniteTraining)
    assert metrics.skipped_learner_steps == MAX_NONFINITE_IN_A_ROW - 1  # the last one stops training instead
