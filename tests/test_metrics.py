"""The learner's counters: the frame budget and the curves count training envs' steps only;
its CPU by stage."""

import json
import math
import resource
import time

import numpy as np
import pytest

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.agent import AgentContext
from seedfleet.algorithms.impala.agent import ImpalaAgent
from seedfleet.algorithms.impala.config import ImpalaConfig
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.envs import StepBatch
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.inference import InferenceEngine, StepRequest
from seedfleet.server.metrics import Metrics, Reporter
from seedfleet.server.unroll_queue import UnrollQueue
from seedfleet.stage_clock import StageClock


def test_evaluation_envs_steps_are_counted_apart_from_the_frame_budget():
    agent = ImpalaAgent(ImpalaConfig(unroll_length=4, batch_size=2), NetworkConfig(jit_compile=False),
                        AgentContext((4,), np.dtype(np.float32), ActionSpec.discrete(2), seed=0))
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


def _thread_rusage_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def test_the_stage_clock_counts_a_threads_cpu_not_its_waiting_and_the_reporter_writes_it(tmp_path):
    clock = StageClock()
    lap = clock.start()
    time.sleep(0.2)
    lap = clock.lap("waiting", lap)
    # Busy for 0.2 s of this thread's CPU, as the kernel's rusage counts it: a wall-clock
    # deadline would give less CPU whenever the other core's tests take this one's turns.
    busy_from = _thread_rusage_cpu_s()
    while _thread_rusage_cpu_s() - busy_from < 0.2:
        pass
    busy_cpu_s = _thread_rusage_cpu_s() - busy_from
    clock.lap("busy", lap)
    totals = clock.totals()
    assert totals["waiting"] < 0.02
    assert totals["busy"] == pytest.approx(busy_cpu_s, abs=0.02)

    metrics = Metrics(frame_skip=4)
    metrics.add_inference(100, 20, np.zeros(0), np.zeros(0), np.zeros(0, bool))
    Reporter(metrics, tmp_path, lambda: 0, clock=clock).report()
    written = json.loads((tmp_path / "learner_cpu.json").read_text())
    assert written["env_steps"] == 120 and written["stages_cpu_s"]["busy"] == pytest.approx(totals["busy"], abs=1e-5)
    assert sum(written["threads_cpu_s"].values()) >= totals["busy"] - 0.02  # /proc ticks: 10 ms


def test_progress_gives_the_share_of_the_budget_an_eta_from_the_recent_rate_and_the_best_return():
    from seedfleet.server.progress import RATE_WINDOW_S, RunProgress, duration

    progress = RunProgress(max_frames=1_000_000, target_return=18.0)
    assert progress.update(0.0, 0, math.nan) == "(0.0%, ETA ?)  best - of target 18"
    assert progress.update(10.0, 10_000, -20.0) == "(1.0%, ETA 16m30s)  best -20.0 of target 18"  # 990k at 1,000/s
    assert progress.update(20.0, 30_000, -21.0) == "(3.0%, ETA 10m47s)  best -20.0 of target 18"  # 970k at 1,500/s
    # the rate is the recent one: a run that slowed down tells its end from how it goes now
    t, frames = 20.0, 30_000
    for _ in range(30):
        t, frames = t + 10.0, frames + 1_000
        line = progress.update(t, frames, 5.0)
    assert t - 20.0 > RATE_WINDOW_S and progress.frames_per_s() == pytest.approx(100.0)
    assert line == f"(6.0%, ETA {duration(940_000 / 100.0)})  best 5.0 of target 18" and duration(9400) == "2h36m"
    assert RunProgress(max_frames=100).update(0.0, 120, 1.0) == "(100.0%, ETA 0s)"
    assert RunProgress().update(0.0, 5, 1.0) == ""  # no budget, no target: the line as before
    assert RunProgress(target_return=475).update(0.0, 5, 9.5) == "best 9.5 of target 475"


def test_the_stop_line_reads_the_mean_that_reached_the_target_after_worse_episodes_arrive(tmp_path):
    """The run stops when a full window reaches the target; episodes that end before the last
    progress line is printed can pull the window back under it. The line still says reached."""
    from seedfleet.server.progress import RunProgress

    metrics = Metrics(frame_skip=1)
    trusted = np.ones(100, bool)
    metrics.add_inference(0, 100, np.full(100, 480.0), np.full(100, 10), np.zeros(100, bool), trusted=trusted)
    assert metrics.target_reached(475) and metrics.reached_target_mean == 480.0
    metrics.add_inference(0, 5, np.full(5, 20.0), np.full(5, 10), np.zeros(5, bool), trusted=trusted[:5])
    assert metrics.target_mean() == pytest.approx(457.0) and not metrics.target_reached(475)
    assert metrics.reached_target_mean == 480.0  # the first reading that held is kept
    line = Reporter(metrics, tmp_path, lambda: 0, progress=RunProgress(target_return=475.0)).report()
    assert "best 480.0 of target 475" in line, line
    unreached = Metrics(frame_skip=1)
    unreached.add_inference(0, 100, np.full(100, 20.0), np.full(100, 10), np.zeros(100, bool), trusted=trusted)
    assert not unreached.target_reached(475) and math.isnan(unreached.reached_target_mean)
    (tmp_path / "b").mkdir()
    line = Reporter(unreached, tmp_path / "b", lambda: 0, progress=RunProgress(target_return=475.0)).report()
    assert "best 20.0 of target 475" in line, line


def test_a_run_without_a_target_never_stops_on_one():
    """No target set is a NaN target: a full window of any returns never reaches it."""
    metrics = Metrics(frame_skip=1)
    metrics.add_inference(0, 100, np.full(100, 22.0), np.full(100, 10), np.zeros(100, bool),
                          trusted=np.ones(100, bool))
    assert not metrics.target_reached(math.nan) and math.isnan(metrics.reached_target_mean)
    assert metrics.target_reached(20.0)
