"""The learner's assembly: its config, its agent, and every part wired to the next.

    actors ==Steps==> LearnerService --StepRequest--> DynamicBatcher --batch-->
    inference thread (InferenceEngine: agent.act, EnvSlots) --sequences--> UnrollQueue
    --> trainer thread (agent.learn)

Inference and training read and write the same variables: nothing is shipped.
`Learner.build` wires the parts; `start` and `stop` bring them up and down in order.
server/learner.py supervises a running one; the bench and `seedfleet eval` build their
agents with the same `make_agent`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import faulthandler
import json
import logging
import math
import sys
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import tensorflow as tf

from algorithms.agent import Agent, AgentContext
from algorithms.networks import NetworkConfig
from algorithms.registry import AlgoConfig, algorithm
from algorithms.trainer import OnPolicyTrainer, TrainerThread
from seedfleet.envs import EnvBatch, atari_settings, observation_bounds
from seedfleet.errors import UsageError
from seedfleet.security import read_token, require_protection, server_credentials
from seedfleet.stage_clock import StageClock
from seedfleet.threads import name_this_thread, spawned_threads_named
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import MAX_MESSAGE_BYTES, EnvSpec, atari_to_proto
from server.auth import TokenCheck
from server.batcher import DynamicBatcher
from server.checkpoint import CheckpointStore, LearnerCheckpoints
from server.env_slots import EnvSlots
from server.health import LearnerHealth, add_health
from server.inference import InferenceEngine
from server.metrics import Metrics, Reporter
from server.service import LearnerService, add_to_server
from server.unroll_queue import UnrollQueue

log = logging.getLogger("seedfleet.learner")


@dataclass
class LearnerConfig:
    env: str = "CartPole-v1"  # any gymnasium id with discrete actions; ALE ids get Atari preprocessing
    algo: str = "vtrace"  # the agent: vtrace (IMPALA) or r2d2
    address: str = "[::]:8470"  # where to listen: host:port (port 0 picks one) or unix:PATH
    seed: int = 0  # seeds the network, action sampling and the envs
    logdir: str = ""  # TensorBoard and summary.json; default runs/<env>-<algo>-seed<seed>
    max_frames: int = 0  # stop after this many env frames (0: no limit)
    target_return: float = math.nan  # stop once the mean return over 100 episodes reaches it
    max_envs: int = 1024  # env slots on the learner, over all actors
    max_abs_reward: float = 1e9  # a stream sending a larger reward is closed (INVALID_ARGUMENT)
    check_observation_bounds: bool = True  # a stream sending observations outside the space's bounds is closed
    max_envs_per_stream: int = 256  # envs one actor stream may run (more is refused: INVALID_ARGUMENT)
    stream_idle_s: float = 60.0  # a stream silent this long is closed and its envs freed (DEADLINE_EXCEEDED)
    keepalive_s: float = 20.0  # the server pings idle connections this often; a dead peer's go within 2x
    inference_batch_size: int = 256  # flush a batch once this many envs wait
    inference_timeout_ms: float = 4.0  # ... or once the oldest request waited this long
    queue_unrolls: int = 0  # unrolls buffered for the trainer (0: two training batches)
    progress_interval_s: float = 5.0  # seconds between console progress lines
    exploration_envs: int = 0  # r2d2: N of the Ape-X epsilons over env ids 0..N-1 (0: max_envs)
    checkpoint_interval_s: float = 600.0  # seconds between checkpoints in <logdir>/checkpoints (0: only on stop)
    keep_checkpoints: int = 3  # the newest this many checkpoints are kept
    checkpoint_replay: bool = False  # r2d2: checkpoints hold the replay too (bytes/step x steps stored: GBs on Atari)
    fresh: bool = False  # ignore the logdir's checkpoints and start from scratch (new ones are still written)
    tls_cert: str = ""  # PEM certificate (chain) of the learner: TLS on its port, with --tls-key
    tls_key: str = ""  # PEM private key of --tls-cert
    tls_client_ca: str = ""  # PEM CA: every actor must present a certificate it signed (mTLS)
    token_file: str = ""  # file holding the token every actor must send (else UNAUTHENTICATED)
    insecure: bool = False  # allow plain TCP with no token off loopback (anyone who reaches the port takes part)
    target_from: str = "trusted"  # whose episodes can end a run on --target-return: trusted or any (see README)
    train_devices: int = 0  # devices each learner step is shared over: 0 = every GPU TensorFlow sees (one
    # device without), N: the first N GPUs, or N of TensorFlow's CPU devices on a host without GPUs


def env_config_for(config: LearnerConfig) -> tuple[pb.EnvConfig, int]:
    """What actors must run, read off one probe env made here. Returns (config, frame_skip)."""
    atari = atari_settings(config.env)
    probe = EnvBatch(config.env, 1, atari, num_threads=1)
    try:
        env_config = pb.EnvConfig(
            env_id=config.env,
            seed=config.seed * 1_000_003,
            observation=pb.ObservationSpec(
                dtype=probe.observation_dtype.name, shape=list(probe.observation_shape)
            ),
            num_actions=probe.num_actions,
        )
        if atari is not None:
            env_config.atari.CopyFrom(atari_to_proto(atari))
        return env_config, probe.frame_skip
    finally:
        probe.close()


def compute_device() -> str:
    """The GPU when TensorFlow sees one, else the CPU: inference and training both go there."""
    return "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"


def training_devices(count: int) -> tuple[str, ...]:
    """The devices a learner step is shared over (algorithms/distribute.py): `count` of the
    GPUs TensorFlow sees (0: all of them), or of its CPU devices when it sees no GPU. One
    device comes back as (): the plain step on the compute device, with no strategy."""
    gpus = [device.name for device in tf.config.list_logical_devices("GPU")]
    pool = gpus or [device.name for device in tf.config.list_logical_devices("CPU")]
    wanted = count or len(gpus)
    if wanted < 0 or wanted > len(pool):
        raise UsageError(f"--train-devices {count}: TensorFlow sees {len(pool)} {'GPU' if gpus else 'CPU'} "
                         "device(s)")
    return tuple(pool[:wanted]) if wanted > 1 else ()


def resolve_compute_dtype(requested: str, device: str) -> str:
    """`auto` means bfloat16 on a CPU with AMX bfloat16 units (about twice as fast there), else float32."""
    if requested != "auto":
        return requested
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "float32"
    return "bfloat16" if device.startswith("/CPU") and "amx_bf16" in flags else "float32"


def make_agent(config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig, env_config: pb.EnvConfig,
               device: str, frame_skip: int = 1, train_devices: tuple[str, ...] = ()) -> Agent:
    """The agent of `config.algo` for this env, its torso's arithmetic resolved for `device`,
    training on `train_devices` (one device: ())."""
    network = dataclasses.replace(network, compute_dtype=resolve_compute_dtype(network.compute_dtype, device))
    spec = EnvSpec.from_proto(env_config)
    context = AgentContext(spec.obs_shape, spec.obs_dtype, spec.num_actions, config.seed, config.max_envs,
                           config.exploration_envs, config.max_frames, frame_skip, train_devices)
    return algorithm(config.algo).make_agent(algo_config, network, context)


def run_setup(config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig) -> dict:
    """What a checkpoint records of the run: enough to rebuild the agent (seedfleet eval, export)."""
    setup = {"env": config.env, "algo": config.algo, "network": dataclasses.asdict(network),
             "agent": dataclasses.asdict(algo_config), "learner": dataclasses.asdict(config)}
    return json.loads(json.dumps(setup, default=str))  # tuples become lists, as they read back


async def bounded(step: str, awaitable: Awaitable, timeout_s: float) -> None:
    """Awaits one teardown step for at most `timeout_s`, so a stop never hangs on one part. A
    step that overruns is logged with every task's and thread's stack, cancelled without
    waiting (unlike wait_for, which waits for the cancel to take), and the teardown goes on."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if task in done:
        task.result()  # a failing step fails the teardown as before
        return
    log.error("teardown: %s took over %.0f s; going on without it. Stacks follow.", step, timeout_s)
    for other in asyncio.all_tasks():
        other.print_stack(file=sys.stderr)
    faulthandler.dump_traceback(all_threads=True)
    task.cancel()


