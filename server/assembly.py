"""The learner's assembly: its agent, and every part wired to the next.

    actors ==Steps==> LearnerService (here, or in front-end processes) --StepRequest-->
    LocalBackend --> DynamicBatcher --batch-->
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
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from seedfleet.algorithms.agent import Agent, AgentContext
from seedfleet.algorithms.network_config import NetworkConfig
from seedfleet.algorithms.registry import AlgoConfig, Algorithm
from seedfleet.algorithms.trainer import OnPolicyTrainer, TrainerThread
from seedfleet.envs import describe
from seedfleet.errors import UsageError
from seedfleet.machine_cpu import BFLOAT16_CPU_FLAGS, cpu_flags, machine
from seedfleet.server.actor_port import ActorPort, ActorsServer, bounded, port_security
from seedfleet.server.backend import LocalBackend
from seedfleet.server.batcher import DynamicBatcher
from seedfleet.server.checkpoint import CheckpointStore, LearnerCheckpoints
from seedfleet.server.config import LearnerConfig
from seedfleet.server.env_slots import EnvSlots
from seedfleet.server.frontends import FrontEnds
from seedfleet.server.inference import InferenceEngine
from seedfleet.server.metrics import Metrics, Reporter
from seedfleet.server.normalization import make_normalization
from seedfleet.server.progress import RunProgress
from seedfleet.server.run_setup import RunSetup
from seedfleet.server.tracking import WandbTracker
from seedfleet.server.unroll_queue import UnrollQueue
from seedfleet.stage_clock import StageClock
from seedfleet.threads import name_this_thread, spawned_threads_named
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.wire import EnvSpec

log = logging.getLogger("seedfleet.learner")


def env_config_for(config: LearnerConfig) -> tuple[pb.EnvConfig, int]:
    """What actors must run (the env family's description, read off one probe env made
    here), and frames per env step."""
    return describe(config.env, config.seed * 1_000_003, config.env_options)


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


def resolve_compute_dtype(requested: str, device: str, flags: set[str] | None = None) -> str:
    """`auto` means bfloat16 on a CPU with bfloat16 units (AMX, or AVX-512 BF16 as on AMD's Zen 4),
    else float32. Through oneDNN one APPO step on Atari frames is 2 to 2.6x as fast there as
    float32 (BENCHMARKS.md). `flags`: the CPU's (default: this machine's)."""
    if requested != "auto":
        return requested
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if device.startswith("/CPU") and any(f in flags for f in BFLOAT16_CPU_FLAGS) else "float32"


def resolve_network(network: NetworkConfig, device: str, flags: set[str] | None = None) -> NetworkConfig:
    """The network's arithmetic for `device`. `--compute-dtype auto` takes the fastest path
    measured: on a CPU with bfloat16 units, bfloat16 through TensorFlow's oneDNN kernels and
    no XLA (XLA's CPU convolutions use neither AMX nor AVX-512 BF16: one APPO learner step on
    Atari frames took 2.2x as long compiled, BENCHMARKS.md); elsewhere float32, with
    `--jit-compile` as given. `flags`: the CPU's (default: this machine's).
    An explicit `--compute-dtype` keeps `--jit-compile` as given."""
    dtype = resolve_compute_dtype(network.compute_dtype, device, flags)
    onednn_bfloat16 = network.compute_dtype == "auto" and dtype == "bfloat16"
    return dataclasses.replace(network, compute_dtype=dtype, jit_compile=network.jit_compile and not onednn_bfloat16)


def acted_spec(config: LearnerConfig, spec: EnvSpec) -> EnvSpec:
    """The env as the agent acts on it: normalised observations are float32 (server/normalization.py)."""
    return dataclasses.replace(spec, obs_dtype=np.dtype(np.float32)) if config.normalize_observations else spec


def make_agent(config: LearnerConfig, algo: Algorithm, algo_config: AlgoConfig, network: NetworkConfig,
               env_config: pb.EnvConfig, device: str, frame_skip: int = 1, train_devices: tuple[str, ...] = (),
               launched_envs: int = 0) -> Agent:
    """The agent of `algo` for this env, its torso's arithmetic resolved for `device`,
    training on `train_devices` (one device: ()); `launched_envs`: the training envs a
    launcher starts beside the learner (0: not known)."""
    network = resolve_network(network, device)
    spec = acted_spec(config, EnvSpec.from_proto(env_config))
    context = AgentContext(spec.obs_shape, spec.obs_dtype, spec.actions, config.seed, config.max_envs,
                           launched_envs, config.max_frames, frame_skip, train_devices)
    return algo.make_agent(algo_config, network, context)


@dataclass
class Learner:
    """The parts of one learner, wired: gRPC server and health service, batcher and
    inference thread, unroll queue, trainer thread, checkpoints and progress reports."""

    config: LearnerConfig
    logdir: Path
    agent: Agent
    metrics: Metrics
    queue: UnrollQueue
    executor: ThreadPoolExecutor
    batcher: DynamicBatcher
    actor_port: ActorsServer  # the actors' gRPC server here, or the front-end processes serving it
    trainer: TrainerThread
    checkpoints: LearnerCheckpoints
    reporter: Reporter
    tracker: WandbTracker | None  # Weights & Biases beside TensorBoard, with --wandb-project

    @classmethod
    async def build(cls, config: LearnerConfig, algo: Algorithm, algo_config: AlgoConfig, network: NetworkConfig,
                    train: bool = True, launched_envs: int = 0, flags: dict | None = None) -> Learner:
        """Wires every part and restores the newest checkpoint (unless `config.fresh`);
        nothing runs yet. With `train` off, sequences are assembled and dropped (the
        bench's serve phase). `flags`: the run's resolved flags, a tracker's config."""
        logdir = config.log_dir()
        logdir.mkdir(parents=True, exist_ok=True)
        env_config, frame_skip = env_config_for(config)
        spec = EnvSpec.from_proto(env_config)
        algo.check_actions(config.env, spec.actions)
        config.check()
        normalization = make_normalization(config.normalize_observations, config.scale_rewards, config.env,
                                           spec.obs_shape, spec.obs_dtype, config.max_envs, algo_config.discount)
        if config.frontends:  # before the agent: a refusal comes at once
            port_security(config)
        else:
            actor_port = ActorPort.bind(config, spec)
        with spawned_threads_named("tf"):  # TensorFlow's pools start with its first op
            tf.random.set_seed(config.seed)
            device, train_devices = compute_device(), training_devices(config.train_devices)
            with tf.device(device):
                agent = make_agent(config, algo, algo_config, network, env_config, device, frame_skip,
                                   train_devices, launched_envs)
        resolved = resolve_network(network, device)
        log.info("%s on %s: obs %s %s, %s, device %s, torso %s%s, training on %s", config.algo, config.env,
                 spec.obs_shape, spec.obs_dtype, spec.actions.describe(), device, resolved.compute_dtype,
                 "" if resolved.jit_compile else " (no XLA)", ", ".join(train_devices) or device)

        metrics = Metrics(frame_skip)
        clock = StageClock()  # CPU by stage of the path below (seedfleet/stage_clock.py)
        queue = UnrollQueue(config.queue_unrolls or 2 * agent.batch_size, agent.batch_size, config.sync_acting)
        engine = InferenceEngine(agent, EnvSlots.for_agent(config.max_envs, agent, acted_spec(config, spec), clock),
                                 queue, metrics, device, normalization)
        executor = ThreadPoolExecutor(1, thread_name_prefix="inference", initializer=name_this_thread,
                                      initargs=("inference",))
        batcher = DynamicBatcher(engine.process, executor, config.inference_batch_size,
                                 config.inference_timeout_ms / 1000, size_of=len, clock=clock)
        backend = LocalBackend(engine.reset, batcher, executor, config.max_envs)
        if config.frontends:
            actor_port = FrontEnds(config, env_config, backend, config.frontends, clock)
        else:
            await actor_port.serve(config, env_config, backend, clock)
        if train:
            trainer = algo.make_trainer(agent, queue, metrics, device, algo_config, config.seed, clock)
        else:
            trainer = OnPolicyTrainer(agent, queue, metrics, device, clock, learn=False)
        checkpoints = LearnerCheckpoints(CheckpointStore(logdir / "checkpoints", config.keep_checkpoints), agent,
                                         trainer, metrics, RunSetup.of(config, algo_config, network), normalization)
        if not config.fresh:
            checkpoints.restore()
        tracker = WandbTracker.start(config, logdir, {**(flags or {}), "machine": machine()})
        reporter = Reporter(metrics, logdir, lambda: len(queue), tf.summary.create_file_writer(str(logdir)), clock,
                            trainer, actor_port.cpu, RunProgress(config.max_frames, config.target_return), tracker)
        return cls(config, logdir, agent, metrics, queue, executor, batcher, actor_port, trainer,
                   checkpoints, reporter, tracker)

    @property
    def address(self) -> str:
        """Where actors on this host reach the learner (its port is known once bound)."""
        if self.config.address.startswith("unix:"):
            return self.config.address
        return f"localhost:{self.actor_port.port}"

    async def start(self) -> None:
        self.batcher.start()
        await self.actor_port.start()
        self.trainer.start()
        log.info("listening on %s, logdir %s", self.address, self.logdir)

    def failure(self) -> tuple[str, BaseException] | None:
        """(stop reason, error) of the trainer's or the inference thread's failure, if either failed."""
        if self.trainer.error is not None:
            return "trainer_failed", self.trainer.error
        if self.batcher.error is not None:
            return "inference_failed", self.batcher.error
        return None

    async def stop(self, reason: str | None, last_checkpoint: bool) -> None:
        """Stops every part, each step bounded; actors' streams end with `reason` (None:
        cancelled, for a failure); `last_checkpoint` (a clean stop, not a failure) saves
        one more checkpoint once training has stopped."""
        loop = asyncio.get_running_loop()
        self.trainer.stopping.set()
        self.queue.close()
        await bounded("actors' port stop", self.actor_port.stop(reason), 15.0)
        await bounded("batcher stop", self.batcher.stop(), 5.0)
        await loop.run_in_executor(None, self.trainer.join, 10.0)
        self.executor.shutdown(wait=False, cancel_futures=True)
        if last_checkpoint:
            await loop.run_in_executor(None, self.checkpoints.save)
        print(self.reporter.report(), flush=True)
        if self.tracker is not None:
            await loop.run_in_executor(None, self.tracker.finish)
