"""The SAC replay probe (bench/sac_replay_probe.py) reads a checkpoint's replay in the order it
was filled and gives, per segment, the critics' Q and soft targets, checked here against plain
NumPy forward passes of the saved weights and SAC's target equation."""

import numpy as np
import pytest
from in_process import train
from test_sac_checkpoint import FLAGS, build

from seedfleet.bench.sac_replay_probe import main, replay_in_order, segment_rows, sweep_rows
from seedfleet.errors import UsageError
from seedfleet.server.checkpoint import read_trainer_arrays
from seedfleet.server.saved_policy import load_policy

ENV = "Pendulum-v1"


def hidden(layers, x: np.ndarray) -> np.ndarray:
    """An mlp torso: ReLU layers."""
    for layer in layers:
        x = np.maximum(x @ layer.w.numpy() + layer.b.numpy(), 0.0)
    return x


def mlp(layers, head, x: np.ndarray) -> np.ndarray:
    """ReLU hidden layers, then a linear head: x -> [B, out]."""
    return hidden(layers, x) @ head.w.numpy() + head.b.numpy()


def reference_rows(agent, items, segments, noise):
    """Per segment: mean Q_1, mean y and the TD error's RMS, from the equations, one loop per transition."""
    center, half = agent.center.numpy(), agent.half_range.numpy()
    alpha, gamma = float(np.exp(agent.log_alpha.numpy())), agent.config.discount
    actor = agent.actor
    q1s, ys = [], []
    for i in range(len(items["reward"])):
        x, a, x_next = items["observation"][i, 0], items["action"][i, 0], items["observation"][i, 1]
        q1s.append(mlp(agent.critics[0].torso.layers, agent.critics[0].head, np.r_[x, (a - center) / half][None])[0, 0])
        features = hidden(actor.torso.layers, x_next[None])
        mean = features @ actor.mean.w.numpy() + actor.mean.b.numpy()
        raw = features @ actor.log_std.w.numpy() + actor.log_std.b.numpy()
        log_std = (-5.0 + 3.5 * (np.tanh(raw) + 1.0))[0]
        u = mean[0] + np.exp(log_std) * noise[i]
        log_prob = sum(-0.5 * noise[i, d] ** 2 - log_std[d] - 0.5 * np.log(2 * np.pi) - np.log(half[d])
                       - np.log(1.0 - np.tanh(u[d]) ** 2) for d in range(len(u)))
        a_next = np.tanh(u)  # scaled to [-1, 1], as the critics read actions
        soft = min(mlp(t.torso.layers, t.head, np.r_[x_next, a_next][None])[0, 0] for t in agent.targets)
        soft -= alpha * log_prob
        ys.append(items["reward"][i, 1] + gamma * (1.0 - items["terminated"][i, 1]) * soft)
    rows = []
    for part in np.array_split(np.arange(len(ys)), segments):
        part = part[~items["first"][part, 1]]
        q1, y = np.array(q1s)[part], np.array(ys)[part]
        rows.append({"q1": q1.mean(), "target": y.mean(), "td_rms": np.sqrt(np.mean((q1 - y) ** 2))})
    return rows


def test_the_probe_reads_the_replay_oldest_first_and_its_values_are_the_equations(tmp_path, capsys):
    agent, trainer, normalization, checkpoints, _ = build(tmp_path)

    def insert_and_train(batch):
        trainer.insert(batch)
        while trainer.may_train():
            trainer.train_one_batch()

    train(agent, ENV, 4, 4 * 20, on_batch=insert_and_train, normalization=normalization)
    path = checkpoints.save()
    policy = load_policy(path)
    items = replay_in_order(read_trainer_arrays(path))
    assert len(items["reward"]) == trainer.inserted
    rows = segment_rows(policy.agent, items, 3, (1,), seed=4)
    noise = np.random.default_rng(4).standard_normal((len(items["reward"]), 1))
    expected = reference_rows(policy.agent, items, 3, noise)
    assert len(rows) == 3
    for row, want in zip(rows, expected, strict=True):
        for key in ("q1", "target", "td_rms"):
            assert row[key] == pytest.approx(want[key], rel=1e-4, abs=1e-4), key
        assert row["worth"] == pytest.approx(row["reward"] / (1.0 - policy.agent.config.discount))
        assert row["obs[1] |max|"] >= abs(row["obs[1] mean"])

    swept = sweep_rows(policy.agent, items, 2, (-8.0, 0.5), sample=10**6)  # the whole replay
    for value, q1, q2 in swept:
        obs = items["observation"][:, 0].astype(np.float64)
        obs[:, 2] = value
        critics = policy.agent.critics
        scaled = (items["action"][:, 0] - policy.agent.center.numpy()) / policy.agent.half_range.numpy()
        for got, critic in ((q1, critics[0]), (q2, critics[1])):
            assert got == pytest.approx(mlp(critic.torso.layers, critic.head, np.c_[obs, scaled]).mean(), rel=1e-4)

    assert main([str(tmp_path), "--segments", "2", "--obs-index", "0", "--sweep", "2", "-8", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"{trainer.inserted:,} transitions in replay" in out and "td_rms" in out and "obs[0] mean" in out
    assert "obs[2] | q1 | q2" in out and f"-8 | {swept[0][1]:.2f} | {swept[0][2]:.2f}" in out
    with pytest.raises(UsageError, match="components 0 to 2"):
        main([str(tmp_path), "--obs-index", "3"])
    with pytest.raises(UsageError, match="then one value or more"):
        main([str(tmp_path), "--sweep", "1.5", "2"])


def test_a_replay_that_wrapped_round_is_read_from_its_oldest_item():
    arrays = {"position": np.array([2, 5, 5]), "items/reward": np.arange(5)[:, None] * np.ones((1, 2))}
    assert replay_in_order(arrays)["reward"][:, 0].tolist() == [2, 3, 4, 0, 1]
    partial = {"position": np.array([3, 3, 5]), "items/reward": np.arange(5)[:, None] * np.ones((1, 2))}
    assert replay_in_order(partial)["reward"][:, 0].tolist() == [0, 1, 2]


def test_a_checkpoint_without_its_replay_gets_one_clear_error(tmp_path):
    _, _, _, checkpoints, _ = build(tmp_path, tuple(flag for flag in FLAGS if flag != "--checkpoint-replay"))
    checkpoints.save()
    with pytest.raises(UsageError, match="kept no replay"):
        main([str(tmp_path)])
