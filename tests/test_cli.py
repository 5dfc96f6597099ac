"""The command line: every flag documented, configs built from flags."""

import dataclasses
import itertools
import math
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from seedfleet.actions import BOX, DISCRETE
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.deploy.cli import build_parser, main


@pytest.mark.parametrize("command,algo", [("learner", "vtrace"), ("learner", "r2d2"), ("learner", "sac"),
                                         ("actor", "vtrace"), ("run", "vtrace"), ("run", "r2d2"), ("bench", "vtrace")])
def test_every_flag_is_in_the_readme(command, algo):
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"### `seedfleet {command}`")[1].split("\n## ")[0]
    if command in ("run", "bench"):  # they document their own flags and refer to the learner's
        section += readme.split("### `seedfleet learner`")[1]
    flags = [opt for action in build_parser(command, algo)._actions for opt in action.option_strings
             if opt.startswith("--") and opt != "--help" and not opt.startswith("--no-")]
    missing = [f for f in flags if not re.search(rf"`{re.escape(f)}`", section)]
    assert not missing, f"README lacks {missing} for seedfleet {command}"


@pytest.mark.parametrize("command,algo", [("run", "vtrace"), ("run", "appo"), ("run", "r2d2"), ("run", "sac"),
                                         ("actor", "vtrace"), ("bench", "vtrace")])
def test_every_flag_has_help_text(command, algo):
    """A field's help is the comment beside it or, for a longer one, the comment lines above it."""
    bare = [action.option_strings[0] for action in build_parser(command, algo)._actions
            if action.option_strings and not re.sub(r"\(default: .*\)$", "", action.help or "").strip()]
    assert not bare, f"no help for {bare}"


def test_a_field_takes_the_comment_lines_above_it_when_none_is_beside_it():
    from seedfleet.deploy.flags import _help_texts

    @dataclasses.dataclass
    class Example:
        beside: int = 1  # the comment beside it
        # two lines
        # above it
        above: float = 0.5
        # a comment cut off by a blank line

        bare: str = ""

    assert _help_texts(Example) == {"beside": "the comment beside it", "above": "two lines above it", "bare": ""}


def test_flags_fill_the_config_dataclasses():
    from seedfleet.deploy.flags import from_flags
    from seedfleet.server.config import LearnerConfig

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


def test_r2d2_takes_task_defaults_that_flags_still_override(monkeypatch):
    monkeypatch.delenv("SEEDFLEET_JIT_COMPILE")  # the suite's (conftest.py)
    from seedfleet.algorithms.r2d2.config import R2D2Config

    vector = build_parser("run", "r2d2", "CartPole-v1").parse_args([])
    assert (vector.burn_in, vector.unroll_length, vector.n_step, vector.replay_ratio) == (10, 20, 3, 8.0)
    assert vector.eval_actors == 1  # the target is judged on evaluation episodes
    atari = build_parser("learner", "r2d2", "ALE/Pong-v5").parse_args([])
    assert (atari.burn_in, atari.unroll_length, atari.target_update_period) == (
        R2D2Config.burn_in, R2D2Config.unroll_length, R2D2Config.target_update_period)
    given = build_parser("run", "r2d2", "CartPole-v1").parse_args(["--burn-in", "4", "--eval-actors", "0"])
    assert (given.burn_in, given.eval_actors) == (4, 0)
    assert build_parser("run", "vtrace", "CartPole-v1").parse_args([]).eval_actors == 0
    assert not vector.jit_compile and not atari.jit_compile  # R2D2's XLA compile costs more than it gains
    assert build_parser("learner", "r2d2", "CartPole-v1").parse_args(["--jit-compile"]).jit_compile
    assert build_parser("learner", "vtrace", "CartPole-v1").parse_args([]).jit_compile
    assert "(default: 10)" in build_parser("learner", "r2d2", "CartPole-v1").format_help()


def one_line(parser) -> str:
    """The parser's --help with its line wrapping undone."""
    return " ".join(parser.format_help().split())


def test_env_vars_set_defaults_and_given_flags_still_win(monkeypatch):
    monkeypatch.setenv("SEEDFLEET_ENVS", "4")
    monkeypatch.setenv("SEEDFLEET_LEARNER", "learner:9000")
    monkeypatch.setenv("SEEDFLEET_RECONNECT_MAX_S", "2.5")
    args = build_parser("actor").parse_args([])
    assert (args.envs, args.learner, args.reconnect_max_s) == (4, "learner:9000", 2.5)
    assert build_parser("actor").parse_args(["--envs", "8"]).envs == 8
    monkeypatch.setenv("SEEDFLEET_ENVS", "")  # empty counts as unset
    assert build_parser("actor").parse_args([]).envs == 32


