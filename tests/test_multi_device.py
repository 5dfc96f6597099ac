"""Data-parallel training over several devices (algorithms/distribute.py), on this machine's CPU
split into two logical TensorFlow devices (tests/logical_devices.py, a process of its own).
test_end_to_end.py trains CartPole on two of them."""

import re
import subprocess
import sys

from conftest import ROOT

SCRIPT = str(ROOT / "tests" / "logical_devices.py")


def test_a_learner_step_on_two_devices_equals_one_and_checkpoints_restore_both_ways():
    done = subprocess.run([sys.executable, SCRIPT, "agents"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for algo in ("vtrace", "appo-proximal", "appo-shuffled", "r2d2"):
        assert f"{algo}: 3 learner steps on 2 devices equal those on 1; checkpoints restore both ways" in done.stdout
    assert "sac: 3 learner steps on 2 devices equal those on 1" in done.stdout
    assert "keras loaded: False" in done.stdout  # five agents built, trained, checkpointed: no Keras
    assert re.search(r"uneven batch: --batch-size 15 does not split over 2 training devices: "
                     r"make it a multiple of --train-devices$", done.stdout, re.MULTILINE)


def test_more_training_devices_than_tensorflow_sees_is_one_clear_line(tmp_path):
    """The CLI prints a UsageError as one line and exits 2; the uneven batch's UsageError
    is raised in the agents run above, which saves a TensorFlow start here."""
    done = subprocess.run([sys.executable, SCRIPT, "cli", "learner", "--address", "127.0.0.1:0",
                           "--logdir", str(tmp_path), "--train-devices", "3"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr[-2000:]
    assert re.search(r"--train-devices 3: TensorFlow sees 2 CPU device\(s\)", done.stderr), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
