"""The learning benchmark's report: returns at the marks, per seed, beside the references."""

import json
import signal
import subprocess
import sys
import time

from seedfleet import machine_cpu
from seedfleet.bench.learn import keep_all, run_until
from seedfleet.bench.learn_cases import CASES, VARIANT_FILE, run_command
from seedfleet.bench.learn_report import BEGIN, END, report
from seedfleet.bench.plot import read_curve, return_at
from seedfleet.bench.results_page import BEGIN as HEAD_BEGIN
from seedfleet.bench.results_page import END as HEAD_END
from seedfleet.bench.run_config import differences
from seedfleet.machine_cpu import MACHINE_FILE, cpu_label, record_machine, vector_units
from seedfleet.settings import CONFIG_FILE, record_config


def _fake_run(logdir, rows, summary):
    logdir.mkdir(parents=True)
    lines = ["elapsed_s,frames,env_steps,frames_per_s,mean_return_last_100,episodes"]
    lines += [f"{t},{f},{f // 4},3000,{r},10" for t, f, r in rows]
    (logdir / "progress.csv").write_text("\n".join(lines) + "\n")
    (logdir / "summary.json").write_text(json.dumps(summary))


def _progress(logdir, extra_column: str, rows: list[str], summary: dict) -> None:
    """A finished run whose progress.csv has one more return column after the usual ones."""
    logdir.mkdir(parents=True)
    header = f"elapsed_s,frames,env_steps,frames_per_s,mean_return_last_100,episodes,{extra_column}"
    (logdir / "progress.csv").write_text("\n".join([header, *rows]) + "\n")
    (logdir / "summary.json").write_text(json.dumps({**summary, "stop_reason": "max_frames"}))


def report_text(tmp_path, runs, names, **kwargs) -> str:
    """The learn section `report` writes for `names` from the runs under `runs`."""
    md = tmp_path / "BENCHMARKS.md"
    md.write_text(f"{HEAD_BEGIN}\n{HEAD_END}\n{BEGIN}\n{END}\n")
    report(md, names, runs=runs, **kwargs)
    return md.read_text()


def test_return_at_reads_the_last_report_before_the_mark():
    curve = [{"frames": 1e6, "mean_return_last_100": float("nan")}, {"frames": 4e6, "mean_return_last_100": -15.0},
             {"frames": 6e6, "mean_return_last_100": -2.0}]
    assert return_at(curve, 5_000_000) == -15.0
    assert return_at(curve, 10_000_000) == -2.0
    assert return_at(curve, 1_000_000) != return_at(curve, 1_000_000)  # NaN: no full window yet


def test_report_writes_tables_and_plots_between_the_markers(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs / "pong" / "seed0", [(600, 2.5e6, -20.0), (1200, 5e6, -10.0), (2400, 9.9e6, 12.0)],
              {"frames": 11_000_000, "wall_s": 2700, "stop_reason": "target_return", "mean_return_last_100": 18.2})
    _fake_run(runs / "pong" / "seed1", [(600, 2.5e6, -20.5), (1300, 5e6, -12.5), (2600, 10e6, 5.0), (5000, 2e7, 19.0)],
              {"frames": 20_000_000, "wall_s": 5000, "stop_reason": "max_frames", "mean_return_last_100": 19.0})
    md = tmp_path / "BENCHMARKS.md"
    md.write_text(f"# head\n{HEAD_BEGIN}\n{HEAD_END}\n{BEGIN}\nold\n{END}\n# tail\n")
    report(md, ["pong", "breakout"], runs=runs)
    text = md.read_text()
    assert "old" not in text and text.startswith("# head") and text.rstrip().endswith("# tail")
    assert "bfloat16 on amx_bf16 and avx512_bf16, float32 elsewhere" in text  # what a CPU column implies
    assert "| seed 0 | -20.0 | -10.0 | 12.0 | 18.2 | 11.00M | 45 | target_return |" in text  # stopped early at 18.2
    assert "| seed 1 | -20.5 | -12.5 | 5.0 | 19.0 | 20.00M | 83 | max_frames |" in text
    for ref in CASES["pong"].references:
        assert ref.name in text and ref.source in text
    assert "### breakout" not in text  # no runs, no section
    assert (tmp_path / "BENCHMARKS-learn-pong.png").stat().st_size > 10_000


