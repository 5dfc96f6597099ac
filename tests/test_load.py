"""The load tool drives a learner of its own with synthetic streams and reports on it."""

from seedfleet.bench.load import LoadConfig, run_load


def test_a_short_load_run_is_served_without_errors():
    """Every request of every stream is answered and nothing errs, on a busy machine too;
    how many a second the learner serves is the load bench's figure, not this test's."""
    results = run_load(LoadConfig(streams=6, envs_per_stream=2, processes=2, seconds=1.0, warmup_s=6.0))
    assert results["errors"] == {} and results["workers_failed"] == 0
    requests = results["requests"]
    assert requests["sent"] >= 6 and requests["answered"] == requests["sent"], requests  # each stream, at least one
    assert results["env_steps_per_s"] > 0
    latency = results["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["p99.9"]
    assert results["learner_rss_mib"]["max"] > 100
    assert results["learner_cpu_s"] > 0 and results["env_steps_per_learner_cpu_s"] > 0
    by_thread = results["by_thread_us_per_env_step"]
    assert "inference" in by_thread and abs(sum(by_thread.values()) - results["learner_cpu_us_per_env_step"]) < 1
    stages = results["by_stage_us_per_env_step"]  # the learner's own stage clock, split within each thread
    assert stages["main"]["decode"] > 0 and stages["inference"]["policy"] > 0 and stages["inference"]["env_state"] > 0
    for thread in ("main", "inference"):
        assert abs(sum(stages[thread].values()) - by_thread[thread]) < 0.1  # "other" closes each thread's sum
