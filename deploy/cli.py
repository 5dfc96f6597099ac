"""The `seedfleet` command: `learner`, `actor`, `run` (a learner and local actors), `bench`,
`eval` and `export` (a checkpoint's policy played locally, or written as a SavedModel).
`--print-config` on any of them prints every flag's resolved value as JSON and exits.

Subcommands import lazily: `seedfleet actor` never loads TensorFlow. The others load it
without its native start-up lines unless `--verbose` (server/native_logs.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from dataclasses import dataclass

from seedfleet.deploy.flags import ENV_HELP, PresetError, add_flags, check_defaults, env_setting, from_flags
from seedfleet.errors import UsageError
from seedfleet.settings import flag_values


@dataclass(frozen=True)
class Command:
    """A subcommand: its flags are the fields of `configs` (classes in `module`), plus the
    learner's, the algorithm's and the network's when `learner_flags`; `module.entry`
    runs it with one config of each, in that order. Modules load only when asked for."""

    help: str
    module: str
    entry: str = "main"
    configs: tuple[str, ...] = ()
    learner_flags: bool = False
    tensorflow: bool = True  # loads TensorFlow: --verbose shows its native lines


COMMANDS = {
    "learner": Command("the learner server: central inference and training", "seedfleet.server.learner",
                       learner_flags=True),
    "actor": Command("an environment-only actor process", "seedfleet.actor_client.actor", configs=("ActorConfig",),
                     tensorflow=False),
    "run": Command("a learner and N local actor processes on this machine", "seedfleet.deploy.local", "run_local",
                   ("LaunchConfig",), learner_flags=True),
    "bench": Command("frames/s of the system beside the env, inference and training ceilings", "seedfleet.bench.run",
                     configs=("BenchConfig",), learner_flags=True),
    "eval": Command("play a checkpoint's policy locally: mean and std of returns, a video", "seedfleet.server.evaluate",
                    configs=("EvalConfig",)),
    "export": Command("write a checkpoint's greedy policy as a TensorFlow SavedModel", "seedfleet.server.export",
                      configs=("ExportConfig",)),
}


def _algorithm(algo: str):
    from seedfleet.algorithms.registry import ALGORITHMS

    if algo not in ALGORITHMS:
        print(f"seedfleet: error: unknown --algo {algo!r}; choose from {', '.join(ALGORITHMS)}", file=sys.stderr)
        raise SystemExit(2)
    return ALGORITHMS[algo]


def _classes(command: str, algo: str) -> list:
    """The config dataclasses whose fields are `command`'s flags; the agent's set follows --algo."""
    spec = COMMANDS[command]
    module = importlib.import_module(spec.module)
    classes = [getattr(module, name) for name in spec.configs]
    if spec.learner_flags:
        from seedfleet.algorithms.networks import NetworkConfig
        from seedfleet.server.assembly import LearnerConfig

        classes += [LearnerConfig, _algorithm(algo).config_class, NetworkConfig]
    return classes


def _algo_and_env(command: str, argv: list[str]) -> tuple[str, str]:
    """--algo and --env as given (or set in the environment). Without --algo, a command with the
    learner's flags takes the env's default algorithm (the registry's: APPO on ALE ids); the
    others (the actor: no TensorFlow) never look it up."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default=env_setting("algo", ""))
    pre.add_argument("--env", default=env_setting("env", "") or "CartPole-v1")
    known = pre.parse_known_args(argv)[0]
    if not known.algo and COMMANDS[command].learner_flags:
        from seedfleet.algorithms.registry import default_algorithm

        return default_algorithm(known.env), known.env
    return known.algo or "vtrace", known.env


def task_defaults(command: str, algo: str, env: str) -> dict:
    """Defaults that follow the task (the algorithm's registry entry), for the commands
    with the learner's flags; any flag given still wins."""
    if not COMMANDS[command].learner_flags:
        return {}
    from seedfleet.algorithms.registry import task_defaults as algorithm_defaults

    _algorithm(algo)  # an unknown --algo is a one-line error
    return {"algo": algo, **algorithm_defaults(algo, env, run=command == "run")}


def build_parser(command: str, algo: str = "vtrace", env: str = "CartPole-v1") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"seedfleet {command}", description=COMMANDS[command].help, epilog=ENV_HELP)
    taken: set[str] = set()
    defaults = task_defaults(command, algo, env)
    classes = _classes(command, algo)
    check_defaults(defaults, classes)
    for cls in classes:
        add_flags(parser, cls, taken, defaults)
    parser.add_argument("--print-config", action="store_true",
                        help="print every flag's value as resolved (task defaults, environment, flags given) "
                             "as JSON and exit; a run records the same in its log dir's config.json")
    if COMMANDS[command].tensorflow:
        parser.add_argument("--verbose", action="store_true", default=bool(env_setting("verbose", False)),
                            help="TensorFlow's native start-up and info lines on the console "
                                 "(as with TF_CPP_MIN_LOG_LEVEL=0)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        top = argparse.ArgumentParser(prog="seedfleet", description="SEED-style distributed RL.")
        top.add_argument("command", choices=COMMANDS, help="; ".join(f"{k}: {c.help}" for k, c in COMMANDS.items()))
        top.parse_args(argv[:1])
        return 2
    command, rest = argv[0], argv[1:]
    if COMMANDS[command].tensorflow:  # before any module of ours imports it
        from seedfleet.server.native_logs import import_tensorflow_quietly

        verbose = "--verbose" in rest or bool(env_setting("verbose", False))
        import_tensorflow_quietly(verbose)
        if not verbose:
            for name in ("absl", "tensorflow"):  # absl-py's info lines at shutdown; SavedModel's "Assets written"
                logging.getLogger(name).setLevel(logging.WARNING)
    try:
        algo, env = _algo_and_env(command, rest)
        args = build_parser(command, algo, env).parse_args(rest)
        configs = [from_flags(cls, args) for cls in _classes(command, algo)]
        if args.print_config:
            print(json.dumps(flag_values(*configs), indent=1))
            return 0
        return getattr(importlib.import_module(COMMANDS[command].module), COMMANDS[command].entry)(*configs)
    except (UsageError, PresetError) as error:
        print(f"seedfleet {command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