def max_message_bytes(spec: EnvSpec, max_envs_per_stream: int) -> int:
    """The largest message the learner takes: a Steps message for the most envs a stream may
    run, twice over, and at least 64 KiB. Anything larger is refused by gRPC itself
    (RESOURCE_EXHAUSTED) before it is read into memory."""
    per_env = int(np.prod(spec.obs_shape)) * spec.obs_dtype.itemsize + 4 + 4 + 4  # observation, id, reward, flags
    return max(64 * 1024, 2 * per_env * max_envs_per_stream)


def keepalive_options(every_s: float) -> list[tuple[str, int]]:
    """The server pings each connection every `every_s` and drops one that does not answer
    within as long again: a frozen or vanished peer's streams end and their envs are freed."""
    ms = int(every_s * 1000)
    return [("grpc.keepalive_time_ms", ms), ("grpc.keepalive_timeout_ms", ms),
            ("grpc.keepalive_permit_without_calls", 1)]


TARGET_FROM = ("trusted", "any")


def secure_server(config: LearnerConfig, options: list[tuple[str, int]]) -> tuple[grpc.aio.Server, int, bool]:
    """The gRPC server on `config.address` with TLS and the token check as configured: (server,
    bound port, whether every peer it admits is credentialed by a token or a client certificate).
    Plaintext with no token off loopback is refused unless `--insecure` (seedfleet/security.py)."""
    if config.target_from not in TARGET_FROM:
        raise UsageError(f"--target-from {config.target_from!r}: choose from {', '.join(TARGET_FROM)}")
    token = read_token(config.token_file)
    credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca)
    require_protection(config.address, credentials is not None, token is not None, config.insecure, "learner")
    with spawned_threads_named("grpc"):  # gRPC's poller
        server = grpc.aio.server(options=options, interceptors=[TokenCheck(token)] if token else None)
    if credentials is None:
        port = server.add_insecure_port(config.address)
    else:
        port = server.add_secure_port(config.address, credentials)
    return server, port, token is not None or bool(config.tls_client_ca)


