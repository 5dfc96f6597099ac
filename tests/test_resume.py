"""A learner killed mid-training resumes from its newest checkpoint; its actors come back by
themselves; counters continue; SIGTERM writes a last checkpoint and exits 0 quickly."""

import json
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from conftest import R2D2_SMALL, Proc, seedfleet, start_learner

from seedfleet.deploy import fleet_check
from seedfleet.machine_cpu import machine, read_machine
from seedfleet.server.checkpoint import CheckpointStore
from seedfleet.settings import CONFIG_FILE, read_config


def _all_checkpoints_read_back(directory) -> list[dict]:
    """Every checkpoint left in `directory` has its files whole and its tensors' checksums right."""
    states = []
    for path in CheckpointStore(directory).complete():
        state = json.loads((path / "state.json").read_text())
        for name, size in state["files"].items():
            assert (path / name).stat().st_size == size, (path, name)
        reader = tf.train.load_checkpoint(str(path / "variables"))
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)  # raises on a checksum mismatch
        states.append(state)
    return states


def _wait_for_frames_above(learner: Proc, frames: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = [int(m.group(1).replace(",", "")) for line in list(learner.lines)
                if (m := re.match(r"frames ([\d,]+)", line))]
        if seen and max(seen) > frames:
            return
        time.sleep(0.2)
    raise AssertionError(f"frames did not pass {frames}:\n{learner.output()[-3000:]}")


@pytest.mark.parametrize("algo_args", [["--algo", "vtrace"], ["--algo", "r2d2", "--checkpoint-replay", *R2D2_SMALL]],
                         ids=["vtrace", "r2d2"])
def test_a_killed_learner_resumes_from_its_newest_checkpoint(procs, tmp_path, algo_args):
    args = ["--env", "CartPole-v1", *algo_args, "--logdir", str(tmp_path), "--checkpoint-interval-s", "1"]
    learner, address = start_learner(*args)
    procs.append(learner)
    actors = [Proc(seedfleet("actor", "--learner", address, "--envs", "4", "--reconnect-max-s", "0.5"))
              for _ in range(2)]
    procs.extend(actors)
    learner.wait_for(r"learner steps [1-9]", timeout=120)
    mark = len(learner.lines)
    learner.wait_for(r"saved ckpt-", start=mark, timeout=30)  # one saved after training began
    learner.stop(signal.SIGKILL)

    saved = CheckpointStore(tmp_path / "checkpoints").complete()[0]
    state = json.loads((saved / "state.json").read_text())
    assert state["metrics"]["learner_steps"] > 0 and state["metrics"]["env_steps"] > 0

    again = Proc(seedfleet("learner", "--address", address, "--progress-interval-s", "1", *args))
    procs.append(again)
    restored = again.wait_for(r"restored (ckpt-\S+): (\d+) frames, (\d+) learner steps(.*)", timeout=120)
    assert restored.group(1) == saved.name
    restores = [m.group(2) for m in map(fleet_check.RESTORED.search, again.lines) if m]
    assert restores == [restored.group(2)]  # the line `make fleet-check` reads
    assert int(restored.group(2)) == state["metrics"]["env_steps"]  # CartPole: a frame per step
    if "r2d2" in algo_args:
        assert re.search(r"replay of [1-9]", restored.group(4))
    frames_at_restore = int(restored.group(2))
    _wait_for_frames_above(again, frames_at_restore)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
            sum("connected to" in line for line in actor.lines) < 2 for actor in actors):
        time.sleep(0.2)
    for actor in actors:
        assert actor.popen.poll() is None
        assert sum("connected to" in line for line in actor.lines) == 2, actor.output()[-2000:]

    again.popen.send_signal(signal.SIGTERM)
    # A clean exit, not a time: each stop step is bounded in the learner (port 15 s, batcher
    # 5 s, trainer join 10 s) and the last checkpoint holds the replay; a loaded machine took
    # over 10 s. A stop that hangs still fails here.
    assert again.popen.wait(timeout=60) == 0, again.output()[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] > frames_at_restore
    # config.json: a stretch per start, the resumed one from the frames restored, each
    # holding every flag as `--print-config` resolves the same command
    first, resumed = read_config(tmp_path)
    assert (first["from_frames"], resumed["from_frames"]) == (0, frames_at_restore)
    assert first["flags"]["checkpoint_interval_s"] == 1.0 and first["flags"]["algo"] == algo_args[1]
    printed = subprocess.run([*seedfleet("learner", "--address", address, "--progress-interval-s", "1", *args),
                              "--print-config"], capture_output=True, text=True, check=True)
    assert resumed["flags"] == json.loads(printed.stdout)
    # machine.json: the same stretches, each naming this machine's CPU, cores and the code's commit
    machines = read_machine(tmp_path)
    assert [m["from_frames"] for m in machines] == [0, frames_at_restore]
    assert machines[1]["cpu"] == machine()["cpu"] and machines[1]["cores"] >= 1 and "flags" in machines[1]
    assert machines[1]["commit"] == machine()["commit"]
    states = _all_checkpoints_read_back(tmp_path / "checkpoints")
    assert states[0]["metrics"]["env_steps"] >= summary["env_steps"]  # the last one was saved at the stop
    assert states[0]["metrics"]["learner_steps"] >= state["metrics"]["learner_steps"]


def test_checkpoints_of_another_env_stop_the_learner_with_a_clear_error(tmp_path):
    """`seedfleet learner` and `seedfleet run` refuse such a log dir before TensorFlow loads, as
    the restore would after; a damaged newest checkpoint is passed over as the restore passes it
    (here: the older one is CartPole's). --fresh starts anyway."""
    from test_cli import AT_EXIT
    from test_eval_export import _checkpoint

    _checkpoint(tmp_path, "vtrace")  # CartPole
    damaged = tmp_path / "checkpoints" / "ckpt-99999999999999-f5"
    damaged.mkdir()
    (damaged / "state.json").write_text("{")
    for command in (["learner", "--address", "127.0.0.1:0"], ["run", "--actors", "1"]):
        out = subprocess.run([sys.executable, "-c", AT_EXIT, *command, "--env", "Acrobot-v1",
                              "--logdir", str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr[-2000:]
        assert "written for env CartPole-v1, this learner runs Acrobot-v1: pass --fresh" in out.stderr
        assert out.stderr.splitlines()[-1] == "tensorflow loaded: False", out.stderr[-2000:]
    fresh = Proc(seedfleet("learner", "--env", "Acrobot-v1", "--address", "127.0.0.1:0", "--logdir", str(tmp_path),
                           "--fresh", "--max-frames", "1"))
    fresh.wait_for("listening on", timeout=120)
    assert fresh.stop() == 0


def test_a_config_record_that_cannot_be_written_is_said_and_the_learner_serves_on(procs, tmp_path):
    """config.json in the way (here a directory, as a full disk would fail the write): the
    learner logs why and serves; no half-written record is left beside it."""
    (tmp_path / CONFIG_FILE).mkdir()
    learner, address = start_learner("--env", "CartPole-v1", "--logdir", str(tmp_path))
    procs.append(learner)
    assert any("config.json or machine.json not written" in line for line in learner.lines), learner.output()[-2000:]
    assert not list(tmp_path.glob("*.tmp"))
    actor = Proc(seedfleet("actor", "--learner", address, "--envs", "2"))
    procs.append(actor)
    learner.wait_for(r"frames [1-9]", timeout=60)
