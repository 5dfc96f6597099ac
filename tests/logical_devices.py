"""Runs with this machine's CPU split into two logical TensorFlow devices, which must be set
before TensorFlow first lists its devices, hence a process of its own:

  python tests/logical_devices.py cli ARGS...   `seedfleet ARGS...` (deploy.cli) on 2 CPU devices
  python tests/logical_devices.py agents        one learner step on 2 devices against the same step
                                                on 1, and checkpoints written on one restored on the
                                                other, for IMPALA and R2D2, the error of a batch
                                                that does not split over the two, SAC's step, and
                                                the CLI's error for more devices than there are;
                                                exits non-zero on a mismatch
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from seedfleet.server.native_logs import import_tensorflow_quietly

tf = import_tensorflow_quietly()  # before the CLI would: its console stays as quiet as `seedfleet`'s
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def split_cpu(count: int) -> tuple[str, ...]:
    [cpu] = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    return tuple(device.name for device in tf.config.list_logical_devices("CPU"))


def variables(agent) -> list[np.ndarray]:
    """Every checkpointed value (networks, optimizer slots, step counters), as arrays."""
    found = []
    for module in agent.checkpointed().values():
        if isinstance(module, tf.Variable):
            found.append(module.numpy())
        else:
            found.extend(np.asarray(v) for v in getattr(module, "variables", ()))
    return found


def assert_same(a, b, what: str, atol: float = 0.0) -> None:
    va, vb = variables(a), variables(b)
    assert len(va) == len(vb), (what, len(va), len(vb))
    for x, y in zip(va, vb, strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=atol, err_msg=what)


def check_agents(devices: tuple[str, ...]) -> None:
    from test_impala import make_batch

    from seedfleet.actions import ActionSpec
    from seedfleet.algorithms.agent import AgentContext
    from seedfleet.algorithms.impala.agent import ImpalaAgent
    from seedfleet.algorithms.impala.config import ImpalaConfig
    from seedfleet.algorithms.network_config import NetworkConfig
    from seedfleet.algorithms.r2d2.agent import R2D2Agent
    from seedfleet.algorithms.r2d2.config import R2D2Config
    from seedfleet.errors import UsageError

    # The equality is of the sharded math against the unsharded; XLA's compile of the one-device
    # step (the learner's default) is run by every learner test, and here cost 21 s of CPU.
    network = NetworkConfig(jit_compile=False, lstm_size=8)
    two_actions = ActionSpec.discrete(2)
    makers = {
        "vtrace": lambda d: ImpalaAgent(ImpalaConfig(unroll_length=6, batch_size=4), network,
                                        AgentContext((3,), np.dtype(np.float32), two_actions, seed=0, train_devices=d)),
        # pi_prox's and V_0's forward pass is sharded and put back in order; the normalised value's
        # statistics and PopArt's rescale of the head are written to every device's copy
        "appo-proximal": lambda d: ImpalaAgent(
            ImpalaConfig(unroll_length=6, batch_size=4, epochs=2, minibatches=2, clip_ratio=0.1, proximal_clip=True,
                         fixed_targets=True, normalize_values=True, value_normalization_rate=0.5),
            network, AgentContext((3,), np.dtype(np.float32), two_actions, seed=0, train_devices=d)),
        "appo-shuffled": lambda d: ImpalaAgent(  # the targets' pass and the transitions' minibatches are sharded
            ImpalaConfig(unroll_length=6, batch_size=4, epochs=2, minibatches=2, clip_ratio=0.1,
                         shuffle_transitions=True),
            NetworkConfig(jit_compile=False),
            AgentContext((3,), np.dtype(np.float32), two_actions, seed=0, train_devices=d)),
        "r2d2": lambda d: R2D2Agent(R2D2Config(burn_in=2, unroll_length=4, batch_size=4, n_step=2), network,
                                    AgentContext((3,), np.dtype(np.float32), two_actions, seed=0, train_devices=d)),
    }
    for name, make in makers.items():
        one, two = make(()), make(devices)
        assert two.devices.replicas == 2 and one.devices.replicas == 1
        assert_same(one, two, f"{name}: the same initial variables")
        rng = np.random.default_rng(3)
        for step in range(3):
            batch = make_batch(rng, T=6)
            batch = batch._replace(state=one.initial_state(4), extras={
                k: rng.normal(size=(4, 7, *shape)).astype(dtype) for k, (shape, dtype) in one.extras_spec.items()})
            shards = two.devices.strategy.experimental_local_results(two.devices.shard(batch))
            assert [s.action.shape[0] for s in shards] == [2, 2]  # each device trains on its half
            np.testing.assert_array_equal(np.concatenate([s.observation for s in shards]), batch.observation)
            out_one, out_two = one.learn(batch), two.learn(batch)
            for key in ("loss/total", "grad_norm"):
                np.testing.assert_allclose(float(out_one[key]), float(out_two[key]), rtol=1e-4,
                                           err_msg=f"{name} step {step}: {key}")
            if name == "r2d2":  # one priority per sequence, in the batch's order
                np.testing.assert_allclose(out_one["priorities"], out_two["priorities"], rtol=1e-4)
            assert_same(one, two, f"{name}: after learner step {step}", atol=1e-5)
        with tempfile.TemporaryDirectory() as directory:
            for source, target_devices in ((two, ()), (one, devices)):
                path = tf.train.Checkpoint(**source.checkpointed()).write(f"{directory}/{name}")
                target = make(target_devices)
                tf.train.Checkpoint(**target.checkpointed()).read(path).assert_existing_objects_matched()
                assert_same(source, target, f"{name}: restored on {len(target_devices) or 1} device(s)")
                obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
                args = (obs, np.zeros(5, np.float32), np.ones(5, bool), np.arange(5, dtype=np.int32),
                        target.initial_state(5))
                np.testing.assert_allclose(source.policy(*args)[1], target.policy(*args)[1], rtol=1e-5)
        print(f"{name}: 3 learner steps on 2 devices equal those on 1; checkpoints restore both ways", flush=True)
    try:  # a batch that does not split over the devices is refused when the agent is built
        ImpalaAgent(ImpalaConfig(batch_size=15), network,
                    AgentContext((3,), np.dtype(np.float32), two_actions, train_devices=devices))
    except UsageError as error:  # the CLI prints it as one line, as test_multi_device checks
        print(f"uneven batch: {error}", flush=True)
    else:
        raise AssertionError("a batch of 15 was shared over 2 devices")
    check_sac(devices)
    print(f"keras loaded: {any(name.split('.')[0] == 'keras' for name in sys.modules)}", flush=True)
    check_too_many_devices()


def check_too_many_devices() -> None:
    """`seedfleet learner --train-devices 3` where TensorFlow sees 2: the CLI's one line and its
    exit code, printed for test_multi_device (in this process, which saves a TensorFlow start)."""
    import contextlib
    import io

    from seedfleet.deploy.cli import main

    stderr = io.StringIO()
    with tempfile.TemporaryDirectory() as logdir, contextlib.redirect_stderr(stderr):
        code = main(["learner", "--address", "127.0.0.1:0", "--logdir", logdir, "--train-devices", "3"])
    print(f"three devices: exit {code}: {stderr.getvalue().strip()}", flush=True)


def check_sac(devices: tuple[str, ...]) -> None:
    """SAC's step (critics, actor, temperature, Polyak) on two devices equals the step on one."""
    from test_sac import transitions

    from seedfleet.actions import ActionSpec
    from seedfleet.algorithms.agent import AgentContext
    from seedfleet.algorithms.network_config import NetworkConfig
    from seedfleet.algorithms.sac.agent import SACAgent
    from seedfleet.algorithms.sac.config import SACConfig

    def make(d):
        return SACAgent(SACConfig(batch_size=8, updates_per_call=2),
                        NetworkConfig(mlp_sizes=(16, 16), jit_compile=False),
                        AgentContext((3,), np.dtype(np.float32), ActionSpec.box((1,), [-2.0], [2.0]), train_devices=d))

    one, two = make(()), make(devices)
    assert_same(one, two, "sac: the same initial variables")
    rng = np.random.default_rng(5)
    for step in range(3):
        batch = transitions(rng, 16)  # two updates of 8 per learner step
        out_one, out_two = one.learn(batch), two.learn(batch)
        for key in ("loss/critic", "loss/actor", "grad_norm/critic"):
            np.testing.assert_allclose(float(out_one[key]), float(out_two[key]), rtol=1e-4,
                                       err_msg=f"sac {step}: {key}")
        assert_same(one, two, f"sac: after learner step {step}", atol=1e-5)
    print("sac: 3 learner steps on 2 devices equal those on 1", flush=True)


if __name__ == "__main__":
    split = split_cpu(2)
    if sys.argv[1] == "cli":
        from seedfleet.deploy.cli import main

        sys.exit(main(sys.argv[2:]))
    check_agents(split)
