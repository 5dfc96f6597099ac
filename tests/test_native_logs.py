"""TensorFlow's native start-up lines stay off the console unless asked for; nothing else is lost."""

import os
import subprocess
import sys

from conftest import ROOT

from seedfleet.server.native_logs import STARTUP_LINES

FILTER_SCRIPT = """
import os, re, sys
from seedfleet.server.native_logs import stderr_filtered
with stderr_filtered((re.compile(r"chatter"),)):
    os.write(2, b"I0000 native chatter\\n")
    os.write(2, b"E0000 a real native error\\n")
    print("python's own warning", file=sys.stderr)
print("after", file=sys.stderr)
"""


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**clean, **(env or {})})


def test_the_filter_drops_only_matching_lines_and_keeps_the_order():
    done = _run("-c", FILTER_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["E0000 a real native error", "python's own warning", "after"]


def test_commands_that_load_tensorflow_start_quietly_unless_verbose(tmp_path):
    """`seedfleet export` of a folder with no checkpoint: TensorFlow loads, then the command refuses."""
    command = ("-m", "seedfleet.deploy.cli", "export", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "x"))
    quiet = _run(*command)
    assert quiet.returncode == 2 and quiet.stderr.splitlines() == [
        f"seedfleet export: error: --checkpoint {tmp_path}: no checkpoint there (give a checkpoint directory, "
        "or a log dir)"], quiet.stderr
    for loud in (_run(*command, "--verbose"), _run(*command, env={"TF_CPP_MIN_LOG_LEVEL": "0"})):
        assert loud.returncode == 2
        dropped = [line for line in loud.stderr.splitlines() if any(p.search(line) for p in STARTUP_LINES)]
        assert dropped, loud.stderr  # the lines the quiet start hid are TensorFlow's own, here too
