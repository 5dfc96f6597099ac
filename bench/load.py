"""A load test of the learner: hundreds of synthetic actor streams from a few processes.

    python -m seedfleet.bench.load --streams 256 --seconds 300     # a learner of its own on loopback
    python -m seedfleet.bench.load --learner HOST:PORT ...          # or one already running
    python -m seedfleet.bench.load --env ALE/Pong-v5 --learner-flags "--torso pool" --streams 32 --envs-per-stream 16
                                                          # the learner's own ceiling on Atari frames (below)

Each stream says Hello for `--envs-per-stream` envs and then sends Steps of one pre-built
batch of zero observations (the shape and dtype the learner's handshake names, within the
space's bounds) as fast as the learner answers; no env is stepped, so the learner alone is
measured, for `--seconds`, from `--warmup-s` after every stream has had its first answer
and (for a learner it starts) the learner has taken its first step (the first inference
traces the policy, the first step compiles training; a busy machine only delays the window). The
processes split the streams among them and each drives its share on one event loop.
Printed, and written to --json: served env steps/s, the round-trip latency's p50, p99 and
p99.9, the errors by status, and the learner's resident memory sampled once a second (its
first and last thirds, for flatness).

The learner's own ceiling: with a model whose cost is negligible (CartPole's MLP, or
`--env ALE/Pong-v5 --learner-flags "--torso pool"` for Atari frames), what is left is the
learner's Python path (gRPC, decoding, the batcher, per-env state, unroll assembly, the
trainer's loop). The streams' processes share the machine with it, so the figure that
carries to other hosts is per learner CPU second: env steps served per second of the
learner's CPU time, and its CPU time per env step by thread and by stage
(seedfleet/stage_clock.py), read from the learner's learner_cpu.json at the window's ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import numpy as np

from seedfleet.envs import StepBatch
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import CHANNEL_OPTIONS, PROTOCOL_VERSION, encode_steps

READY_TIMEOUT_S = 300.0  # the longest the window waits for every stream's first answer


@dataclass
class LoadConfig:
    learner: str = ""  # HOST:PORT of a running learner (empty: start one on loopback)
    env: str = "CartPole-v1"  # the env of the learner this starts; streams send its observations' shape
    learner_flags: str = ""  # more flags for the learner this starts
    streams: int = 256
    envs_per_stream: int = 4
    processes: int = 4
    seconds: float = 60.0
    warmup_s: float = 15.0
    json: str = ""


async def _stream(address: str, envs: int, run_id: int, window, answered_once, latencies: list[float],
                  errors: dict[str, int], counts: dict[str, int]) -> int:
    """One synthetic actor stream; returns the env steps it was served within `window`
    ([since, until], monotonic times shared by every process, set by the parent once every
    stream is answered: until then both are infinite), whose round trips go to `latencies`;
    counts every steps message it sent and every answer it read in `counts`, and adds one to
    `answered_once` at its first answer."""
    served = 0
    # A connection of its own, as each actor process has: gRPC would otherwise carry a
    # process's streams on one connection, and the kernel spreads connections, not streams,
    # over a learner's front ends.
    options = [*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        outbox: asyncio.Queue = asyncio.Queue()

        async def requests():
            while (message := await outbox.get()) is not None:
                yield message

        call = pb_grpc.LearnerStub(channel).Act(requests())
        hello = pb.Hello(run_id=run_id, num_envs=envs, protocol_version=PROTOCOL_VERSION)
        await outbox.put(pb.ActorMessage(hello=hello))
        try:
            config = (await call.read()).config
            env_ids = np.asarray(config.env_ids, np.int32)
            observations = np.zeros((envs, *config.observation.shape), config.observation.dtype)
            messages = [encode_steps(env_ids, StepBatch(observations, np.zeros(envs, np.float32), np.zeros(envs, bool),
                                                        np.zeros(envs, bool), np.full(envs, first)))
                        for first in (True, False)]
            first, reads = True, 0
            while time.monotonic() < window[1]:
                sent = time.monotonic()
                message = messages[0 if first else 1]
                message.steps.actions_read = reads  # lockstep: the replies read so far
                await outbox.put(message)
                counts["sent"] += 1
                await call.read()
                counts["answered"] += 1
                if not reads:
                    with answered_once.get_lock():
                        answered_once.value += 1
                reads += 1
                if sent >= window[0]:
                    latencies.append(time.monotonic() - sent)
                    served += envs
                first = False
        except grpc.aio.AioRpcError as error:
            errors[error.code().name] = errors.get(error.code().name, 0) + 1
        finally:
            await outbox.put(None)
            call.cancel()
    return served


def _process(address: str, streams: int, envs: int, first_run_id: int, window, answered_once, out: Path) -> None:
    async def main() -> dict:
        latencies: list[float] = []
        errors: dict[str, int] = {}
        counts = {"sent": 0, "answered": 0}
        served = await asyncio.gather(*(_stream(address, envs, first_run_id + i, window, answered_once, latencies,
                                                errors, counts) for i in range(streams)))
        return {"served": int(sum(served)), "latencies": latencies, "errors": errors, "requests": counts}

    out.write_text(json.dumps(asyncio.run(main())))


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def _has_trained(logdir: Path) -> bool:
    """Whether the learner we started has taken a learner step (its progress.csv says so): its
    first one compiles the training step, which stalls serving for seconds, so the window waits."""
    try:
        rows = (logdir / "progress.csv").read_text().splitlines()
    except OSError:
        return False
    return len(rows) > 1 and int(rows[-1].split(",")[rows[0].split(",").index("learner_steps")]) > 0


def _start_learner(config: LoadConfig, logdir: str) -> tuple[subprocess.Popen, str]:
    envs = config.streams * config.envs_per_stream
    proc = subprocess.Popen([sys.executable, "-m", "seedfleet.deploy.cli", "learner", "--env", config.env,
                             "--address", "127.0.0.1:0", "--max-envs", str(envs), "--logdir", logdir,
                             "--max-envs-per-stream", str(max(config.envs_per_stream, 1)),
                             "--progress-interval-s", "1", *shlex.split(config.learner_flags)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if match := re.search(r"listening on (\S+),", line):
            return proc, match.group(1)
    raise RuntimeError(f"the learner exited with code {proc.wait()}")


def run_load(config: LoadConfig) -> dict:
    with tempfile.TemporaryDirectory(prefix="seedfleet-load-") as tmp:
        learner, address = (None, config.learner) if config.learner else _start_learner(config, tmp)
        try:
            shares = np.array_split(np.arange(config.streams), config.processes)
            outs = [Path(tmp) / f"load-{i}.json" for i in range(len(shares))]
            shared_window = multiprocessing.Array("d", [math.inf, math.inf], lock=False)
            answered_once = multiprocessing.Value("i", 0)
            workers = [multiprocessing.Process(target=_process, args=(address, len(share), config.envs_per_stream,
                                                                      10_000 + int(share[0]), shared_window,
                                                                      answered_once, out))
                       for share, out in zip(shares, outs, strict=True) if len(share)]
            for worker in workers:
                worker.start()
            deadline = time.monotonic() + READY_TIMEOUT_S  # every stream answered once, or the workers gone
            while ((answered_once.value < config.streams or (learner is not None and not _has_trained(Path(tmp))))
                   and time.monotonic() < deadline and any(worker.is_alive() for worker in workers)):
                time.sleep(0.05)
            since = time.monotonic() + config.warmup_s
            window = (since, since + config.seconds)
            shared_window[0], shared_window[1] = window
            memory, cpu = [], []  # memory once a second; cpu: learner_cpu.json at the window's ends
            sampled = since
            while learner is not None and len(cpu) < 2:  # read at the window's ends, whatever the workers do
                now = time.monotonic()
                if now >= window[len(cpu)]:
                    cpu.append(json.loads((Path(tmp) / "learner_cpu.json").read_text()))
                if now >= sampled:
                    memory.append(round(_rss_mib(learner.pid), 1))
                    sampled += 1.0
                time.sleep(max(min(0.05, window[min(len(cpu), 1)] - time.monotonic()), 0.0))
            for worker in workers:
                worker.join()
            parts = [json.loads(out.read_text()) for out in outs if out.exists()]
        finally:
            if learner is not None:
                learner.terminate()
                learner.wait(timeout=60)
    latencies = np.concatenate([np.asarray(p["latencies"]) for p in parts]) * 1e3 if parts else np.zeros(0)
    errors: dict[str, int] = {}
    for part in parts:
        for code, n in part["errors"].items():
            errors[code] = errors.get(code, 0) + n
    third = max(len(memory) // 3, 1)
    served = sum(p["served"] for p in parts)
    return {
        "config": asdict(config),
        "env_steps_per_s": round(served / config.seconds, 1),
        **_learner_cpu(cpu),
        "latency_ms": {q: round(float(np.percentile(latencies, p)), 2) if len(latencies) else None
                       for q, p in (("p50", 50), ("p99", 99), ("p99.9", 99.9))},
        "errors": errors,
        "requests": {kind: sum(p["requests"][kind] for p in parts) for kind in ("sent", "answered")},
        "learner_rss_mib": {"first_third_mean": round(float(np.mean(memory[:third])), 1) if memory else None,
                            "last_third_mean": round(float(np.mean(memory[-third:])), 1) if memory else None,
                            "max": max(memory) if memory else None},
        "workers_failed": sum(worker.exitcode != 0 for worker in workers),
    }


# The stages of each thread (seedfleet/stage_clock.py); the rest of a thread's CPU is its "other".
# With --frontends, the front ends' threads and stages are named "frontend:<name>", and "link"
# is the time either end spends on their links.
THREAD_STAGES = {"main": ("receive", "decode", "batcher", "reply", "link"),
                 "inference": ("batch", "policy", "checks", "env_state", "unrolls", "metrics"),
                 "trainer": ("train_batch", "train_step"),
                 "frontend:main": ("frontend:receive", "frontend:decode", "frontend:reply", "frontend:link")}


def _learner_cpu(cpu: list[dict]) -> dict:
    """From two reads of learner_cpu.json: env steps per learner CPU second, and the learner's
    CPU microseconds per env step by process (the learner's outside TensorFlow's pools,
    policy call and train step: what its Python threads, which share one interpreter lock,
    spend), by thread ("main" is the event loop) and, within the learner's own threads, by
    stage ("other": gRPC's asyncio layer and the loop itself on the main thread, what falls
    between the stages on the others)."""
    if len(cpu) < 2 or cpu[1]["env_steps"] <= cpu[0]["env_steps"]:
        return {}
    start, end = cpu
    served = end["env_steps"] - start["env_steps"]

    def per_step(kind: str) -> dict[str, float]:
        return {name: 1e6 * (total - start[kind].get(name, 0.0)) / served for name, total in end[kind].items()}

    threads, stages = per_step("threads_cpu_s"), per_step("stages_cpu_s")
    by_stage = {}
    for thread, names in THREAD_STAGES.items():
        if thread not in threads:
            continue
        own = {name: round(stages.get(name, 0.0), 2) for name in names}
        by_stage[thread] = {**own, "other": round(threads.get(thread, 0.0) - sum(own.values()), 2)}
    total_us = sum(threads.values())
    frontends_us = sum(us for name, us in threads.items() if name.startswith("frontend:"))
    tensorflow_us = threads.get("tf", 0.0) + stages.get("policy", 0.0) + stages.get("train_step", 0.0)
    return {"learner_env_steps": served, "learner_cpu_s": round(total_us * served / 1e6, 2),
            "env_steps_per_learner_cpu_s": round(1e6 / total_us, 1) if total_us else None,
            "learner_cpu_us_per_env_step": round(total_us, 2),
            "by_process_us_per_env_step": {"learner": round(total_us - frontends_us, 2),
                                           "learner_outside_tensorflow": round(total_us - frontends_us - tensorflow_us,
                                                                               2),
                                           "frontends": round(frontends_us, 2)},
            "by_thread_us_per_env_step": {name: round(us, 2) for name, us in
                                          sorted(threads.items(), key=lambda kv: -kv[1]) if us >= 0.01},
            "by_stage_us_per_env_step": by_stage}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seedfleet.bench.load", description=__doc__.split("\n\n")[0])
    for name, default in asdict(LoadConfig()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    config = LoadConfig(**vars(parser.parse_args(argv)))
    results = run_load(config)
    print(json.dumps({k: v for k, v in results.items() if k != "config"}, indent=1))
    if config.json:
        Path(config.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if not results["errors"] and not results["workers_failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
