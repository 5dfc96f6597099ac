"""The Atari breadth report (bench/atari_breadth.py): the Atari-5 estimate, each game beside its
references, and the health checks that name a failing run."""

import json

import pytest

from seedfleet.bench.learn_cases import CASES
from seedfleet.bench.learn_report import BEGIN, END, report


def test_the_atari5_estimate_of_cleanrl_ppo_at_10m_frames_reads_about_half_of_human():
    """CleanRL PPO (Machado settings) at 10M frames through the regression: about 0.48, as the
    issue's check says (0.49); an independent loop over the paper's equation gives the same."""
    import math

    from seedfleet.bench.atari_references import (
        ATARI5_WEIGHTS,
        ATARI_GAMES,
        HUMAN_RANDOM,
        atari5_median_estimate,
        human_normalized,
    )

    at_10m = {game: ATARI_GAMES[game][1][1] for game in ATARI5_WEIGHTS}
    estimate = atari5_median_estimate(at_10m)
    assert 0.47 < estimate < 0.50, estimate
    total = 0.0
    for game, weight in ATARI5_WEIGHTS.items():  # by hand: percent HNS, log10(1 + x), weighted, 10^y - 1
        random, human = HUMAN_RANDOM[game]
        percent = 100 * (at_10m[game] - random) / (human - random)
        total += weight * math.log10(1 + max(percent, 0.0))
    assert estimate == pytest.approx((10 ** total - 1) / 100)
    assert human_normalized("Qbert", 163.9) == 0 and human_normalized("Qbert", 13455.0) == 1
    assert math.isnan(atari5_median_estimate({"Qbert": 1000.0}))
    assert CASES["qbert"].env == "ALE/Qbert-v5" and CASES["battlezone"].frames == 10_000_000


def test_the_breadth_report_reads_each_game_beside_its_references_and_names_an_unhealthy_run(tmp_path):
    from seedfleet.bench.atari_breadth import BEGIN as BREADTH_BEGIN
    from seedfleet.bench.atari_breadth import END as BREADTH_END
    from seedfleet.bench.atari_breadth import health

    runs = tmp_path / "runs"
    logdir = runs / "qbert" / "seed0"
    logdir.mkdir(parents=True)
    rows = ["elapsed_s,frames,env_steps,frames_per_s,mean_return_last_100,state_information,explained_variance,"
            "policy_entropy,episodes"]
    rows += [f"{600 * i},{i * 2_500_000},{i * 625_000},1400,{[0, 500, 1500, 3000, 4500][i]},0.2,0.5,1.2,{900 * i}"
             for i in range(1, 5)]
    (logdir / "progress.csv").write_text("\n".join(rows) + "\n")
    summary = {"frames": 10_000_000, "wall_s": 2400, "stop_reason": "max_frames"}
    (logdir / "summary.json").write_text(json.dumps(summary))
    md = tmp_path / "B.md"
    md.write_text(f"{BEGIN}\n{END}\n{BREADTH_BEGIN}\n{BREADTH_END}\n")
    report(md, ["qbert"], runs=runs)
    section = md.read_text().split(BREADTH_BEGIN)[1]
    # Qbert: 500 / 1,500 / 4,500 at 2.5 / 5 / 10M; HNS (4500 - 163.9) / (13455 - 163.9)
    assert "| Qbert | **500.0 / 1,500.0 / 4,500.0** | 0.33 | 1,550.0 / 3,750.0 | " in section
    assert "| 1,658.4 / 5,353.9 / 5,206.9 | 40 |" in section
    assert "| healthy |" in section and "- seedfleet: - (needs all five" in section
    assert "- PPO, CleanRL with Machado settings: 0.48" in section
    assert (tmp_path / "BENCHMARKS-learn-atari-breadth.png").exists()
    blind = [{"frames": 5e6, "state_information": 0.001, "explained_variance": 0.1, "policy_entropy": 0.05}]
    assert [f.split(" (")[0] for f in health(blind, 6)] == [
        "policy blind to its input", "value explains little", "entropy collapsed"]


def test_a_run_whose_episodes_stop_ending_is_named_unhealthy():
    """A row every 0.5M frames: 100 episodes finish in each until 4M, then 5 (the game stalled,
    as DoubleDunk's seed 0 did). The worst 2M frames, 4M to 6M, finish 20: 100,000 frames each,
    above half of ALE's 108,000-frame cap; the healthy stretch reads 5,000 each."""
    from seedfleet.bench.atari_breadth import health, longest_episodes

    def rows(stall_from: float) -> list[dict]:
        out, episodes = [], 0
        for i in range(13):
            frames = i * 500_000
            out.append({"frames": frames, "episodes": episodes, "state_information": 0.3,
                        "explained_variance": 0.6, "policy_entropy": 1.5})
            episodes += 5 if frames >= stall_from else 100
        return out

    assert longest_episodes(rows(stall_from=1e9)) == (5_000, 2_000_000)
    assert longest_episodes(rows(stall_from=4e6)) == (100_000, 6_000_000)
    assert health(rows(stall_from=1e9), 18) == []
    assert health(rows(stall_from=4e6), 18) == [
        "episodes stopped ending (100,000 frames per finished episode over the 2M frames to 6.0M; the cap is 108,000)"]
    assert longest_episodes(rows(stall_from=1e9)[:4]) == (0, 0)  # 1.5M frames: no window yet
