"""`seedfleet plot`: one or several runs' curves, labelled by env, algorithm, seed and CPU,
beside the references for their env, as a PNG."""

import struct

import pytest

from seedfleet import machine_cpu
from seedfleet.bench.references import REFERENCES
from seedfleet.deploy.cli import main
from seedfleet.machine_cpu import record_machine
from seedfleet.settings import record_config


def _run(logdir, env: str, algo: str, seed: int, cpu: str, evaluation: bool = False) -> None:
    """A log dir as a learner leaves it: progress.csv, config.json and machine.json."""
    logdir.mkdir(parents=True)
    rows = ["elapsed_s,frames,env_steps,mean_return_last_100,mean_eval_return_last_100"]
    rows += [f"{60.0 * i},{i * 1_000_000},{i * 250_000},{-21 + 3 * i + seed},{-20 + 3 * i if evaluation else 'nan'}"
             for i in range(1, 11)]
    (logdir / "progress.csv").write_text("\n".join(rows) + "\n")
    record_config(logdir, {"env": env, "algo": algo, "seed": seed}, 0)
    record_machine(logdir, 0)


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("seeds", [1, 3])
def test_plot_draws_runs_with_their_labels_beside_the_references(tmp_path, monkeypatch, capsys, seeds):
    monkeypatch.setattr(machine_cpu, "machine", lambda: {"cpu": "AMD EPYC", "units": "avx512_bf16"})
    runs = [tmp_path / f"pong-seed{seed}" for seed in range(seeds)]
    for seed, run in enumerate(runs):
        _run(run, "ALE/Pong-v5", "appo", seed, "AMD EPYC", evaluation=seed == 0)
    out = tmp_path / "pong.png"
    assert main(["plot", *map(str, runs), "--out", str(out)]) == 0
    width, height = _png_size(out)
    assert width > 1000 and height > 400
    printed = capsys.readouterr().out
    assert f"{seeds} run(s), {len(REFERENCES['ALE/Pong-v5'])} reference curve(s)" in printed
    labels = [line.strip() for line in printed.splitlines()[1:]]
    for seed in range(seeds):
        assert f"ALE/Pong-v5, appo, seed {seed}" in labels  # against frames
        assert f"ALE/Pong-v5, appo, seed {seed} (AMD EPYC, avx512_bf16)" in labels  # against wall time: its CPU
    assert "ALE/Pong-v5, appo, seed 0, evaluation actors" in labels
    assert all(ref.name in labels for ref in REFERENCES["ALE/Pong-v5"] if ref.returns)


def test_plot_refuses_a_folder_that_is_no_run(tmp_path, capsys):
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    assert "no progress.csv" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_a_run_from_before_config_json_is_named_by_its_summary_and_folder(tmp_path, capsys):
    run = tmp_path / "pong" / "seed3"
    run.mkdir(parents=True)
    (run / "progress.csv").write_text("elapsed_s,frames,env_steps,mean_return_last_100\n60,1000000,250000,-20\n"
                                      "120,2000000,500000,-18\n")
    (run / "summary.json").write_text('{"env": "ALE/Pong-v5", "algo": "vtrace"}')
    assert main(["plot", str(run), "--out", str(tmp_path / "one.png")]) == 0
    printed = capsys.readouterr().out
    assert "ALE/Pong-v5, vtrace, seed 3 (not recorded)" in printed  # no machine record: said so
    assert "reference curve(s)" in printed and "0 reference curve(s)" not in printed
