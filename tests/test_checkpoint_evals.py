"""bench/checkpoint_evals.py: each checkpoint's policy played once, in its own row."""

import os
import threading

import numpy as np
import pytest
from test_eval_export import _checkpoint

from seedfleet.bench import learn
from seedfleet.bench.checkpoint_evals import EvalSettings, evaluate_new, main, watch
from seedfleet.bench.plot import read_evals
from seedfleet.errors import UsageError
from seedfleet.server.checkpoint import saved_frames
from seedfleet.server.config import EvalConfig
from seedfleet.server.evaluate import play
from seedfleet.server.saved_policy import load_policy


def _renamed(path, millis: int, frames: int):
    """A checkpoint renamed as the learner would have named it at `frames`, written at `millis`."""
    target = path.with_name(f"ckpt-{millis}-f{frames}")
    path.rename(target)
    return target


def test_each_checkpoint_is_played_once_oldest_first_and_kept_with_the_curve(tmp_path):
    """Two checkpoints give two rows, oldest first, frames from their names, each the return its
    own policy plays with the same settings (told apart: one plays CartPole, the other Acrobot); a
    second pass adds nothing, a new checkpoint one row. The learning bench keeps the file with the
    curve."""
    logdir = tmp_path / "runs" / "cartpole" / "seed0"
    _, still = _checkpoint(logdir, "vtrace", scale=None)  # zero weights: one action always
    still = _renamed(still, 1000, 40_000)
    _, moved = _checkpoint(logdir, "vtrace", env="Acrobot-v1", scale=None)  # another env: another return
    moved = _renamed(moved, 2000, 80_000)
    settings = EvalSettings(episodes=4, epsilon=0.0, seed=3)

    rows = evaluate_new(logdir, settings)
    assert [int(row["frames"]) for row in rows] == [40_000, 80_000]
    assert [row["checkpoint"] for row in rows] == [still.name, moved.name]
    for row, checkpoint in zip(rows, (still, moved), strict=True):
        returns, _ = play(load_policy(str(checkpoint)), EvalConfig(episodes=4, envs=4, epsilon=0.0, seed=3))
        assert float(row["mean_return"]) == pytest.approx(returns.mean(), abs=0.01)
        assert int(row["episodes"]) == 4
    assert rows[0]["mean_return"] != rows[1]["mean_return"]  # two policies, told apart
    assert read_evals(logdir) == [{k: str(v) for k, v in row.items()} for row in rows]

    assert evaluate_new(logdir, settings) == []
    _, later = _checkpoint(logdir, "vtrace", scale=1.0)
    later = _renamed(later, 3000, 120_000)
    assert main([str(logdir), "--episodes", "4", "--epsilon", "0", "--seed", "3"]) == 0
    assert [int(row["frames"]) for row in read_evals(logdir)] == [40_000, 80_000, 120_000]

    (logdir / "progress.csv").write_text("elapsed_s,frames\n1.0,120000\n")
    kept = learn.keep(logdir, runs=tmp_path / "runs", results=tmp_path / "results")
    assert [int(row["frames"]) for row in read_evals(kept)] == [40_000, 80_000, 120_000]
    assert np.isfinite([float(row["std_return"]) for row in read_evals(kept)]).all()


def test_a_checkpoint_not_named_by_the_learner_and_zero_episodes_are_refused(tmp_path):
    with pytest.raises(UsageError, match="f<frames>"):
        saved_frames(tmp_path / "ckpt-123-latest")
    with pytest.raises(UsageError, match="--episodes"):
        main([str(tmp_path), "--episodes", "0"])


def test_watching_a_resumed_run_waits_for_its_new_summary(tmp_path):
    """A resumed run's log dir holds the summary of its earlier stretch: the watch goes on until
    the run writes the summary again, then reads the checkpoint the run left last."""
    logdir = tmp_path / "seed0"
    logdir.mkdir()
    summary = logdir / "summary.json"
    summary.write_text("{}")
    os.utime(summary, ns=(1_000_000_000, 1_000_000_000))
    watcher = threading.Thread(target=watch, args=(logdir, EvalSettings(episodes=2, epsilon=0.0)),
                               kwargs={"poll_s": 0.02}, daemon=True)
    watcher.start()
    watcher.join(timeout=1.0)
    assert watcher.is_alive()  # the earlier stretch's summary did not end it

    _, made = _checkpoint(tmp_path / "elsewhere", "vtrace", scale=None)  # moved in whole, as the learner's rename
    (logdir / "checkpoints").mkdir()
    last = made.rename(logdir / "checkpoints" / "ckpt-1000-f40000")
    summary.write_text('{"stop_reason": "max_frames"}')
    watcher.join(timeout=120.0)
    assert not watcher.is_alive()
    assert [row["checkpoint"] for row in read_evals(logdir)] == [last.name]
