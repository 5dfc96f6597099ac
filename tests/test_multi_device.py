"""Data-parallel training over several devices (algorithms/distribute.py), on this machine's CPU
split into two logical TensorFlow devices (tests/logical_devices.py, a process of its own).
test_end_to_end.py trains CartPole on two of them."""

import re
import subprocess
import sys

from conftest import ROOT

SCRIPT = str(ROOT / "tests" / "logical_devices.py")


def test_a_learner_step_on_two_devices_equals_one_and_checkpoints_restore_both_ways():
    done = subprocess.run([sys.executable, SCRIPT, "agents"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for algo in ("vtrace", "appo-proximal", "r2d2"):
        assert f"{algo}: 3 learner steps on 2 devices equal those on 1; checkpoints restore both ways" in done.stdout
    assert "sac: 3 learner steps on 2 devices equal those on 1" in done.stdout


def test_more_training_devices_than_tensorflow_sees_or_an_uneven_batch_is_one_clear_line(tmp_path):
    for flags, message in ((["--train-devices", "3"], r"--train-devices 3: TensorFlow sees 2 CPU device\(s\)"),
                           (["--train-devices", "2", "--batch-size", "15"],
                            r"--batch-size 15 does not split over 2 training devices")):
        done = subprocess.run([sys.executable, SCRIPT, "cli", "learner", "--address", "127.0.0.1:0",
                               "--logdir", str(tmp_path), *flags],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 2, done.stderr[-2000:]
        assert re.search(message, done.stderr), done.stderr[-2000:]
        assert "Traceback" not in done.stderr