def test_appo_ends_atari_episodes_at_a_lost_life_for_training_and_a_flag_turns_it_off():
    assert build_parser("run", "appo", "ALE/Breakout-v5").parse_args([]).life_loss_terminal
    assert not build_parser("run", "appo", "ALE/Breakout-v5").parse_args(["--no-life-loss-terminal"]).life_loss_terminal
    assert not build_parser("run", "appo", "CartPole-v1").parse_args([]).life_loss_terminal


def test_appo_acts_synchronously_on_atari_and_a_flag_turns_it_off():
    assert build_parser("run", "appo", "ALE/Qbert-v5").parse_args([]).sync_acting
    assert not build_parser("run", "appo", "ALE/Qbert-v5").parse_args(["--no-sync-acting"]).sync_acting
    assert not build_parser("run", "appo", "CartPole-v1").parse_args([]).sync_acting


def test_env_vars_win_over_task_defaults(monkeypatch):
    monkeypatch.setenv("SEEDFLEET_BURN_IN", "7")
    monkeypatch.setenv("SEEDFLEET_EVAL_ACTORS", "0")
    args = build_parser("run", "r2d2", "CartPole-v1").parse_args([])
    assert (args.burn_in, args.eval_actors, args.n_step) == (7, 0, 3)  # n_step keeps its task default
    assert "(default: 7, from SEEDFLEET_BURN_IN)" in one_line(build_parser("learner", "r2d2", "CartPole-v1"))


@pytest.mark.parametrize("raw,value", [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("False", False),
                                       ("NO", False)])
def test_bool_env_vars(monkeypatch, raw, value):
    monkeypatch.setenv("SEEDFLEET_FRESH", raw)
    monkeypatch.setenv("SEEDFLEET_EVALUATION", raw)
    assert build_parser("learner").parse_args([]).fresh is value
    assert build_parser("actor").parse_args([]).evaluation is value
    assert build_parser("actor").parse_args(["--no-evaluation"]).evaluation is False


def test_tuple_and_float_env_vars_reach_the_configs(monkeypatch):
    from seedfleet.deploy.flags import from_flags
    from seedfleet.server.config import LearnerConfig

    monkeypatch.setenv("SEEDFLEET_MLP_SIZES", "32, 16,8")
    monkeypatch.setenv("SEEDFLEET_TARGET_RETURN", "19.5")
    args = build_parser("learner").parse_args([])
    assert from_flags(NetworkConfig, args).mlp_sizes == (32, 16, 8)
    assert from_flags(LearnerConfig, args).target_return == 19.5
    assert "(default: 32 16 8, from SEEDFLEET_MLP_SIZES)" in one_line(build_parser("learner"))


@pytest.mark.parametrize("name,raw", [("SEEDFLEET_ENVS", "abc"), ("SEEDFLEET_EVALUATION", "maybe"),
                                      ("SEEDFLEET_RECONNECT_MIN_S", "fast")])
def test_a_bad_env_var_is_an_error_naming_it(monkeypatch, name, raw):
    monkeypatch.setenv(name, raw)
    with pytest.raises(SystemExit) as exit_info:
        main(["actor"])
    message = str(exit_info.value.code)
    assert name in message and repr(raw) in message, message


