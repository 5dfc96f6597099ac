"""The learner process: a `Learner` (server/assembly.py) started, supervised and stopped.

The supervisor prints progress, saves checkpoints on their interval, and stops the run
on the frame budget, the target return, a signal, a caller's stop reason, or a failed
thread, after which every part is stopped and summary.json written. A run the learner
itself failed keeps its last good checkpoint: none is written from variables a failure
may have left half updated.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import time
from collections.abc import Callable

from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm
from seedfleet.errors import UsageError
from seedfleet.machine_cpu import record_machine
from seedfleet.server.assembly import Learner, LearnerConfig
from seedfleet.server.metrics import Metrics, write_summary
from seedfleet.server.run_setup import CheckpointMismatch
from seedfleet.settings import flag_values, record_config

log = logging.getLogger("seedfleet.learner")

# Stops after which no checkpoint is written: the variables may be half updated.
LEARNER_FAILURES = ("trainer_failed", "inference_failed", "supervisor_failed")


async def supervise(learner: Learner, stop: asyncio.Event,
                    stop_when: Callable[[Metrics], str | None] | None = None) -> str:
    """Runs the periodic tasks until a stop condition holds; returns its reason
    ("trainer_failed" or "inference_failed" when a thread failed, logged with its traceback,
    or in one line for a UsageError)."""
    config, metrics = learner.config, learner.metrics
    last_report = last_checkpoint = time.monotonic()
    while not stop.is_set():
        try:
            async with asyncio.timeout(0.25):
                await stop.wait()
        except TimeoutError:
            pass
        if (failure := learner.failure()) is not None:
            reason, error = failure
            if isinstance(error, UsageError):  # what the user asked for cannot run: one line, no traceback
                log.error("stopping: %s: %s", reason.replace("_", " "), error)
            else:
                log.error("stopping: %s", reason.replace("_", " "), exc_info=error)
            return reason
        if time.monotonic() - last_report >= config.progress_interval_s:
            last_report = time.monotonic()
            print(learner.reporter.report(), flush=True)
        if config.checkpoint_interval_s and time.monotonic() - last_checkpoint >= config.checkpoint_interval_s:
            await asyncio.get_running_loop().run_in_executor(None, learner.checkpoints.save)
            last_checkpoint = time.monotonic()
        if config.max_frames and metrics.frames >= config.max_frames:
            return "max_frames"
        if metrics.target_reached(config.target_return):
            return "target_return"
        if stop_when is not None and (asked := stop_when(metrics)):
            return asked
    return "signal"


async def serve(
    config: LearnerConfig,
    algo: Algorithm,
    algo_config: AlgoConfig,
    network: NetworkConfig,
    on_ready: Callable[[str], None] | None = None,
    stop_when: Callable[[Metrics], str | None] | None = None,
    train: bool = True,
    launched_envs: int = 0,
    launch: object | None = None,
) -> dict:
    """Runs the learner until the target, the frame budget, a signal or a stop reason from
    `stop_when(metrics)` (asked four times a second); returns the summary. With `train`
    off, unrolls are assembled and dropped (seedfleet bench's serve phase). `launched_envs`: the
    training envs the caller starts beside it (0: not known; R2D2 spreads its epsilons over them).
    `launch`: the caller's own config dataclass (seedfleet run's actors), recorded in the log
    dir's config.json with the learner's, the algorithm's and the network's."""
    configs = (launch, config, algo_config, network) if launch is not None else (config, algo_config, network)
    flags = flag_values(*configs)
    learner = await Learner.build(config, algo, algo_config, network, train, launched_envs, flags)
    try:  # the run's records beside its curve: its flags as resolved, and the machine it runs on
        record_config(learner.logdir, flags, learner.metrics.frames)
        record_machine(learner.logdir, learner.metrics.frames)
    except OSError as error:  # as a checkpoint that cannot be saved: said, and the run goes on
        log.warning("config.json or machine.json not written, the run goes on without its records: %s", error)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await learner.start()
    if on_ready is not None:
        on_ready(learner.address)
    reason = "supervisor_failed"  # unless supervise returns: a failure of its own still gets a summary
    try:
        reason = await supervise(learner, stop, stop_when)
    finally:
        snapshot = learner.metrics.summary()  # as of the stop, before the teardown's last steps
        # The signal handlers stay until the summary is written: a second SIGTERM (timeout(1)
        # signals the process and then its group) must not kill the teardown half way.
        clean = reason not in LEARNER_FAILURES
        await learner.stop(reason if clean else None, last_checkpoint=clean)
        summary = {"env": config.env, "algo": config.algo, **snapshot, "stop_reason": reason,
                   "unrolls": learner.queue.accounting(), "learner_steps_at_exit": learner.metrics.learner_steps}
        write_summary(learner.logdir / "summary.json", **summary)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        log.info("stopped (%s); summary in %s", reason, learner.logdir / "summary.json")
    return summary


def exit_code(config: LearnerConfig, summary: dict) -> int:
    """0, unless a target return was set and the frame budget ran out before it, or the
    run was stopped for a failure."""
    missed = not math.isnan(config.target_return) and summary["stop_reason"] == "max_frames"
    if missed:
        log.error("target return %s not reached in %d frames", config.target_return, summary["frames"])
    return 1 if missed or summary["stop_reason"].endswith("_failed") else 0


def main(algo: Algorithm, config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig) -> int:
    """`seedfleet learner`: `algo` is the registry's entry the CLI resolved for `config.algo`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        return exit_code(config, asyncio.run(serve(config, algo, algo_config, network)))
    except CheckpointMismatch as error:
        log.error("%s", error)
        return 2
