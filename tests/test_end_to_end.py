"""A learner and two actor processes train CartPole for a short while, and the return rises:
the learner trains on two logical devices (tests/logical_devices.py), and its checkpoint plays
on one."""

import csv
import json
import re
import sys

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from conftest import R2D2_SMALL, ROOT, Proc, cli_in_process, seedfleet

from seedfleet.server.assembly import env_config_for, make_agent
from seedfleet.server.checkpoint import VARIABLES, read_setup
from seedfleet.server.saved_policy import load_policy

TWO_DEVICES = str(ROOT / "tests" / "logical_devices.py")  # its `cli` runs the CLI on the CPU split in two


def random_policy_returns(episodes: int = 200) -> np.ndarray:
    """CartPole's returns under a uniform random policy: mean about 22.7, std about 11.4."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    returns = []
    for i in range(episodes):
        env.reset(seed=i)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(2)))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return np.array(returns)


TARGET = 75.0  # CartPole: 3.4 times a uniform random policy's mean return (checked below)


def test_learner_and_two_actors_learn_cartpole_on_two_devices_and_its_checkpoint_plays_on_one(tmp_path, capsys):
    """The learner trains to a target, however long its frames take: the budget is frames,
    generous, and the process timeout only catches a hang. The exit code says the target was
    met before the budget. Each learner step is shared out over two logical devices (4 unrolls
    each), and acting waits for each batch's training (`--sync-acting`). Batches of 8 unrolls
    took 44 and 45 s of CPU to the target, 16 took 58 (seed 0, beside other work)."""
    logdir = tmp_path / "run"
    run = Proc([sys.executable, TWO_DEVICES, "cli",
                "run", "--env", "CartPole-v1", "--actors", "2", "--envs-per-actor", "8", "--train-devices", "2",
                "--max-frames", "1000000", "--target-return", str(TARGET), "--learning-rate", "2e-3",
                "--batch-size", "8", "--sync-acting", "--progress-interval-s", "1", "--logdir", str(logdir),
                "--seed", "0"])
    assert run.popen.wait(timeout=900) == 0, run.output()[-3000:]
    run.wait_for(r"training on \S*CPU:0, \S*CPU:1$")
    summary = json.loads((logdir / "summary.json").read_text())
    assert set(summary) >= {"env", "algo", "env_steps", "frames", "wall_s", "episodes",
                            "mean_return_last_100", "env_steps_per_s"}
    assert summary["env"] == "CartPole-v1" and summary["algo"] == "vtrace"
    assert summary["stop_reason"] == "target_return" and summary["learner_steps"] > 0
    assert len([ln for ln in run.lines if "learner actor connected" in ln]) == 2

    random_returns = random_policy_returns()
    baseline = float(random_returns.mean())
    assert 15 < baseline < 30 and TARGET > 3 * baseline  # CartPole under a uniform random policy: about 22
    early = [float(m.group(1)) for m in (re.search(r"return\(100\) ([\d.]+)", ln) for ln in run.lines) if m]
    assert early and early[0] < 2 * baseline  # it starts out near random
    assert summary["mean_return_last_100"] >= TARGET, summary
    # each progress line says how far along the budget the run is, when it would end at the
    # recent rate, and the best return so far against the target
    lines = [line for line in run.lines if line.startswith("frames ")]
    along = [re.search(r"frames ([\d,]+)  \((\d+\.\d)%, ETA (\d+h\d\dm|\d+m\d\ds|\d+s|\?)\)  "
                       r"best (-|[\d.]+) of target ([\d.]+)  fps", line) for line in lines]
    assert along and all(along), lines[:3]
    for match in along:
        assert float(match.group(2)) == pytest.approx(100 * int(match.group(1).replace(",", "")) / 1_000_000, abs=0.06)
        assert float(match.group(5)) == pytest.approx(TARGET, abs=0.05)
    assert along[-1].group(3) != "?" and float(along[-1].group(4)) >= round(TARGET, 1)  # the stop's line: reached
    assert list((logdir).glob("events.out.tfevents.*")), "no TensorBoard summaries"
    assert_quiet(run.lines)
    assert sum("the learner stopped (target_return)" in line for line in run.lines) == 2  # each actor, in words

    # The last checkpoint plays on one device (this process has one CPU device) as training
    # acted (`--sample`), and what it restores there is what the two-device learner wrote.
    # A return bar on this young policy is no check: stopped at the target, 100 sampled
    # episodes played from 25.9 to 242 over 19 runs (the random policy about 22.7).
    code, output = cli_in_process(capsys, "eval", "--checkpoint", str(logdir), "--episodes", "100", "--sample")
    played = re.search(r"100 episodes \(sampled\), mean return ([\d.]+)", output)
    assert code == 0 and played, output[-3000:]
    assert_restores_trained_variables(logdir)


def assert_restores_trained_variables(logdir) -> None:
    """The newest checkpoint's network, restored on one device as eval restores it, holds the very
    tensors its file stores (read raw, by no object graph), each once, and they moved from what a
    fresh agent of the same setup starts with: the learner trained them."""
    policy = load_policy(logdir)
    reader = tf.train.load_checkpoint(str(policy.checkpoint / VARIABLES))
    stored = [reader.get_tensor(key) for key in reader.get_variable_to_shape_map() if key.endswith("VARIABLE_VALUE")]
    restored = [variable.numpy() for variable in policy.agent.checkpointed()["net"].variables]
    assert restored
    for value in restored:
        matches = [i for i, tensor in enumerate(stored)
                   if tensor.shape == value.shape and np.array_equal(tensor, value)]
        assert len(matches) == 1, (value.shape, len(matches))
        stored.pop(matches[0])
    learner, algo, algo_config, network = read_setup(policy.checkpoint).configs()
    fresh = make_agent(learner, algo, algo_config, network, env_config_for(learner)[0], policy.device)
    initial = [variable.numpy() for variable in fresh.checkpointed()["net"].variables]
    assert [v.shape for v in initial] == [v.shape for v in restored]
    assert all(not np.allclose(start, now) for start, now in zip(initial, restored, strict=True) if start.ndim == 2)


NATIVE_LINE = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|cuInit|cudart|oneDNN")


def assert_quiet(lines: list[str]) -> None:
    """No native library chatter, no gRPC error status, no traceback on a clean run's console."""
    noisy = [line for line in lines if NATIVE_LINE.search(line) or "Traceback" in line
             or re.search(r"\b(UNAVAILABLE|INTERNAL|CANCELLED|UNKNOWN)\b", line)]
    assert not noisy, noisy[:10]


