"""Poison: observations that drive the policy to non-finite outputs (and sampling to an
action out of range) are refused for their own request only; nothing of them reaches an
actor, the slots or the trainer."""

import numpy as np

from algorithms.agent import AgentContext
from algorithms.impala.agent import ImpalaAgent
from algorithms.impala.config import ImpalaConfig
from algorithms.networks import NetworkConfig
from seedfleet.envs import StepBatch
from server.env_slots import EnvSlots
from server.inference import InferenceEngine, PolicyOutputError, StepRequest
from server.metrics import Metrics
from server.unroll_queue import UnrollQueue


def make_engine():
    agent = ImpalaAgent(ImpalaConfig(unroll_length=2, batch_size=1), NetworkConfig(jit_compile=False),
                        AgentContext((4,), np.dtype(np.float32), 2, seed=0))
    slots = EnvSlots(8, agent.layout.length, (4,), np.dtype(np.float32), agent.extras_spec, agent.initial_state,
                     overlap=agent.layout.overlap)
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
    poisoned = request([3, 4], [[np.inf, 0.0, 0.0, 0.0]] * 2)  # NaN logits: sampling gives action 2 of 2
    later = request([5], np.ones((1, 4)))
    for _ in range(3):  # enough rows for whole unrolls of the served envs
        served, refused, served_later = engine.process([good, poisoned, later])
        assert isinstance(refused, PolicyOutputError)
        assert served.shape == (3,) and served_later.shape == (1,)
        assert set(np.concatenate([served, served_later]).tolist()) <= {0, 1}
    assert engine.slots.length[[3, 4]].tolist() == [0, 0]  # no row of theirs was kept
    assert engine.metrics.refused_steps == 6 and engine.metrics.env_steps == 12
    batch = queue.get_chunk(0.1)
    assert batch is not None and np.isfinite(batch.extras["logits"]).all()
    only_poison = engine.process([poisoned])
    assert len(only_poison) == 1 and isinstance(only_poison[0], PolicyOutputError)
