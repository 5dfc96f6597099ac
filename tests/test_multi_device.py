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
    # more training devices than TensorFlow sees: the CLI's one line and exit code 2, no traceback
    [three] = [line for line in done.stdout.splitlines() if line.startswith("three devices:")]
    assert re.fullmatch(r"three devices: exit 2: seedfleet learner: error: --train-devices 3: "
                        r"TensorFlow sees 2 CPU device\(s\).*", three), three
