"""The one-machine launcher: a learner in this process and N actor processes beside it."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import signal
import subprocess
import sys
from dataclasses import dataclass

from algorithms.networks import NetworkConfig
from server.learner import AlgoConfig, LearnerConfig, exit_code, serve


@dataclass
class LaunchConfig:
    actors: int = 2  # local actor processes
    envs_per_actor: int = 16  # envs hosted by each actor
    eval_actors: int = 0  # extra actors whose envs evaluate (greedy, not trained on, reported apart)


def actor_command(address: str, envs: int, evaluation: bool = False) -> list[str]:
    command = [sys.executable, "-m", "deploy.cli", "actor", "--learner", address, "--envs", str(envs)]
    return command + ["--evaluation"] if evaluation else command


def _die_with_parent() -> None:
    """Linux: the actor gets SIGTERM when the launcher dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run_local(launch: LaunchConfig, learner: LearnerConfig, algo: AlgoConfig, network: NetworkConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if learner.address == LearnerConfig.address:
        learner.address = "127.0.0.1:0"  # a free port on loopback
    if not learner.exploration_envs:  # the Ape-X epsilons spread over exactly the envs launched
        learner.exploration_envs = launch.actors * launch.envs_per_actor
    actors: list[subprocess.Popen] = []

    def start_actors(address: str) -> None:
        for i in range(launch.actors + launch.eval_actors):
            command = actor_command(address, launch.envs_per_actor, evaluation=i >= launch.actors)
            actors.append(subprocess.Popen(command, preexec_fn=_die_with_parent))

    try:
        summary = asyncio.run(serve(learner, algo, network, on_ready=start_actors))
    finally:
        for proc in actors:
            proc.terminate()
        for proc in actors:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return exit_code(learner, summary)
