"""Checkpoint files: atomic saves, pruning, damaged ones skipped, setups that do not match."""

import errno
import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from seedfleet.algorithms.r2d2.replay import PrioritizedReplay
from seedfleet.server.checkpoint import CheckpointStore, LearnerCheckpoints, newest_checkpoint
from seedfleet.server.metrics import Metrics
from seedfleet.server.run_setup import CheckpointMismatch, RunSetup


class Weights(tf.Module):
    def __init__(self, value: float):
        super().__init__()
        self.w = tf.Variable(tf.fill([4, 3], value))
        self.step = tf.Variable(0, dtype=tf.int64)


def _saved(store: CheckpointStore, value: float, frames: int, arrays=None):
    return store.save({"model": Weights(value)}, {"value": value}, frames, arrays)


def _restore_value(store: CheckpointStore) -> tuple[float, dict]:
    target = Weights(-1.0)
    restored = store.restore_latest({"model": target}, check=lambda state: None)
    assert restored is not None
    return float(target.w[0, 0]), restored.state


def test_the_newest_k_are_kept_and_the_newest_is_restored(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for i in range(4):
        _saved(store, float(i), frames=100 * i)
    assert len(store.complete()) == 2
    value, state = _restore_value(store)
    assert value == 3.0 and state["value"] == 3.0
    assert newest_checkpoint(tmp_path) == store.complete()[0]


def test_a_damaged_checkpoint_is_skipped_with_a_warning(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    _saved(store, 1.0, 10)
    newest = _saved(store, 2.0, 20)
    data = next(newest.glob("variables.data-*"))
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, one flipped byte: the checksum must catch it
    data.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="seedfleet.checkpoint"):
        value, _ = _restore_value(store)
    assert value == 1.0
    assert "skipping checkpoint" in caplog.text and newest.name in caplog.text

    data.write_bytes(bytes(raw[:100]))  # truncated
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seedfleet.checkpoint"):
        assert _restore_value(store)[0] == 1.0
    assert "bytes" in caplog.text


def test_an_interrupted_save_leaves_nothing_and_the_next_start_cleans_up(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=3)
    _saved(store, 1.0, 10)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(OSError, match="No space"):
        _saved(store, 2.0, 20, arrays={"x": np.zeros(3)})
    monkeypatch.undo()
    assert len(store.complete()) == 1 and not list(tmp_path.glob(".tmp-*"))

    (tmp_path / ".tmp-ckpt-killed-mid-write").mkdir()  # as a SIGKILL during a save leaves it
    assert _restore_value(store)[0] == 1.0
    assert not list(tmp_path.glob(".tmp-*"))


def test_replay_arrays_round_trip(tmp_path):
    """A replay's checkpoint holds its filled slots and restores into its whole capacity."""
    replay = PrioritizedReplay(8, seed=0)
    items = {"observation": np.arange(5 * 3, dtype=np.uint8).reshape(5, 3),
             "state": {"lstm_h": np.ones((5, 2), np.float32)}}
    replay.add(items, np.arange(1, 6, dtype=np.float64))
    store = CheckpointStore(tmp_path)
    path = _saved(store, 1.0, 5, arrays=replay.to_arrays())
    restored = store.restore_latest({"model": Weights(0.0)}, check=lambda state: None)
    assert restored.path == path
    again = PrioritizedReplay(8, seed=0)
    again.load_arrays(restored.arrays)
    assert len(again) == 5 and again.next_index == replay.next_index
    assert len(restored.arrays["items/observation"]) == 5  # the filled slots only, not the capacity
    assert again.storage["observation"].shape == (8, 3)  # ... restored into a store of the whole capacity
    np.testing.assert_array_equal(again.storage["observation"], replay.storage["observation"])
    np.testing.assert_array_equal(again.storage["state"]["lstm_h"], replay.storage["state"]["lstm_h"])
    np.testing.assert_array_equal(again.tree.nodes, replay.tree.nodes)
    with pytest.raises(ValueError, match="holds 8 sequences"):
        PrioritizedReplay(16).load_arrays(restored.arrays)


class _Agent:
    def __init__(self, value: float):
        self.model = Weights(value)

    def checkpointed(self):
        return {"model": self.model}


class _Trainer:
    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def state(self):
        return None


def _setup(env: str, compute_dtype: str = "float32", jit_compile: bool = True) -> RunSetup:
    return RunSetup(env, "vtrace", {"torso": "auto", "compute_dtype": compute_dtype, "jit_compile": jit_compile},
                    {}, {})


def test_learner_checkpoints_carry_the_counters_and_refuse_another_setup(tmp_path):
    metrics = Metrics(frame_skip=4)
    metrics.add_inference(10, 0, np.array([3.0]), np.array([7]), np.array([False]))
    store = CheckpointStore(tmp_path)
    saver = LearnerCheckpoints(store, _Agent(5.0), _Trainer(), metrics, _setup("Pong"))
    path = saver.save()
    assert json.loads((path / "state.json").read_text())["metrics"]["env_steps"] == 10

    resumed = Metrics(frame_skip=4)
    agent = _Agent(0.0)
    other_dtype = _setup("Pong", "bfloat16", jit_compile=False)
    assert LearnerCheckpoints(store, agent, _Trainer(), resumed, other_dtype).restore() is not None
    assert float(agent.model.w[0, 0]) == 5.0
    assert resumed.frames == 40 and resumed.episodes == 1 and resumed.mean_return() == 3.0

    with pytest.raises(CheckpointMismatch, match="--fresh"):
        LearnerCheckpoints(store, _Agent(0.0), _Trainer(), Metrics(4), _setup("Breakout")).restore()


def test_a_network_field_added_since_the_checkpoint_reads_as_its_default():
    """A checkpoint written before a network setting existed restores into a run that leaves it at
    its default (as `seedfleet run --resume` after an upgrade), and is refused by one that sets it."""
    import dataclasses

    from seedfleet.algorithms.network_config import NetworkConfig

    network = json.loads(json.dumps(dataclasses.asdict(NetworkConfig(torso="impala_shallow", layer_norm=True))))
    older = RunSetup("Pong", "appo", {k: v for k, v in network.items() if k != "feature_norm"}, {}, {})
    assert RunSetup("Pong", "appo", network, {}, {}).mismatch(older) is None
    assert "feature_norm" in RunSetup("Pong", "appo", {**network, "feature_norm": True}, {}, {}).mismatch(older)


def test_a_checkpoint_is_refused_by_a_run_that_turns_value_normalisation_on_or_off():
    """A PopArt head outputs the standardised value, a plain head the value itself: the same
    weights mean another value function, so neither direction restores silently. A checkpoint
    of an algorithm without the setting reads as off."""
    network = {"torso": "auto"}
    plain = RunSetup("Pong", "appo", network, {"normalize_values": False}, {})
    popart = RunSetup("Pong", "appo", network, {"normalize_values": True}, {})
    assert popart.mismatch(plain) == "were written with normalize_values False, this learner runs True"
    assert plain.mismatch(popart) == "were written with normalize_values True, this learner runs False"
    assert popart.mismatch(RunSetup("Pong", "appo", network, {"normalize_values": True, "baseline_cost": 1.0},
                                    {})) is None
    assert plain.mismatch(RunSetup("Pong", "r2d2", network, {}, {})) is not None  # the algo differs
    assert RunSetup("Pong", "appo", network, {}, {}).mismatch(plain) is None


def test_a_checkpoint_written_before_families_and_trainer_state_still_restores(tmp_path, caplog):
    """One written by the layout before: R2D2's replay in `replay.npz`, and the learner's
    settings still holding `exploration_envs` and `checkpoint_replay` (now R2D2's). The trainer
    gets its arrays back, and the setup rebuilds configs without the moved keys, saying so."""
    from seedfleet.algorithms.r2d2.config import R2D2Config
    from seedfleet.server.checkpoint import read_setup
    from seedfleet.server.config import LearnerConfig

    learner = {"env": "CartPole-v1", "algo": "r2d2", "seed": 3, "exploration_envs": 64, "checkpoint_replay": True}
    setup = {"env": "CartPole-v1", "algo": "r2d2", "network": {"torso": "auto", "mlp_sizes": [64, 64]},
             "agent": {"burn_in": 10, "n_step": 3}, "learner": learner}
    store = CheckpointStore(tmp_path)
    path = store.save({"model": Weights(2.0)}, {"setup": setup, "metrics": Metrics(1).state()}, 0,
                      {"items/reward": np.arange(6.0), "trainer/inserted": np.asarray(6)})
    (path / "trainer.npz").rename(path / "replay.npz")
    state = json.loads((path / "state.json").read_text())
    state["files"]["replay.npz"] = state["files"].pop("trainer.npz")
    (path / "state.json").write_text(json.dumps(state))

    class Trainer:
        lock = None
        restored = None

        def restore(self, arrays):
            Trainer.restored = arrays
            return f"replay of {len(arrays['items/reward'])} sequences"

    this_run = RunSetup("CartPole-v1", "r2d2", {"torso": "auto", "mlp_sizes": [64, 64]}, {}, {})
    with caplog.at_level(logging.INFO, logger="seedfleet.checkpoint"):
        assert LearnerCheckpoints(store, _Agent(0.0), Trainer(), Metrics(1), this_run).restore() is not None
    assert list(Trainer.restored["items/reward"]) == list(np.arange(6.0))
    assert "replay of 6 sequences" in caplog.text
    config, algo, agent, network = read_setup(path).configs()
    assert algo.name == "r2d2" and algo.config_class is R2D2Config
    assert isinstance(config, LearnerConfig) and config.seed == 3 and not hasattr(config, "exploration_envs")
    assert agent == R2D2Config(burn_in=10, n_step=3) and network.mlp_sizes == (64, 64)
    assert "exploration_envs" in caplog.text and "checkpoint_replay" in caplog.text  # dropped, with a warning
