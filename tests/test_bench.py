"""`seedfleet bench` runs every phase on CartPole and writes every key; the bounds add up."""

import json
import math

import pytest
from conftest import Proc, seedfleet

from bench.report import markdown, median_of
from bench.run import bound


def test_bound_is_the_rate_of_stages_sharing_the_cores():
    assert bound(1000.0, 1000.0) == pytest.approx(500.0)
    assert bound(3000.0, 6000.0, 2000.0) == pytest.approx(1000.0)


def test_bench_all_modes_on_cartpole_writes_every_key(tmp_path):
    out = tmp_path / "bench.json"
    bench = Proc(seedfleet("bench", "--env", "CartPole-v1", "--actors", "1", "--envs-per-actor", "8",
                           "--seconds", "3", "--warmup-s", "1", "--mode", "all", "--json", str(out)))
    assert bench.popen.wait(timeout=240) == 0, bench.output()[-3000:]
    results = json.loads(out.read_text())
    for phase in ("env", "model", "serve", "train", "train_only"):
        assert results[phase]["env_steps_per_s"] > 0, (phase, results[phase])
        assert results[phase]["frames_per_s"] == pytest.approx(results[phase]["env_steps_per_s"], rel=1e-3)
    for phase in ("serve", "train"):
        figures = results[phase]
        assert 1 <= figures["mean_inference_batch"] <= 8
        assert 0 < figures["latency_p50_ms"] <= figures["latency_p99_ms"]
        assert figures["server_cpu_cores"] > 0
    assert results["serve"]["learner_steps_per_s"] == 0
    assert results["train"]["learner_steps_per_s"] > 0 and results["train"]["samples_trained_per_s"] > 0
    assert results["model"]["batch_size"] == round(results["serve"]["mean_inference_batch"])
    serve_bound = bound(results["env"]["env_steps_per_s"], results["model"]["env_steps_per_s"])
    assert results["bounds"]["serve_env_steps_per_s"] == pytest.approx(serve_bound, rel=1e-3)
    assert results["ratios"]["serve_vs_bound"] == pytest.approx(
        results["serve"]["env_steps_per_s"] / results["bounds"]["serve_env_steps_per_s"], rel=1e-2)
    assert set(results["ratios"]) == {"serve_vs_bound", "train_vs_bound"}
    assert "serve/bound" in bench.output() and "| train |" in bench.output()
    text = markdown([results, results, results])
    assert "serve_vs_bound" in text and "| train_only |" in text
    assert median_of([results] * 3)["ratios"] == results["ratios"]
    assert not math.isnan(results["ratios"]["train_vs_bound"])