def test_algo_and_env_come_from_env_vars_too(monkeypatch, capsys):
    """The pre-parser reads SEEDFLEET_ALGO and SEEDFLEET_ENV: the agent's flags and task defaults follow them."""
    monkeypatch.setenv("SEEDFLEET_ALGO", "r2d2")
    monkeypatch.setenv("SEEDFLEET_ENV", "CartPole-v1")
    with pytest.raises(SystemExit):
        main(["learner", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--burn-in BURN_IN rows that only warm up the LSTM (default: 10)" in help_text, help_text
    assert "(default: r2d2, from SEEDFLEET_ALGO)" in help_text and "SEEDFLEET_SOME_NAME" in help_text
    monkeypatch.setenv("SEEDFLEET_ENV", "ALE/Pong-v5")  # Atari: the paper's values
    with pytest.raises(SystemExit):
        main(["learner", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--burn-in BURN_IN rows that only warm up the LSTM (default: 40)" in help_text


def test_launched_actors_take_their_settings_from_the_launcher_alone(monkeypatch):
    """`seedfleet run` gives its actors what it means on their command lines; SEEDFLEET_* does not leak in."""
    import os

    from seedfleet.processes import PARENT_PID_ENV, launched_env

    monkeypatch.setenv("SEEDFLEET_EVALUATION", "1")
    monkeypatch.setenv("SEEDFLEET_ENVS", "3")
    env = launched_env()
    assert not [name for name in env if name.startswith("SEEDFLEET_") and name != PARENT_PID_ENV]
    assert env[PARENT_PID_ENV] == str(os.getpid()) and env["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize("args,message", [
    (["learner", "--env", "NoSuchGame-v9"], "env id 'NoSuchGame-v9'"),
    (["learner", "--env", "Pendulum-v1", "--algo", "r2d2"],
     "--algo r2d2 acts in discrete actions; Pendulum-v1 has box ones"),
    (["learner", "--epochs", "0"], "epochs and minibatches must be at least 1"),
    (["learner", "--algo", "appo", "--batch-size", "6"], "does not split into 4 minibatches"),
])
def test_user_errors_get_one_line_and_exit_code_2(args, message, capsys, tmp_path):
    assert main([*args, "--address", "127.0.0.1:0", "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("seedfleet")] == [
        next(line for line in err.splitlines() if message in line)]


def test_an_unknown_algo_gets_one_line_and_exit_code_2():
    out = subprocess.run([sys.executable, "-m", "seedfleet.deploy.cli", "learner", "--algo", "ppo"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "unknown --algo 'ppo'" in out.stderr


@pytest.mark.parametrize("env,algo,clip", [("ALE/Pong-v5", "appo", 0.1), ("CartPole-v1", "vtrace", 0.0),
                                           ("MinAtar/Breakout-v1", "vtrace", 0.0), ("Pendulum-v1", "appo", 0.2),
                                           ("HalfCheetah-v5", "appo", 0.2)])
def test_without_algo_the_env_picks_the_default_algorithm(env, algo, clip, capsys):
    """By env family and kind of actions: APPO on ALE ids and on Box actions (classic control or MuJoCo)."""
    with pytest.raises(SystemExit):
        main(["learner", "--env", env, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert re.search(rf"--algo ALGO (?:(?!--\w).)*\(default: {algo}\)", help_text)  # in --algo's own help
    assert re.search(rf"--clip-ratio CLIP_RATIO .*?\(default: {clip}\)", help_text)


@pytest.mark.parametrize("env", ["Pendulum-v1", "Walker2d-v5"])
def test_a_discrete_only_algorithm_on_a_box_env_is_one_clear_line(env, capsys):
    assert main(["learner", "--env", env, "--algo", "r2d2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--algo r2d2 acts in discrete actions; {env} has box ones" in err[0], err


def test_an_lstm_under_a_value_torso_of_its_own_is_one_clear_line(capsys):
    """A value torso of its own keeps no memory: --lstm-size with it is refused with the flag
    that makes it work, before anything serves."""
    assert main(["learner", "--env", "ALE/Pong-v5", "--no-shared-torso", "--lstm-size", "8",
                 "--address", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lstm-size needs --shared-torso" in err[0], err


def test_box_envs_take_the_continuous_control_defaults():
    args = build_parser("run", "appo", "Hopper-v4").parse_args([])
    assert (args.normalize_observations, args.scale_rewards, args.shared_torso, args.activation) == (
        True, True, False, "tanh")
    assert (args.epochs, args.minibatches, args.entropy_cost, args.reward_clip) == (10, 32, 0.0, 10.0)
    discrete = build_parser("run", "appo", "CartPole-v1").parse_args([])
    assert (discrete.normalize_observations, discrete.shared_torso, discrete.reward_clip) == (False, True, 1.0)


def test_every_preset_names_flags_of_the_class_it_sets_with_their_types():
    """Each algorithm's task defaults, for every env family and kind of actions, are checked against the config
    class each part sets, as at start-up: a field renamed without its preset fails here."""
    from seedfleet.algorithms.registry import ALGORITHMS
    from seedfleet.deploy.launch_config import LaunchConfig
    from seedfleet.envs import FAMILIES
    from seedfleet.server.config import LearnerConfig

    for entry in ALGORITHMS.values():
        for family, kind in itertools.product(FAMILIES, (DISCRETE, BOX)):
            entry.presets(family.name, kind).check({"algorithm": entry.config_class, "network": NetworkConfig,
                                              "learner": LearnerConfig, "launch": LaunchConfig})


def test_a_preset_key_that_names_no_flag_or_has_the_wrong_type_is_an_error(monkeypatch):
    import dataclasses

    from seedfleet.algorithms import registry
    from seedfleet.settings import PresetError, Presets

    entry = registry.ALGORITHMS["vtrace"]
    for preset, message in ((Presets(algorithm={"unrol_length": 32}), "unrol_length=32 names no flag of ImpalaConfig"),
                            (Presets(algorithm={"unroll_length": "32"}), "a int is expected"),
                            (Presets(network={"torso": 3}), "a str is expected"),
                            (Presets(learner={"epochs": 3}), "epochs=3 names no flag of LearnerConfig"),
                            (Presets(algorithm={"normalize_advantages": 1}), "a bool is expected")):
        monkeypatch.setitem(registry.ALGORITHMS, "vtrace",
                            dataclasses.replace(entry, presets=lambda family, kind, p=preset: p))
        with pytest.raises(PresetError, match=message):
            build_parser("learner", "vtrace", "CartPole-v1")
    monkeypatch.setitem(registry.ALGORITHMS, "vtrace", dataclasses.replace(entry, presets=lambda family, kind: Presets(
        algorithm={"learning_rate": 1})))  # an int where a float is expected is fine
    assert build_parser("learner", "vtrace", "CartPole-v1").parse_args([]).learning_rate == 1


def test_a_launch_preset_sets_seedfleet_run_alone():
    """The Atari presets' launch part (32 envs per actor) is `seedfleet run`'s; the bench keeps its own."""
    assert build_parser("run", "appo", "ALE/Pong-v5").parse_args([]).envs_per_actor == 32
    assert build_parser("bench", "appo", "ALE/Pong-v5").parse_args([]).envs_per_actor == 64
    assert build_parser("learner", "appo", "ALE/Pong-v5").parse_args([]).max_frames == 20_000_000


def test_print_config_shows_every_flag_as_resolved_and_runs_nothing(monkeypatch, capsys, tmp_path):
    """The task's defaults (APPO's on an ALE id), an environment variable and a given flag all
    show in the record, a NaN as null (strict JSON), and nothing is started or written."""
    import json

    monkeypatch.setenv("SEEDFLEET_ENTROPY_COST", "0.02")
    logdir = tmp_path / "run"
    assert main(["run", "--env", "ALE/Breakout-v5", "--no-life-loss-terminal", "--logdir", str(logdir),
                 "--print-config"]) == 0
    flags = json.loads(capsys.readouterr().out)
    assert flags["algo"] == "appo" and flags["torso"] == "impala_shallow" and flags["envs_per_actor"] == 32
    assert flags["life_loss_terminal"] is False and flags["entropy_cost"] == 0.02
    assert flags["target_return"] is None and flags["mlp_sizes"] == [64, 64]
    assert not logdir.exists()
    assert main(["actor", "--envs", "3", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["envs"] == 3


QUICK_COMMANDS = [["--help"], ["run", "--help"], ["learner", "--help"], ["actor", "--help"], ["bench", "--help"],
                  ["eval", "--help"], ["plot", "--help"], ["run", "--env", "NoSuchEnv-v0"],
                  ["run", "--env", "Pendulum-v1", "--algo", "r2d2"], ["learner", "--epochz", "3"],
                  ["run", "--algo", "ppo"],
                  ["learner", "--frontends", "-1"], ["learner", "--frontends", "2", "--address", "unix:/tmp/sf.sock"],
                  ["eval", "--checkpoint", "runs/x", "--video", "x.avi"], ["eval", "--episodes", "3"],
                  ["eval", "--checkpoint", "runs/x", "--episodes", "0"], ["export", "--checkpoint", "runs/x"]]
# Runs the CLI as `seedfleet` does and says, as the interpreter exits, whether TensorFlow was loaded.
AT_EXIT = ("import atexit, sys; atexit.register(lambda: print('tensorflow loaded:', 'tensorflow' in sys.modules, "
           "file=sys.stderr)); from seedfleet.deploy.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("argv", QUICK_COMMANDS, ids=" ".join)
def test_help_mistakes_and_refused_envs_never_load_tensorflow(argv):
    """What the CLI can answer from flags and an env's spaces alone, it answers before
    TensorFlow loads: `--help`, a mistaken flag, an unknown env id or algorithm, an action
    space no algorithm here serves, settings that cannot work anywhere (BENCHMARKS.md has their
    CPU times)."""
    out = subprocess.run([sys.executable, "-c", AT_EXIT, *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == (0 if "--help" in argv else 2), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1] == "tensorflow loaded: False", out.stderr[-2000:]