def test_runs_with_evaluation_actors_get_a_row_of_their_own(tmp_path):
    runs = tmp_path / "runs"
    _progress(runs / "minatar-breakout-r2d2" / "seed0", "mean_eval_return_last_100",
              ["60,900000,900000,3000,2.0,10,3.5", "300,2400000,2400000,3000,6.0,90,11.0",
               "600,5000000,5000000,3000,9.0,200,14.0"], {"frames": 5_000_000, "wall_s": 600})
    text = report_text(tmp_path, runs, ["minatar-breakout-r2d2"])
    assert "| seed 0 | 2.0 | 6.0 | 9.0 | 5.00M | 10 | max_frames |" in text
    assert "| seed 0, evaluation actors | 3.5 | 11.0 | 14.0 | 5.00M | 10 | max_frames |" in text


def test_a_variant_is_reported_beside_the_defaults_with_its_flags(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs / "pong" / "seed0", [(600, 5e6, -20.0), (1200, 1e7, -15.0)],
              {"frames": 10_000_000, "wall_s": 1200, "stop_reason": "signal"})
    variant = runs / "pong@normadv"
    _fake_run(variant / "seed0", [(600, 5e6, -12.0), (1200, 1e7, 3.0)],
              {"frames": 10_000_000, "wall_s": 1200, "stop_reason": "signal"})
    (variant / "variant.json").write_text(json.dumps({"flags": ["--normalize-advantages"]}))
    text = report_text(tmp_path, runs, ["pong"])
    assert "| seed 0 | - | -20.0 | -15.0 | - | 10.00M | 20 | signal |" in text
    assert "| seed 0, normadv | - | -12.0 | 3.0 | - | 10.00M | 20 | signal |" in text
    assert "- normadv: the same with `--normalize-advantages`" in text


def test_a_variant_folder_renamed_by_hand_without_its_file_reports_as_a_run_kept_apart(tmp_path):
    """A run moved aside by hand (`pong@first-try`, no variant.json) ran the case's flags: the
    report lists it beside the defaults instead of stopping at the missing file."""
    runs = tmp_path / "runs"
    summary = {"frames": 10_000_000, "wall_s": 1200, "stop_reason": "signal"}
    _fake_run(runs / "pong" / "seed0", [(600, 5e6, -20.0), (1200, 1e7, -15.0)], summary)
    _fake_run(runs / "pong@first-try" / "seed0", [(600, 5e6, -18.0), (1200, 1e7, -11.0)], summary)
    text = report_text(tmp_path, runs, ["pong"])
    assert "| seed 0, first-try | - | -18.0 | -11.0 | - | 10.00M | 20 | signal |" in text
    assert "- first-try: the same flags, a run kept apart by name" in text


def test_runs_with_a_config_record_are_stated_against_today_s_defaults(tmp_path):
    """A run's config.json is compared with what the case resolves to today: a default that
    moved after the run shows as the flag it ran with; seed, log dir and --fresh do not count;
    a run without a record gets no line, and today's defaults are asked once per case and
    algorithm (a variant that changes --algo is stated against that algorithm's). A flag newer
    than a record says nothing, unless the variant's own flags set it."""
    runs = tmp_path / "runs"
    today = {"seed": 0, "logdir": "x", "fresh": True, "address": "[::]:8470", "algo": "appo", "torso": "impala_shallow",
             "life_loss_terminal": True, "learning_rate": 0.00025, "mlp_sizes": [64, 64], "target_return": None,
             "updates_per_call": 8}
    then = {**today, "seed": 1, "logdir": "runs/learn/breakout/seed1", "fresh": False, "address": "127.0.0.1:0",
            "life_loss_terminal": False}
    summary = {"frames": 10_000_000, "wall_s": 1200, "stop_reason": "signal"}
    _fake_run(runs / "breakout" / "seed0", [(600, 5e6, 10.0)], summary)  # from before config.json
    _fake_run(runs / "breakout" / "seed1", [(600, 5e6, 12.0)], summary)
    record_config(runs / "breakout" / "seed1", then, 0)
    _fake_run(runs / "breakout@nature" / "seed0", [(600, 5e6, 20.0)], summary)
    (runs / "breakout@nature" / VARIANT_FILE).write_text(json.dumps({"flags": ["--torso", "nature"]}))
    record_config(runs / "breakout@nature" / "seed0", {**today, "torso": "nature", "learning_rate": 6e-4}, 0)
    record_config(runs / "breakout@nature" / "seed0", {**today, "torso": "nature", "mlp_sizes": [32]}, 3_000_000)
    _fake_run(runs / "breakout@nature" / "seed1", [(600, 5e6, 20.0)], summary)
    record_config(runs / "breakout@nature" / "seed1", {**today, "seed": 1}, 0)
    before_the_flag = {k: v for k, v in today.items() if k != "updates_per_call"}
    for variant, flags in (("once", ["--updates-per-call", "1"]), ("plain", ["--no-life-loss-terminal"])):
        _fake_run(runs / f"breakout@{variant}" / "seed0", [(600, 5e6, 20.0)], summary)
        (runs / f"breakout@{variant}" / VARIANT_FILE).write_text(json.dumps({"flags": flags}))
        record_config(runs / f"breakout@{variant}" / "seed0", {**before_the_flag, "life_loss_terminal": False}, 0)
    _fake_run(runs / "breakout@iqn" / "seed0", [(600, 5e6, 20.0)], summary)  # another algorithm's defaults
    (runs / "breakout@iqn" / VARIANT_FILE).write_text(json.dumps({"flags": ["--algo", "iqn"]}))
    iqn_today = {**today, "algo": "iqn", "learning_rate": 5e-5, "kappa": 1.0}
    record_config(runs / "breakout@iqn" / "seed0", {**iqn_today, "learning_rate": 6.25e-5}, 0)
    asked = []

    def defaults(command):
        asked.append(list(command))
        return iqn_today if command[-2:] == ["--algo", "iqn"] else today

    text = report_text(tmp_path, runs, ["breakout"], defaults=defaults)
    assert len(asked) == 2 and asked[0][asked[0].index("--env") + 1] == "ALE/Breakout-v5"
    assert "- seed 0, iqn: `--algo iqn --learning-rate 6.25e-05`" in text  # against IQN's defaults, not the case's
    assert "- seed 1: `--no-life-loss-terminal`" in text
    assert "- seed 0, nature: `--torso nature --learning-rate 0.0006` then `--torso nature --mlp-sizes 32`" in text
    assert "- seed 1, nature: today's defaults" in text
    assert "- seed 0, once: `--no-life-loss-terminal --updates-per-call 1`" in text
    assert "- seed 0, plain: `--no-life-loss-terminal`" in text  # a newer flag no one set: not a word
    assert "- seed 0: " not in text  # no record, no line
    assert report_text(tmp_path, runs, ["pong"], defaults=defaults) and len(asked) == 2  # no runs there


