"""The `seedfleet` command: `learner`, `actor`, `run` (a learner and local actors), `bench`,
`eval` and `export` (a checkpoint's policy played locally, or written as a SavedModel).

Subcommands import lazily: `seedfleet actor` never loads TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import sys

from deploy.flags import ENV_HELP, add_flags, env_setting, from_flags

COMMANDS = {
    "learner": "the learner server: central inference and training",
    "actor": "an environment-only actor process",
    "run": "a learner and N local actor processes on this machine",
    "bench": "frames/s of the system beside the env, inference and training ceilings",
    "eval": "play a checkpoint's policy locally: mean and std of returns, a video",
    "export": "write a checkpoint's greedy policy as a TensorFlow SavedModel",
}


def _algorithm(algo: str):
    from algorithms.registry import ALGORITHMS

    if algo not in ALGORITHMS:
        raise SystemExit(f"seedfleet: unknown --algo {algo!r}; choose from {', '.join(ALGORITHMS)}")
    return ALGORITHMS[algo]


def _learner_classes(algo: str) -> list:
    from algorithms.networks import NetworkConfig
    from server.learner import LearnerConfig

    return [LearnerConfig, _algorithm(algo).config_class, NetworkConfig]


def _classes(command: str, algo: str) -> list:
    """The config dataclasses whose fields are `command`'s flags; the agent's set follows --algo."""
    if command == "actor":
        from actor_client.actor import ActorConfig

        return [ActorConfig]
    if command == "learner":
        return _learner_classes(algo)
    if command == "bench":
        from bench.run import BenchConfig

        return [BenchConfig]
    if command == "eval":
        from server.evaluate import EvalConfig

        return [EvalConfig]
    if command == "export":
        from server.export import ExportConfig

        return [ExportConfig]
    from deploy.local import LaunchConfig

    return [LaunchConfig, *_learner_classes(algo)]


def _algo_and_env(argv: list[str]) -> tuple[str, str]:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default=env_setting("algo", "") or "vtrace")
    pre.add_argument("--env", default=env_setting("env", "") or "CartPole-v1")
    known = pre.parse_known_args(argv)[0]
    return known.algo, known.env


def task_defaults(command: str, algo: str, env: str) -> dict:
    """Defaults that follow the task (the algorithm's registry entry says which, for an
    Atari env or another, and for `run`); any flag given still wins."""
    if command in ("actor", "bench", "eval", "export"):
        return {}
    from seedfleet.envs import atari_settings

    return _algorithm(algo).task_defaults(atari_settings(env) is not None, command == "run")


def build_parser(command: str, algo: str = "vtrace", env: str = "CartPole-v1") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"seedfleet {command}", description=COMMANDS[command], epilog=ENV_HELP)
    taken: set[str] = set()
    defaults = task_defaults(command, algo, env)
    for cls in _classes(command, algo):
        add_flags(parser, cls, taken, defaults)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        top = argparse.ArgumentParser(prog="seedfleet", description="SEED-style distributed RL.")
        top.add_argument("command", choices=COMMANDS, help="; ".join(f"{k}: {v}" for k, v in COMMANDS.items()))
        top.parse_args(argv[:1])
        return 2
    command, rest = argv[0], argv[1:]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter
    algo, env = _algo_and_env(rest)
    args = build_parser(command, algo, env).parse_args(rest)
    configs = [from_flags(cls, args) for cls in _classes(command, algo)]
    if command == "actor":
        from actor_client.actor import main as actor_main

        return actor_main(*configs)
    if command == "learner":
        from server.learner import main as learner_main

        return learner_main(*configs)
    if command == "bench":
        from bench.run import run_bench

        defaults = task_defaults("learner", configs[0].algo, configs[0].env)
        return run_bench(configs[0], defaults, " ".join(["seedfleet", *argv]))
    if command == "eval":
        from server.evaluate import main as eval_main

        return eval_main(*configs)
    if command == "export":
        from server.export import main as export_main

        return export_main(*configs)
    from deploy.local import run_local

    return run_local(*configs)


if __name__ == "__main__":
    sys.exit(main())
