"""Atari beyond Pong and Breakout: the Atari-5 games (and two held out) at 5M and 10M frames,
beside published curves under sticky actions, with human-normalised scores and the Atari-5
estimate of the 57-game median.

References (each checked in its repository, at the commit named):
- CleanRL PPO with Machado settings (sticky 0.25, 18 actions, no life loss, 3 seeds):
  openrlbenchmark `static/machado_10M.png` (added in 7c6119b, removed from the tree in 5960d13),
  read off the mean curve. Its x axis is CleanRL's global_step, in agent steps: 5M and 10M
  frames are 1.25M and 2.5M steps there. Read by the curve's pixels (1 px is about 37k steps),
  to the tolerance given per game; the curve's end agrees with `static/machado_10M.csv` (final
  scores at 40M frames) within about 3%.
- Dopamine DQN, Rainbow and IQN (sticky 0.25, minimal action set, 5 runs each): google/dopamine
  `baselines/atari/data/<game>.json` (last changed in 8842298e): the mean training return of
  iteration 4 (frames 4M to 5M) and 9 (9M to 10M) over the five runs.
- Human and random scores: google-deepmind/dqn_zoo `dqn_zoo/atari_data.py`, `_ATARI_DATA`
  (commit 45061f4).
- The Atari-5 estimate (Aitchison, Sweetser and Hutter, ICML 2023, arXiv 2210.02019):
  median57 (%) ~= 10^(sum_g c_g log10(1 + max(0, HNS_g in %))) - 1, no intercept. The
  coefficients are the authors' (maitchison/PPO `tools/plot_util.py` lines 985-988, commit
  d3e3228; maitchison/Atari-5 `atari5.py` fits them with USE_INTERCEPT = False, commit 118cad5),
  and a least-squares refit on Atari-5's `dataset.csv` gives the same to four places. At 10M
  frames the estimate reads high (the regression is fitted on agents trained for 200M), so it
  ranks runs; it is not a true median.
"""

from __future__ import annotations

import math

from seedfleet.bench.references import Reference

MACHADO = ("openrlbenchmark static/machado_10M.png (commit 7c6119b), CleanRL PPO, Machado settings (sticky 0.25, "
           "18 actions, no life loss), 3 seeds, read off the mean curve at 1.25M and 2.5M agent steps to +-{tol}; "
           "static/machado_10M.csv: {final} at 40M frames")
DOPAMINE = ("google/dopamine baselines/atari/data/{file}.json (last changed in 8842298e), mean training return of "
            "iterations 4 and 9 (frames 4-5M, 9-10M) over its five {agent} runs (sticky 0.25, minimal actions)")

# game: (Dopamine's file, CleanRL Machado PPO at 5M and 10M and their reading tolerance, its CSV's final score;
#        Dopamine DQN, Rainbow and IQN at 5M and 10M)
ATARI_GAMES: dict[str, tuple] = {
    "BattleZone": ("battlezone", (14000, 18500, "1,000 / 700"), 23118.75,
                   {"DQN": (3476.67, 3598.54), "Rainbow": (3605.08, 20209.13), "IQN": (20037.92, 24151.92)}),
    "DoubleDunk": ("doubledunk", (-12.5, -11.2, "1.5 / 0.5"), -1.29,
                   {"DQN": (-19.92, -18.94), "Rainbow": (-21.39, -18.95), "IQN": (-18.54, -12.94)}),
    "NameThisGame": ("namethisgame", (5300, 5600, "100 / 100"), 6063.08,
                     {"DQN": (3107.28, 4000.87), "Rainbow": (6048.29, 8604.03), "IQN": (7889.9, 8643.82)}),
    "Phoenix": ("phoenix", (2900, 4250, "200 / 200"), 6740.76,
                {"DQN": (1643.49, 4948.51), "Rainbow": (2340.06, 4830.24), "IQN": (4453.43, 4753.09)}),
    "Qbert": ("qbert", (1550, 3750, "150 / 250"), 15130.0,
              {"DQN": (893.04, 1658.41), "Rainbow": (2511.89, 5353.87), "IQN": (3007.88, 5206.9)}),
    "MsPacman": ("mspacman", (870, 1140, "100 / 60"), 2373.39,
                 {"DQN": (1733.48, 2187.21), "Rainbow": (2139.91, 2347.48), "IQN": (2039.13, 2523.87)}),
    "BeamRider": ("beamrider", (620, 1100, "50 / 60"), 1620.35,
                  {"DQN": (362.98, 869.31), "Rainbow": (614.28, 5982.58), "IQN": (5821.37, 3986.09)}),
}

# (random, human): google-deepmind/dqn_zoo dqn_zoo/atari_data.py, _ATARI_DATA
HUMAN_RANDOM = {"BattleZone": (2360.0, 37187.5), "DoubleDunk": (-18.6, -16.4), "NameThisGame": (2292.3, 8049.0),
                "Phoenix": (761.4, 7242.6), "Qbert": (163.9, 13455.0), "MsPacman": (307.3, 6951.6),
                "BeamRider": (363.9, 16926.5)}

# The Atari-5 regression's weights (maitchison/PPO tools/plot_util.py lines 985-988), no intercept.
ATARI5_WEIGHTS = {"BattleZone": 0.38198, "DoubleDunk": 0.06791, "NameThisGame": 0.31080, "Phoenix": 0.12413,
                  "Qbert": 0.080485}


def atari_references(game: str) -> tuple[Reference, ...]:
    """The published curves of one game at 5M and 10M frames."""
    file, (at5, at10, tolerance), final, dopamine = ATARI_GAMES[game]
    machado = {5_000_000: at5, 10_000_000: at10, 40_000_000: final}
    refs = [Reference("PPO, CleanRL with Machado settings (sticky 0.25, 18 actions)",
                      MACHADO.format(tol=tolerance, final=final), machado)]
    refs += [Reference(f"{agent}, Dopamine (sticky 0.25; value-based), 5 runs", DOPAMINE.format(file=file, agent=agent),
                       {5_000_000: values[0], 10_000_000: values[1]}) for agent, values in dopamine.items()]
    return tuple(refs)


def human_normalized(game: str, score: float) -> float:
    """(score - random) / (human - random): 0 plays as a uniform random policy does, 1 as the human tester."""
    random, human = HUMAN_RANDOM[game]
    return (score - random) / (human - random)


def atari5_median_estimate(scores: dict[str, float]) -> float:
    """The Atari-5 estimate of the 57-game median human-normalised score (a fraction, 1 = human)
    from raw scores of the five games: 10^(sum c log10(1 + max(0, 100 HNS))) - 1, in %, over 100.
    NaN when a game is missing."""
    if any(game not in scores or math.isnan(scores[game]) for game in ATARI5_WEIGHTS):
        return math.nan
    exponent = sum(weight * math.log10(1 + max(0.0, 100 * human_normalized(game, scores[game])))
                   for game, weight in ATARI5_WEIGHTS.items())
    return (10 ** exponent - 1) / 100