def test_finished_runs_are_kept_apart_from_their_log_dirs_and_reported_from_there(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    _fake_run(runs / "pong@epochs2" / "seed3", [(600, 5e6, -15.0)],
              {"frames": 5_000_000, "wall_s": 600, "stop_reason": "signal"})
    (runs / "pong@epochs2" / VARIANT_FILE).write_text(json.dumps({"flags": ["--epochs", "2"]}))
    (runs / "pong@epochs2" / "seed3" / "checkpoints").mkdir()
    record_config(runs / "pong@epochs2" / "seed3", {"epochs": 2}, 0)
    (runs / "pong" / "seed0").mkdir(parents=True)  # started, nothing written yet: not kept
    assert keep_all(runs, results) == [results / "pong@epochs2" / "seed3"]
    kept = sorted(p.name for p in (results / "pong@epochs2" / "seed3").iterdir())
    assert kept == sorted(["progress.csv", "summary.json", CONFIG_FILE])
    text = report_text(tmp_path, results, ["pong"], defaults=lambda _: {"epochs": 4})
    assert "- epochs2: the same with `--epochs 2`" in text and "| seed 3, epochs2 | - | -15.0 |" in text
    assert "- seed 3, epochs2: `--epochs 2`" in text


_WRITES_PROGRESS = """
import pathlib, sys, time
path = pathlib.Path(sys.argv[1]) / "progress.csv"
path.write_text("elapsed_s,frames,mean_return_last_100\\n")
for i in range(1, 1000):
    with path.open("a") as f:
        f.write(f"{i},{i * 1000},-20\\n")
    time.sleep(0.02)
"""


def test_a_run_is_stopped_once_its_progress_passes_the_case_s_last_frames(tmp_path):
    command = [sys.executable, "-c", _WRITES_PROGRESS, str(tmp_path)]
    code = run_until(command, tmp_path, timeout_s=60, stop_at=5_000, poll_s=0.05)
    frames = read_curve(tmp_path)[-1]["frames"]
    assert code in (-signal.SIGTERM, 143)  # stopped, not run to its end (999,000 frames)
    assert 5_000 <= frames < 100_000


def test_a_run_past_its_timeout_is_stopped_and_one_that_ends_keeps_its_exit_code(tmp_path):
    command = [sys.executable, "-c", _WRITES_PROGRESS, str(tmp_path)]
    assert run_until(command, tmp_path, timeout_s=0.3, stop_at=None, poll_s=0.05) in (-signal.SIGTERM, 143)
    assert read_curve(tmp_path)[-1]["frames"] < 100_000
    assert run_until([sys.executable, "-c", "raise SystemExit(1)"], tmp_path, 60, None, poll_s=0.05) == 1


_BENCH_OF_FAKE_RUNS = """
import sys
from seedfleet.bench import learn
WRITES = sys.argv[1]
learn.run_command = lambda case, seed, logdir, flags=(), resume=False: [sys.executable, "-c", WRITES, str(logdir)]
sys.exit(learn.main(["--cases", "pong", "--seeds", "0", "1", "--benchmarks", "B.md"]))
"""


def test_sigterm_to_the_bench_stops_its_run_keeps_the_curve_and_starts_no_other_seed(tmp_path):
    (tmp_path / "B.md").write_text(f"{HEAD_BEGIN}\n{HEAD_END}\n{BEGIN}\n{END}\n")
    bench = subprocess.Popen([sys.executable, "-c", _BENCH_OF_FAKE_RUNS, _WRITES_PROGRESS], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    curve_dir = tmp_path / "runs" / "learn" / "pong" / "seed0"
    deadline = time.monotonic() + 60
    while len(read_curve(curve_dir)) < 5:
        assert time.monotonic() < deadline and bench.poll() is None, bench.communicate()[0]
        time.sleep(0.05)
    bench.send_signal(signal.SIGTERM)
    assert bench.wait(timeout=30) == 143, bench.communicate()[0]
    frames = read_curve(curve_dir)[-1]["frames"]
    time.sleep(0.3)
    assert read_curve(curve_dir)[-1]["frames"] == frames < 999_000  # the run was stopped, not orphaned
    kept = read_curve(tmp_path / "bench" / "results" / "learn" / "pong" / "seed0")
    assert kept and kept[-1]["frames"] == frames
    assert not (tmp_path / "runs" / "learn" / "pong" / "seed1").exists()  # no other seed started
    assert "seed 0" in (tmp_path / "B.md").read_text()


def test_resume_drops_fresh_so_the_run_continues_from_its_checkpoint(tmp_path):
    case = CASES["pong-nosticky"]
    assert "--fresh" in run_command(case, 0, tmp_path)
    resumed = run_command(case, 0, tmp_path, resume=True)
    assert "--fresh" not in resumed and resumed[resumed.index("--max-frames") + 1] == str(case.frames)


def test_a_case_stopped_at_a_mark_says_so_and_reads_up_to_it(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs / "pong-nosticky" / "seed0",
              [(600, 2.5e6, -19.0), (1200, 5e6, -10.0), (2570, 9.95e6, 18.2), (2600, 10.1e6, 18.4)],
              {"frames": 10_100_000, "wall_s": 2640, "stop_reason": "signal", "mean_return_last_100": 18.4})
    text = report_text(tmp_path, runs, ["pong-nosticky"])
    assert "stopped by the bench once past 10M frames" in text
    assert "| seed 0 | -19.0 | -10.0 | 18.2 | 10.10M | 44 | signal |" in text  # the last report before 10M


def _machines(logdir, *stretches):
    (logdir / MACHINE_FILE).write_text(json.dumps([{"cpu": cpu, "units": units, "from_frames": frames}
                                                   for cpu, units, frames in stretches]))


def test_the_defaults_seeds_get_a_mean_row_and_every_run_names_its_cpu(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs / "pong" / "seed0", [(600, 2.5e6, -20.0), (1200, 5e6, -10.0), (2400, 1e7, 8.0), (4800, 2e7, 14.0)],
              {"frames": 20_000_000, "wall_s": 4800, "stop_reason": "max_frames"})
    _fake_run(runs / "pong" / "seed1", [(600, 2.5e6, -19.0), (1200, 5e6, -12.0), (2400, 1e7, 5.0)],
              {"frames": 10_000_000, "wall_s": 2400, "stop_reason": "signal"})
    _machines(runs / "pong" / "seed0", ("AMD EPYC", "avx512_bf16", 0))
    _machines(runs / "pong" / "seed1", ("Intel Xeon", "amx_bf16", 0), ("AMD EPYC", "avx512_bf16", 4_000_000))
    for seed in (0, 1):
        _fake_run(runs / "pong@x" / f"seed{seed}", [(600, 5e6, -3.0)], {"frames": 5_000_000, "wall_s": 600})
    (runs / "pong@x" / VARIANT_FILE).write_text(json.dumps({"flags": ["--x"]}))
    text = report_text(tmp_path, runs, ["pong"])
    # seed 1 stopped before 20M: no mean there
    assert "| **mean of seeds 0, 1** | **-19.5** | **-11.0** | **6.5** | **-** | | | | |" in text
    assert text.count("mean of seeds") == 1  # the defaults' seeds only, not a variant's
    head = text.split(HEAD_BEGIN)[1].split(HEAD_END)[0]  # the page's head: the defaults' mean beside a reference
    assert "| pong: ALE/Pong-v5, appo | **-19.5 / -11.0 / 6.5 / -** at 2.5M / 5M / 10M / 20M |" in head
    assert "- / -12.6 / 15.2 / 18.4 (Rainbow, Dopamine (sticky 0.25; value-based), 5 runs) | 0, 1 |" in head
    assert "@x" not in head
    assert "| 80, 40 | 3,000, 3,000 | AMD EPYC, avx512_bf16 / Intel Xeon, amx_bf16 then AMD EPYC" in head
    assert "| seed 0 | -20.0 | -10.0 | 8.0 | 14.0 | 20.00M | 80 | max_frames | AMD EPYC, avx512_bf16 |" in text
    assert "| 10.00M | 40 | signal | Intel Xeon, amx_bf16 then AMD EPYC, avx512_bf16 |" in text
    assert "| seed 0, x | - | -3.0 | - | - | 5.00M | 10 | running or killed | not recorded |" in text


def test_a_run_records_its_machine_and_a_resumed_run_the_stretch_it_adds(tmp_path, monkeypatch):
    monkeypatch.setattr(machine_cpu, "machine", lambda: {"cpu": "Intel Xeon", "units": "amx_bf16"})
    record_machine(tmp_path, 0)
    monkeypatch.setattr(machine_cpu, "machine", lambda: {"cpu": "AMD EPYC", "units": "avx512_bf16"})
    record_machine(tmp_path, 4_000_000)
    stretches = json.loads((tmp_path / MACHINE_FILE).read_text())
    assert [m["from_frames"] for m in stretches] == [0, 4_000_000]
    assert cpu_label(tmp_path) == "Intel Xeon, amx_bf16 then AMD EPYC, avx512_bf16"
    record_machine(tmp_path, 5_000_000)  # the same machine again: named once
    assert cpu_label(tmp_path) == "Intel Xeon, amx_bf16 then AMD EPYC, avx512_bf16"
    record_machine(tmp_path, 0)  # a fresh run starts its record afresh
    assert len(json.loads((tmp_path / MACHINE_FILE).read_text())) == 1
    assert cpu_label(tmp_path) == "AMD EPYC, avx512_bf16"


def test_the_strongest_vector_units_name_the_cpu():
    assert vector_units({"avx2", "avx512f", "avx512_bf16", "avx512_vnni"}) == "avx512_bf16"  # AMD Zen 4
    assert vector_units({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}) == "amx_bf16"  # Xeon with AMX
    assert vector_units({"avx2", "fma"}) == "avx2"
    assert vector_units({"sse2"}) == ""


def test_a_record_from_before_a_flag_states_what_the_run_did_without_it():
    """--sync-acting came after config.json: a record without it acted asynchronously, and
    says so once the default is synchronous; a variant's own --no-sync-acting is not said twice."""
    today = {"seed": 0, "sync_acting": True, "torso": "impala_shallow"}
    assert differences([{"flags": {"seed": 3, "torso": "impala_shallow"}}], today) == "`--no-sync-acting`"
    assert differences([{"flags": {"torso": "impala_shallow", "sync_acting": True}}], today) == "today's defaults"
    assert differences([{"flags": {"torso": "impala_shallow"}}], today, ["--no-sync-acting"]) == "`--no-sync-acting`"
    assert differences([{"flags": {"torso": "nature"}}], {"torso": "impala_shallow"}) == "`--torso nature`"


def test_a_case_reading_the_last_20_episodes_reads_and_names_that_column(tmp_path):
    runs = tmp_path / "runs"
    _progress(runs / "halfcheetah-sac" / "seed0", "mean_return_last_20",
              ["1800,100000,100000,60,2800.0,100,5100.0", "3600,300000,300000,60,6000.0,300,7600.0"],
              {"frames": 300_000, "wall_s": 3600})
    text = report_text(tmp_path, runs, ["halfcheetah-sac"])
    assert "| run | return(20) at 0.1M | return(20) at 0.3M |" in text
    assert "| seed 0 | 5100.0 | 7600.0 | 0.30M | 60 | max_frames |" in text  # not the last 100's 2800 and 6000
    head = text.split(HEAD_BEGIN)[1].split(HEAD_END)[0]
    assert "| **5100.0 / 7600.0** at 0.1M / 0.3M, return(20) |" in head
    assert CASES["pong"].returns != CASES["halfcheetah-sac"].returns  # Atari keeps the last 100
