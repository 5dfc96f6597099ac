"""The `seedfleet` command: `learner`, `actor`, `run` (a learner and local actors), `bench`,
`eval` and `export` (a checkpoint's policy played locally, or written as a SavedModel), and
`plot` (runs' curves beside published ones). `--print-config` on any but `plot` prints every
flag's resolved value as JSON and exits.

Every command answers at once: its flags come from TensorFlow-free config dataclasses and
the algorithm registry's records, so `--help`, a mistaken flag, an unknown env id or an env
whose spaces no algorithm serves are answered before TensorFlow loads. TensorFlow (without
its native start-up lines unless `--verbose`, server/native_logs.py), the env families'
envs and the agents load only when the command runs; `seedfleet actor` and `plot` never load
TensorFlow.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import logging
import sys
from dataclasses import dataclass

from seedfleet.actions import ActionSpec
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import Algorithm, algorithm, default_algorithm
from seedfleet.deploy.flags import ENV_HELP, add_flags, env_setting, from_flags
from seedfleet.errors import UsageError
from seedfleet.server.config import EvalConfig, ExportConfig, LearnerConfig
from seedfleet.server.run_setup import refuse_another_setup
from seedfleet.settings import PresetError, Presets, flag_values


@dataclass(frozen=True)
class Command:
    """A subcommand: its flags are the fields of `configs` ("module:Class", TensorFlow-free),
    plus the learner's, the algorithm's and the network's when `learner_flags`;
    `module.entry` runs it with one config of each, in that order, after the registry's
    `Algorithm` record when `learner_flags`. A command that `parses_itself` gets its
    arguments as given. Its module loads only when it runs."""

    help: str
    module: str
    entry: str = "main"
    configs: tuple[str, ...] = ()
    learner_flags: bool = False
    restores: bool = False  # its learner restores --logdir's newest checkpoint (unless --fresh)
    tensorflow: bool = True  # loads TensorFlow: --verbose shows its native lines
    parses_itself: bool = False


COMMANDS = {
    "learner": Command("the learner server: central inference and training", "seedfleet.server.learner",
                       learner_flags=True, restores=True),
    "actor": Command("an environment-only actor process", "seedfleet.actor_client.actor",
                     configs=("seedfleet.actor_client.actor:ActorConfig",), tensorflow=False),
    "run": Command("a learner and N local actor processes on this machine", "seedfleet.deploy.local", "run_local",
                   ("seedfleet.deploy.launch_config:LaunchConfig",), learner_flags=True,
                   restores=True),
    "bench": Command("frames/s of the system beside the env, inference and training ceilings", "seedfleet.bench.run",
                     configs=("seedfleet.bench.config:BenchConfig",), learner_flags=True),
    "eval": Command("play a checkpoint's policy locally: mean and std of returns, a video", "seedfleet.server.evaluate",
                    configs=("seedfleet.server.config:EvalConfig",)),
    "export": Command("write a checkpoint's greedy policy as a TensorFlow SavedModel", "seedfleet.server.export",
                      configs=("seedfleet.server.config:ExportConfig",)),
    "plot": Command("runs' return against frames and wall time, beside published curves, as a PNG",
                    "seedfleet.bench.plot", tensorflow=False, parses_itself=True),
}

LAUNCH_PART = "seedfleet.deploy.launch_config:LaunchConfig"  # the command configs a preset's `launch` part sets


def _config_class(name: str) -> type:
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(module), cls)


def _classes(command: str, algo: Algorithm | None) -> list[type]:
    """The config dataclasses whose fields are `command`'s flags; the agent's set follows --algo."""
    spec = COMMANDS[command]
    classes = [_config_class(name) for name in spec.configs]
    if spec.learner_flags:
        classes += [LearnerConfig, algo.config_class, NetworkConfig]
    return classes


@functools.lru_cache(maxsize=8)
def task_of(env: str, options: str = "") -> tuple[str, ActionSpec]:
    """(env family, actions) of an env id with its --env-options: what picks the task defaults.
    UsageError for an id no family makes or spaces seedfleet does not serve (a probe env is
    made and closed, no TensorFlow)."""
    from seedfleet.envs import check_env, family_for  # gymnasium and the families: commands that use them

    return family_for(env).name, check_env(env, options)


def _algo_and_env(command: str, argv: list[str]) -> tuple[Algorithm | None, str, str]:
    """The registry's record of --algo, and --env and --env-options as given (or set in the
    environment), for a command with the learner's flags (None for the others: the actor never
    looks it up). Without --algo the env's family and kind of actions pick the algorithm (APPO
    on ALE ids and Box actions)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default=env_setting("algo", ""))
    pre.add_argument("--env", default=env_setting("env", "") or LearnerConfig.env)
    pre.add_argument("--env-options", default=env_setting("env_options", "") or LearnerConfig.env_options)
    known = pre.parse_known_args(argv)[0]
    if not COMMANDS[command].learner_flags:
        return None, known.env, known.env_options
    if known.algo:
        return algorithm(known.algo), known.env, known.env_options
    family, actions = task_of(known.env, known.env_options)
    return algorithm(default_algorithm(family, actions.kind)), known.env, known.env_options


