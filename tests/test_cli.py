"""The command line: every flag documented, configs built from flags."""

import math
import re

import pytest
from conftest import ROOT

from deploy.cli import build_parser, main


@pytest.mark.parametrize("command,algo", [("learner", "vtrace"), ("learner", "r2d2"), ("actor", "vtrace"),
                                         ("run", "vtrace"), ("run", "r2d2"), ("bench", "vtrace")])
def test_every_flag_is_in_the_readme(command, algo):
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"### `seedfleet {command}`")[1].split("\n## ")[0]
    if command == "run":  # run documents its own flags and refers to the learner's
        section += readme.split("### `seedfleet learner`")[1]
    flags = [opt for action in build_parser(command, algo)._actions for opt in action.option_strings
             if opt.startswith("--") and opt != "--help" and not opt.startswith("--no-")]
    missing = [f for f in flags if not re.search(rf"`{re.escape(f)}`", section)]
    assert not missing, f"README lacks {missing} for seedfleet {command}"


def test_flags_fill_the_config_dataclasses():
    from deploy.flags import from_flags
    from server.learner import LearnerConfig

    args = build_parser("learner").parse_args(["--env", "ALE/Pong-v5", "--target-return", "19.5", "--max-frames", "10"])
    config = from_flags(LearnerConfig, args)
    assert (config.env, config.target_return, config.max_frames) == ("ALE/Pong-v5", 19.5, 10)
    assert math.isnan(from_flags(LearnerConfig, build_parser("learner").parse_args([])).target_return)


def test_run_takes_the_launcher_flags():
    args = build_parser("run").parse_args(
        ["--target-return", "475", "--max-frames", "5", "--seed", "3", "--logdir", "x", "--actors", "3",
         "--envs-per-actor", "8"]
    )
    assert (args.actors, args.envs_per_actor, args.seed, args.logdir) == (3, 8, 3, "x")


def test_unknown_command_is_an_error(capsys):
    with pytest.raises(SystemExit):
        main(["fly"])


def test_r2d2_takes_task_defaults_that_flags_still_override():
    from algorithms.r2d2 import R2D2Config

    vector = build_parser("run", "r2d2", "CartPole-v1").parse_args([])
    assert (vector.burn_in, vector.unroll_length, vector.n_step, vector.replay_ratio) == (10, 20, 3, 8.0)
    assert vector.eval_actors == 1  # the target is judged on evaluation episodes
    atari = build_parser("learner", "r2d2", "ALE/Pong-v5").parse_args([])
    assert (atari.burn_in, atari.unroll_length, atari.target_update_period) == (
        R2D2Config.burn_in, R2D2Config.unroll_length, R2D2Config.target_update_period)
    given = build_parser("run", "r2d2", "CartPole-v1").parse_args(["--burn-in", "4", "--eval-actors", "0"])
    assert (given.burn_in, given.eval_actors) == (4, 0)
    assert build_parser("run", "vtrace", "CartPole-v1").parse_args([]).eval_actors == 0
    assert "(default: 10)" in build_parser("learner", "r2d2", "CartPole-v1").format_help()