def test_r2d2_runs_end_to_end_on_the_same_server(tmp_path):
    """Acting, sequences with burn-in overlap, replay and training all turn over."""
    logdir = tmp_path / "r2d2"
    run = Proc(seedfleet(
        "run", "--algo", "r2d2", "--actors", "2", "--eval-actors", "1", "--envs-per-actor", "4", "--eval-envs", "2",
        "--max-frames", "6000", *R2D2_SMALL,
        "--progress-interval-s", "1", "--logdir", str(logdir),
    ))
    assert run.popen.wait(timeout=180) == 0, run.output()[-3000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["algo"] == "r2d2" and summary["frames"] >= 6000
    assert summary["learner_steps"] > 0
    evaluation = [(int(m.group(1)), int(m.group(2))) for ln in run.lines if "learner actor connected" in ln
                  and (m := re.search(r"envs (\d+)\.\.(\d+) \(evaluation\)", ln))]
    assert len(evaluation) == 1 and evaluation[0][1] - evaluation[0][0] + 1 == 2, evaluation  # --eval-envs
    assert 0 < summary["eval_env_steps"] < summary["env_steps"] / 2  # 2 evaluation envs against 8 training envs
    assert summary["eval_episodes"] > 0 and summary["mean_eval_return_last_100"] is not None
    progress = [ln for ln in run.lines if ln.startswith("frames ")]
    assert any(re.search(r"replay size [1-9][\d,]*  replay bytes per step [1-9]", ln) for ln in progress), progress[-3:]
    with (logdir / "progress.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert any(r["replay_size"] and float(r["replay_size"]) > 0 for r in rows)  # R2D2's trainer's own column
    assert all(float(r["memory_gib"]) > 0.1 for r in rows)
