"""Weights & Biases, offline: a run's history against `frames`, its config, and a resumed run
under the same id from the checkpoint's frames, read back from W&B's own files."""

import json
import os
import struct
import subprocess

import pytest
from conftest import seedfleet

from seedfleet.errors import UsageError
from seedfleet.server.config import LearnerConfig
from seedfleet.server.tracking import WANDB_ID_FILE, WandbTracker, episode_aggregates

BLOCK = 32768  # W&B's transaction log: LevelDB's log format in blocks of 32 KiB behind a 7-byte header


def offline_records(path) -> list:
    """Every record of an offline run's `run-<id>.wandb` file, read as W&B's own format is laid out."""
    from wandb.proto import wandb_internal_pb2 as wpb

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, (ident, magic)
    records, parts, pos = [], [], 7
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (kind == 0 and length == 0):  # the block's padding
            pos += left
            continue
        parts.append(data[pos + 7:pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last part of one
            record = wpb.Record()
            record.ParseFromString(b"".join(parts))
            records.append(record)
            parts = []
    return records


def offline_run(logdir):
    """(run id, config, history rows as dicts) of the one offline run W&B wrote under `logdir`."""
    (path,) = (logdir / "wandb").glob("offline-run-*/run-*.wandb")
    records = offline_records(path)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    history = [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    return run.run_id, config, history, path


def _run(logdir, max_frames: int, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.run([*seedfleet("run", "--env", "CartPole-v1", "--max-frames", str(max_frames), "--logdir",
                                      str(logdir), "--progress-interval-s", "1", "--envs-per-actor", "4",
                                      "--wandb-project", "seedfleet-test", "--wandb-group", "suite", *extra)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_a_run_and_its_resumed_stretch_log_to_one_wandb_run_against_frames(tmp_path):
    pytest.importorskip("wandb")
    first = _run(tmp_path, 2000, "--fresh")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    run_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    first_id, config, history, first_file = offline_run(tmp_path)
    assert first_id == run_id
    assert config["env"] == "CartPole-v1" and config["wandb_group"] == "suite" and config["max_frames"] == 2000
    assert config["machine"]["cpu"] and config["machine"]["cores"] >= 1  # the machine record, beside the flags
    assert history and all("frames" in row for row in history)
    frames = [row["frames"] for row in history]
    assert frames == sorted(frames) and frames[-1] >= 2000
    assert any("episode/return_mean" in row and "episode/count" in row for row in history)
    assert any("policy/entropy" in row and "throughput/env_frames_per_s" in row for row in history)
    restored = json.loads((tmp_path / "summary.json").read_text())["frames"]

    first_file.rename(first_file.with_suffix(".first"))  # the second stretch writes an offline run of its own
    for folder in (tmp_path / "wandb").glob("offline-run-*"):
        folder.rename(folder.with_name("done-" + folder.name))
    second = _run(tmp_path, 4000)  # resumes from the checkpoint written at the first stop
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    second_id, config, history, _ = offline_run(tmp_path)
    assert second_id == run_id and config["max_frames"] == 4000
    frames = [row["frames"] for row in history]
    assert frames and frames[0] >= restored and frames[-1] >= 4000  # on from the checkpoint's frames


def test_episodes_that_end_at_one_step_are_all_counted_in_the_interval_aggregate():
    row = episode_aggregates("episode", [10.0, 30.0, 20.0], [5, 15, 10])
    assert row == {"episode/return_mean": 20.0, "episode/return_min": 10.0, "episode/return_max": 30.0,
                   "episode/count": 3.0, "episode/length_mean": 10.0}
    assert episode_aggregates("eval", []) == {}


def test_without_the_flag_no_tracker_and_without_the_package_one_clear_error(tmp_path, monkeypatch):
    assert WandbTracker.start(LearnerConfig(), tmp_path, {}) is None
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'seedfleet\[wandb\]'"):
        WandbTracker.start(LearnerConfig(wandb_project="p"), tmp_path, {})
