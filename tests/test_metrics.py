"""The learner's counters: the frame budget and the curves count training envs' steps only."""

import numpy as np

from algorithms.agent import AgentContext
from algorithms.impala.agent import ImpalaAgent
from algorithms.impala.config import ImpalaConfig
from algorithms.networks import NetworkConfig
from seedfleet.envs import StepBatch
from server.env_slots import EnvSlots
from server.inference import InferenceEngine, StepRequest
from server.metrics import Metrics
from server.unroll_queue import UnrollQueue


def test_evaluation_envs_steps_are_counted_apart_from_the_frame_budget():
    agent = ImpalaAgent(ImpalaConfig(unroll_length=4, batch_size=2), NetworkConfig(jit_compile=False),
                        AgentContext((4,), np.dtype(np.float32), 2, seed=0))
    slots = EnvSlots(8, agent.layout, (4,), np.dtype(np.float32), agent.extras_spec, agent.initial_state)
    metrics = Metrics(frame_skip=4)
    engine = InferenceEngine(agent, slots, UnrollQueue(16, 2), metrics, "/CPU:0")
    engine.reset(0, 5)
    engine.reset(5, 8, evaluation=True)
    env_ids = np.arange(8, dtype=np.int32)
    for t in range(3):
        step = StepBatch(observations=np.zeros((8, 4), np.float32), rewards=np.zeros(8, np.float32),
                         terminated=np.zeros(8, bool), truncated=np.zeros(8, bool), first=np.full(8, t == 0))
        engine.process([StepRequest(env_ids[:6], _rows(step, 6)), StepRequest(env_ids[6:], _rows(step, 2, 6))])
    assert (metrics.env_steps, metrics.eval_env_steps) == (15, 9)
    assert metrics.frames == 60
    summary = metrics.summary()
    assert summary["frames"] == 60 and summary["eval_env_steps"] == 9
    assert metrics.take_interval()["mean_batch"] == 8.0  # an inference batch holds both kinds

    resumed = Metrics(frame_skip=4)
    resumed.restore(metrics.state())
    assert (resumed.env_steps, resumed.eval_env_steps) == (15, 9)
    older = {k: v for k, v in metrics.state().items() if k != "eval_env_steps"}  # a checkpoint from before
    resumed = Metrics(frame_skip=4)
    resumed.restore(older)
    assert (resumed.env_steps, resumed.eval_env_steps) == (15, 0)


def _rows(step: StepBatch, n: int, start: int = 0) -> StepBatch:
    return StepBatch(*(getattr(step, f)[start:start + n] for f in StepBatch.__dataclass_fields__))