def task_defaults(command: str, algo: Algorithm | None, env: str, options: str = "") -> dict:
    """Defaults that follow the task (the algorithm's presets for the env's family and kind of
    actions), each part checked against the class it sets; any flag given still wins."""
    spec = COMMANDS[command]
    if not spec.learner_flags:
        return {}
    family, actions = task_of(env, options)
    presets: Presets = algo.presets(family, actions.kind)
    launch = LAUNCH_PART in spec.configs
    presets.check({"algorithm": algo.config_class, "network": NetworkConfig, "learner": LearnerConfig,
                   "launch": _config_class(LAUNCH_PART)})
    return {"algo": algo.name, **presets.algorithm, **presets.network, **presets.learner,
            **(presets.launch if launch else {})}


def build_parser(command: str, algo: Algorithm | str | None = None, env: str = LearnerConfig.env,
                 options: str = "") -> argparse.ArgumentParser:
    """`command`'s parser; `algo` (a registry record or its name), the env id and its
    --env-options for the learner's commands."""
    spec = COMMANDS[command]
    if spec.learner_flags and not isinstance(algo, Algorithm):
        algo = algorithm(algo or LearnerConfig.algo)
    parser = argparse.ArgumentParser(prog=f"seedfleet {command}", description=spec.help, epilog=ENV_HELP)
    taken: set[str] = set()
    defaults = task_defaults(command, algo, env, options)
    for cls in _classes(command, algo):
        add_flags(parser, cls, taken, defaults)
    parser.add_argument("--print-config", action="store_true",
                        help="print every flag's value as resolved (task defaults, environment, flags given) "
                             "as JSON and exit; a run records the same in its log dir's config.json")
    if spec.tensorflow:
        parser.add_argument("--verbose", action="store_true", default=bool(env_setting("verbose", False)),
                            help="TensorFlow's native start-up and info lines on the console "
                                 "(as with TF_CPP_MIN_LOG_LEVEL=0)")
    return parser


def _load_tensorflow(verbose: bool) -> None:
    """TensorFlow, before any module of ours imports it: quietly unless `verbose`."""
    from seedfleet.server.native_logs import import_tensorflow_quietly

    import_tensorflow_quietly(verbose)
    if not verbose:
        for name in ("absl", "tensorflow"):  # absl-py's info lines at shutdown; SavedModel's "Assets written"
            logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        top = argparse.ArgumentParser(prog="seedfleet", description="SEED-style distributed RL.")
        top.add_argument("command", choices=COMMANDS, help="; ".join(f"{k}: {c.help}" for k, c in COMMANDS.items()))
        top.parse_args(argv[:1])
        return 2
    command, rest = argv[0], argv[1:]
    spec = COMMANDS[command]
    try:
        if spec.parses_itself:
            return getattr(importlib.import_module(spec.module), spec.entry)(rest)
        algo, env, options = _algo_and_env(command, rest)
        args = build_parser(command, algo, env, options).parse_args(rest)
        configs = [from_flags(cls, args) for cls in _classes(command, algo)]
        if args.print_config:
            print(json.dumps(flag_values(*configs), indent=1))
            return 0
        if spec.learner_flags:
            # an unknown id or option, spaces seedfleet does not serve or this algorithm does not act in:
            # refused before TensorFlow loads, as are settings that cannot work anywhere
            algo.check_actions(env, task_of(env, args.env_options)[1])
        for config in configs:  # a config's own refusals
            if isinstance(config, (LearnerConfig, EvalConfig, ExportConfig)):
                config.check()
        if spec.restores:  # a log dir of another env, algo or network: refused now, not after TensorFlow loads
            refuse_another_setup(*configs[-3:])
        if spec.tensorflow:
            _load_tensorflow(args.verbose)
        run = getattr(importlib.import_module(spec.module), spec.entry)
        return run(algo, *configs) if spec.learner_flags else run(*configs)
    except (UsageError, PresetError) as error:
        print(f"seedfleet {command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
