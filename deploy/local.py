"""The one-machine launcher: a learner in this process and N actor processes beside it.

The launcher keeps its fleet up: an actor that exits is started again (up to
MAX_RESTARTS times each), except one the learner rejected (exit code 2), which ends
the run, since a new one would be rejected too.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm
from seedfleet.deploy.launch_config import LaunchConfig
from seedfleet.errors import UsageError
from seedfleet.processes import actor_command, start_child, stop_children
from seedfleet.server.assembly import LearnerConfig
from seedfleet.server.learner import exit_code, serve
from seedfleet.server.metrics import Metrics
from seedfleet.server.run_setup import CheckpointMismatch

log = logging.getLogger("seedfleet.run")

MAX_RESTARTS = 10
PROTOCOL_ERROR_EXIT = 2  # an actor the learner rejected (actor_client.actor)


class Fleet:
    """The local actor processes, restarted when they exit."""

    def __init__(self, launch: LaunchConfig, token_file: str = ""):
        self.launch = launch
        self.token_file = token_file  # the learner's, sent by every actor
        self.commands: list[list[str]] = []
        self.procs: list[subprocess.Popen] = []
        self.restarts: list[int] = []

    def start(self, address: str) -> None:
        total = self.launch.actors + self.launch.eval_actors
        training = actor_command(address, self.launch.envs_per_actor, False, self.launch.env_groups, self.token_file,
                                 self.launch.actor_nice)
        # evaluation actors step their envs in one group: any --eval-envs divides into it
        evaluation = actor_command(address, self.launch.eval_envs or self.launch.envs_per_actor, True, 1,
                                   self.token_file, self.launch.actor_nice)
        self.commands = [training if i < self.launch.actors else evaluation for i in range(total)]
        self.procs = [start_child(command) for command in self.commands]
        self.restarts = [0] * total

    def check(self, _metrics: Metrics) -> str | None:
        """Restarts actors that exited; returns a stop reason when one cannot be restarted."""
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code is None:
                continue
            if code == PROTOCOL_ERROR_EXIT or self.restarts[i] >= MAX_RESTARTS:
                log.error("actor %d exited with code %d; stopping the run", i, code)
                return "actor_failed"
            self.restarts[i] += 1
            log.warning("actor %d exited with code %d; starting it again (%d/%d)", i, code, self.restarts[i],
                        MAX_RESTARTS)
            self.procs[i] = start_child(self.commands[i])
        return None

    def stop(self) -> None:
        stop_children(self.procs, timeout_s=10)


def run_local(algo: Algorithm, launch: LaunchConfig, learner: LearnerConfig, algo_config: AlgoConfig,
              network: NetworkConfig) -> int:
    """`seedfleet run`: `algo` is the registry's entry the CLI resolved for `learner.algo`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if learner.tls_cert or learner.tls_client_ca:
        raise UsageError("seedfleet run's actors reach the learner on this machine, without TLS; "
                         "the --tls-* flags are for `seedfleet learner` with actors elsewhere")
    if learner.address == LearnerConfig.address:
        learner.address = "127.0.0.1:0"  # a free port on loopback
    fleet = Fleet(launch, learner.token_file)
    try:
        summary = asyncio.run(serve(learner, algo, algo_config, network, on_ready=fleet.start, stop_when=fleet.check,
                                    launched_envs=launch.actors * launch.envs_per_actor, launch=launch))
    except CheckpointMismatch as error:
        log.error("%s", error)
        return 2
    finally:
        fleet.stop()
    return exit_code(learner, summary)
