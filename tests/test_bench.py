"""`seedfleet bench` runs every phase on CartPole and writes every key; the bounds add up."""

import json
import math
import os
import subprocess
import sys

import pytest
from conftest import Proc, seedfleet

from seedfleet.bench.report import main as report_main
from seedfleet.bench.report import median_of, plot_sweep
from seedfleet.bench.run import bound, bracketed


def test_bound_is_the_rate_of_stages_sharing_the_cores():
    assert bound(1000.0, 1000.0) == pytest.approx(500.0)
    assert bound(3000.0, 6000.0, 2000.0) == pytest.approx(1000.0)


def test_a_bracketed_phase_is_the_mean_of_before_and_after():
    before = {"env_steps_per_s": 1000.0, "frames_per_s": 4000.0, "actors": 4, "steal_cores": 0.0}
    after = {"env_steps_per_s": 1200.0, "frames_per_s": 4800.0, "actors": 4, "steal_cores": 0.5}
    both = bracketed(before, after)
    assert both["env_steps_per_s"] == 1100.0 and both["frames_per_s"] == 4400.0 and both["steal_cores"] == 0.25
    assert both["actors"] == 4 and both["before"] == before and both["after"] == after


def test_bench_all_modes_on_cartpole_writes_every_key(tmp_path):
    out = tmp_path / "seedfleet.bench.json"
    bench = Proc(seedfleet("bench", "--env", "CartPole-v1", "--actors", "1", "--envs-per-actor", "8",
                           "--seconds", "1.5", "--warmup-s", "0.5", "--mode", "all", "--json", str(out)))
    assert bench.popen.wait(timeout=240) == 0, bench.output()[-3000:]
    results = json.loads(out.read_text())
    for phase in ("env", "model", "serve", "train", "train_only"):
        assert results[phase]["env_steps_per_s"] > 0, (phase, results[phase])
        assert results[phase]["frames_per_s"] == pytest.approx(results[phase]["env_steps_per_s"], rel=1e-3)
        assert 0 < results[phase]["machine_busy_cores"] <= os.cpu_count() + 0.1
        assert 0 <= results[phase]["steal_cores"] <= os.cpu_count() + 0.1
    for phase in ("serve", "train"):
        figures = results[phase]
        assert 1 <= figures["mean_inference_batch"] <= 8
        assert 0 < figures["latency_p50_ms"] <= figures["latency_p99_ms"]
        assert 0 < figures["server_cpu_cores"] <= figures["machine_busy_cores"] + 0.1
        assert 0 < figures["transport_share"] < 1
        names = {key.split("/", 1)[1] for key in figures["cores_by_thread"]}
        assert {"main", "inference"} <= names, figures["cores_by_thread"]
    assert results["serve"]["learner_steps_per_s"] == 0
    assert results["train"]["learner_steps_per_s"] > 0 and results["train"]["samples_trained_per_s"] > 0
    assert results["model"]["batch_size"] == round(results["serve"]["mean_inference_batch"])
    env = results["env"]
    assert env["env_steps_per_s"] == pytest.approx(
        (env["before"]["env_steps_per_s"] + env["after"]["env_steps_per_s"]) / 2, abs=0.01)
    serve_bound = bound(results["env"]["env_steps_per_s"], results["model"]["env_steps_per_s"])
    assert results["bounds"]["serve_env_steps_per_s"] == pytest.approx(serve_bound, rel=1e-3)
    assert results["ratios"]["serve_vs_bound"] == pytest.approx(
        results["serve"]["env_steps_per_s"] / results["bounds"]["serve_env_steps_per_s"], rel=1e-2)
    assert set(results["ratios"]) == {"serve_vs_bound", "train_vs_bound"}
    assert "serve/bound" in bench.output() and "| train |" in bench.output()
    assert median_of([results] * 3)["ratios"] == results["ratios"]
    assert not math.isnan(results["ratios"]["train_vs_bound"])

    sweep = {"command": "seedfleet bench --sweep-actors 1,2", "config": results["config"],
             "sweep": [{"actors": n, "env": results["env"], "serve": results["serve"]} for n in (1, 2)]}
    plot_sweep(sweep, tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nbefore\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nafter\n")
    report_main([str(md), "--runs", str(out), str(out), str(out), "--plot", "sweep.png"])
    text = md.read_text()
    assert "old" not in text and text.startswith("# Benchmarks\n\nbefore\n") and text.endswith("after\n")
    assert "Median of 3 run(s)" in text and "| train_only |" in text and "serve_vs_bound" in text
    assert "![frames/s against actors]" not in text  # no sweep given
    sweep_json = tmp_path / "sweep.json"
    sweep_json.write_text(json.dumps(sweep))
    report_main([str(md), "--runs", str(out), "--sweep", str(sweep_json), "--plot", "sweep.png"])
    assert "| 2 |" in md.read_text() and "![frames/s against actors](sweep.png)" in md.read_text()


def test_threads_started_in_the_block_carry_its_name():
    import threading
    from pathlib import Path

    from seedfleet.threads import spawned_threads_named

    def os_name(native_id: int) -> str:
        return Path(f"/proc/self/task/{native_id}/comm").read_text().strip()

    caller = os_name(threading.get_native_id())
    seen, release = [], threading.Event()
    with spawned_threads_named("env"):
        thread = threading.Thread(target=lambda: (seen.append(threading.get_native_id()), release.wait(5)))
        thread.start()
    while not seen:
        pass
    assert os_name(seen[0]) == "env" and os_name(threading.get_native_id()) == caller
    release.set()
    thread.join()


def test_the_step_hash_repeats_for_the_same_code_and_seed_and_moves_with_the_seed():
    """In a process of its own: the hash turns TensorFlow's deterministic ops on for good."""
    script = ("from seedfleet.server.native_logs import import_tensorflow\n"
              "import_tensorflow()\n"  # as every process of ours, without Keras
              "from seedfleet.bench.step_hash import step_hash\n"
              "for seed in (0, 0, 1): print(*step_hash('CartPole-v1', 'vtrace', seed))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    first, again, other = out.stdout.splitlines()[-3:]
    assert first == again and "loss/total" in first and len(first.split()[0]) == 64
    assert other.split()[0] != first.split()[0]
