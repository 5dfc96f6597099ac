"""Stopping the learner: signals, summary.json, exit codes."""

import json
import os
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
    run = Proc(seedfleet("run", "--actors", "1", "--envs-per-actor", "4", "--max-frames", "500",
                         "--target-return", "475", "--logdir", str(tmp_path)))
    assert run.popen.wait(timeout=120) == 1, run.output()[-2000:]
    assert "target return 475.0 not reached" in run.output()
    assert json.loads((tmp_path / "summary.json").read_text())["stop_reason"] == "max_frames"


AMX = {"avx512f", "amx_bf16", "amx_tile"}  # an Intel Xeon of the AMX generation
ZEN4 = {"avx512f", "avx512_bf16", "avx512_vnni"}  # an AMD EPYC of the Zen 4 generation
NO_BF16 = {"avx2", "fma", "avx512f"}  # AVX-512 without bfloat16 units


def test_compute_dtype_auto_picks_bfloat16_only_on_cpus_with_bfloat16_units():
    from seedfleet.machine_cpu import cpu_flags
    from seedfleet.server.assembly import resolve_compute_dtype

    assert resolve_compute_dtype("float32", "/CPU:0", AMX) == "float32"
    assert resolve_compute_dtype("bfloat16", "/GPU:0", NO_BF16) == "bfloat16"
    assert resolve_compute_dtype("auto", "/GPU:0", AMX) == "float32"
    assert resolve_compute_dtype("auto", "/CPU:0", AMX) == "bfloat16"
    assert resolve_compute_dtype("auto", "/CPU:0", ZEN4) == "bfloat16"
    assert resolve_compute_dtype("auto", "/CPU:0", NO_BF16) == "float32"
    assert resolve_compute_dtype("auto", "/CPU:0", set()) == "float32"
    assert "fpu" in cpu_flags()  # read from this machine's /proc/cpuinfo, one flag per word


def test_compute_dtype_auto_takes_onednn_bfloat16_without_xla_on_bfloat16_cpus():
    from seedfleet.algorithms.network_config import NetworkConfig
    from seedfleet.server.assembly import resolve_network

    for flags in (AMX, ZEN4):
        auto = resolve_network(NetworkConfig(), "/CPU:0", flags)
        assert (auto.compute_dtype, auto.jit_compile) == ("bfloat16", False)
    plain = resolve_network(NetworkConfig(), "/CPU:0", NO_BF16)
    assert (plain.compute_dtype, plain.jit_compile) == ("float32", True)
    assert resolve_network(NetworkConfig(), "/GPU:0", AMX).jit_compile  # XLA on a GPU
    explicit = resolve_network(NetworkConfig(compute_dtype="bfloat16"), "/CPU:0", ZEN4)
    assert (explicit.compute_dtype, explicit.jit_compile) == ("bfloat16", True)  # asked for: kept
    assert not resolve_network(NetworkConfig(jit_compile=False), "/GPU:0").jit_compile


def _children(pid: int) -> list[int]:
    from pathlib import Path

    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_run_restarts_an_actor_that_dies_and_its_actors_die_with_it(procs, tmp_path):
    run = Proc(seedfleet("run", "--actors", "2", "--envs-per-actor", "4", "--eval-actors", "1",
                         "--progress-interval-s", "1", "--logdir", str(tmp_path)))
    procs.append(run)
    for _ in range(60):
        if sum("learner actor connected" in ln for ln in run.lines) == 3:
            break
        time.sleep(0.5)
    actors = _children(run.popen.pid)
    assert len(actors) == 3, run.output()[-3000:]
    os.kill(actors[0], signal.SIGKILL)
    run.wait_for(r"actor 0 exited with code -9; starting it again \(1/10\)")
    for _ in range(60):
        if sum("learner actor connected" in ln for ln in run.lines) == 4:
            break
        time.sleep(0.5)
    assert sum("learner actor connected" in ln for ln in run.lines) == 4, run.output()[-3000:]
    actors = _children(run.popen.pid)
    run.popen.kill()  # no teardown: the actors must notice on their own
    run.popen.wait(timeout=10)
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in actors) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in actors)
