"""Stopping the learner: signals, summary.json, exit codes."""

import json
import signal
import time

from conftest import Proc, seedfleet, start_learner


def test_sigterm_twice_still_writes_the_summary_and_exits_0(procs, tmp_path):
    learner, address = start_learner("--env", "CartPole-v1", "--logdir", str(tmp_path))
    procs.append(learner)
    actor = Proc(seedfleet("actor", "--learner", address, "--envs", "4"))
    procs.append(actor)
    learner.wait_for(r"^frames [1-9]")
    learner.popen.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    learner.popen.send_signal(signal.SIGTERM)  # as timeout(1) does: the process, then its group
    assert learner.popen.wait(timeout=20) == 0, learner.output()[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stop_reason"] == "signal" and summary["env_steps"] > 0


def test_a_missed_target_exits_1(tmp_path):
    run = Proc(seedfleet("run", "--actors", "1", "--envs-per-actor", "4", "--max-frames", "2000",
                         "--target-return", "475", "--logdir", str(tmp_path)))
    assert run.popen.wait(timeout=120) == 1, run.output()[-2000:]
    assert "target return 475.0 not reached" in run.output()
    assert json.loads((tmp_path / "summary.json").read_text())["stop_reason"] == "max_frames"


def test_compute_dtype_auto_picks_bfloat16_only_on_amx_cpus():
    from pathlib import Path

    from server.learner import resolve_compute_dtype

    assert resolve_compute_dtype("float32", "/CPU:0") == "float32"
    assert resolve_compute_dtype("bfloat16", "/GPU:0") == "bfloat16"
    assert resolve_compute_dtype("auto", "/GPU:0") == "float32"
    amx = "amx_bf16" in Path("/proc/cpuinfo").read_text()
    assert resolve_compute_dtype("auto", "/CPU:0") == ("bfloat16" if amx else "float32")