@dataclass
class Learner:
    """The parts of one learner, wired: gRPC server and health service, batcher and
    inference thread, unroll queue, trainer thread, checkpoints and progress reports."""

    config: LearnerConfig
    logdir: Path
    address: str
    agent: Agent
    metrics: Metrics
    queue: UnrollQueue
    executor: ThreadPoolExecutor
    batcher: DynamicBatcher
    server: grpc.aio.Server
    health: LearnerHealth
    trainer: TrainerThread
    checkpoints: LearnerCheckpoints
    reporter: Reporter

    @classmethod
    async def build(cls, config: LearnerConfig, algo_config: AlgoConfig, network: NetworkConfig,
                    train: bool = True) -> Learner:
        """Wires every part and restores the newest checkpoint (unless `config.fresh`);
        nothing runs yet. With `train` off, sequences are assembled and dropped (the
        bench's serve phase)."""
        logdir = Path(config.logdir or f"runs/{config.env.replace('/', '_')}-{config.algo}-seed{config.seed}")
        logdir.mkdir(parents=True, exist_ok=True)
        env_config, frame_skip = env_config_for(config)
        spec = EnvSpec.from_proto(env_config)
        server, port, credentialed = secure_server(config, [  # before the agent: a refusal comes at once
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", max_message_bytes(spec, config.max_envs_per_stream)),
            *keepalive_options(config.keepalive_s),
        ])
        address = config.address if config.address.startswith("unix:") else f"localhost:{port}"
        with spawned_threads_named("tf"):  # TensorFlow's pools start with its first op
            tf.random.set_seed(config.seed)
            device, train_devices = compute_device(), training_devices(config.train_devices)
            with tf.device(device):
                agent = make_agent(config, algo_config, network, env_config, device, frame_skip, train_devices)
        log.info("%s on %s: obs %s %s, %d actions, device %s, torso %s, training on %s", config.algo, config.env,
                 spec.obs_shape, spec.obs_dtype, spec.num_actions, device,
                 resolve_compute_dtype(network.compute_dtype, device), ", ".join(train_devices) or device)

        metrics = Metrics(frame_skip)
        clock = StageClock()  # CPU by stage of the path below (seedfleet/stage_clock.py)
        queue = UnrollQueue(config.queue_unrolls or 2 * agent.batch_size, agent.batch_size)
        engine = InferenceEngine(agent, EnvSlots.for_agent(config.max_envs, agent, spec, clock), queue, metrics,
                                 device)
        executor = ThreadPoolExecutor(1, thread_name_prefix="inference", initializer=name_this_thread,
                                      initargs=("inference",))
        batcher = DynamicBatcher(engine.process, executor, config.inference_batch_size,
                                 config.inference_timeout_ms / 1000, size_of=len, clock=clock)
        bounds = observation_bounds(config.env) if config.check_observation_bounds else None
        add_to_server(LearnerService(env_config, engine, batcher, executor, config.max_envs, config.max_abs_reward,
                                     config.max_envs_per_stream, config.stream_idle_s, bounds,
                                     trust_every_peer=credentialed or config.target_from == "any", clock=clock),
                      server)
        health = await add_health(server)  # grpc.health.v1: SERVING from start to stop
        if train:
            trainer = algorithm(config.algo).make_trainer(agent, queue, metrics, device, algo_config, config.seed)
        else:
            trainer = OnPolicyTrainer(agent, queue, metrics, device, learn=False)
        trainer.clock = clock
        checkpoints = LearnerCheckpoints(CheckpointStore(logdir / "checkpoints", config.keep_checkpoints), agent,
                                         trainer, metrics, run_setup(config, algo_config, network),
                                         config.checkpoint_replay)
        if not config.fresh:
            checkpoints.restore()
        reporter = Reporter(metrics, logdir, lambda: len(queue), tf.summary.create_file_writer(str(logdir)), clock)
        return cls(config, logdir, address, agent, metrics, queue, executor, batcher, server, health, trainer,
                   checkpoints, reporter)

    async def start(self) -> None:
        self.batcher.start()
        await self.server.start()
        await self.health.serving()
        self.trainer.start()
        log.info("listening on %s, logdir %s", self.address, self.logdir)

    def failure(self) -> tuple[str, BaseException] | None:
        """(stop reason, error) of the trainer's or the inference thread's failure, if either failed."""
        if self.trainer.error is not None:
            return "trainer_failed", self.trainer.error
        if self.batcher.error is not None:
            return "inference_failed", self.batcher.error
        return None

    async def stop(self, last_checkpoint: bool) -> None:
        """Stops every part, each step bounded; `last_checkpoint` (a clean stop, not a
        failure) saves one more checkpoint once training has stopped."""
        loop = asyncio.get_running_loop()
        self.trainer.stopping.set()
        self.queue.close()
        await bounded("health NOT_SERVING", self.health.stopping(), 5.0)
        await bounded("gRPC server stop", self.server.stop(grace=1.0), 5.0)
        await bounded("batcher stop", self.batcher.stop(), 5.0)
        await loop.run_in_executor(None, self.trainer.join, 10.0)
        self.executor.shutdown(wait=False, cancel_futures=True)
        if last_checkpoint:
            await loop.run_in_executor(None, self.checkpoints.save)
        print(self.reporter.report(), flush=True)
