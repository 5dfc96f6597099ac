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


def test_commands_that_load_tensorflow_start_quietly_unless_verbose():
    quiet = _run("-m", "seedfleet.deploy.cli", "learner", "--help")
    assert quiet.returncode == 0 and "--verbose" in quiet.stdout
    assert not [line for line in quiet.stderr.splitlines() if any(p.search(line) for p in STARTUP_LINES)]
    assert "cuInit" not in quiet.stderr, quiet.stderr
    for loud in (_run("-m", "seedfleet.deploy.cli", "learner", "--help", "--verbose"),
                 _run("-m", "seedfleet.deploy.cli", "learner", "--help", env={"TF_CPP_MIN_LOG_LEVEL": "0"})):
        assert loud.returncode == 0
        dropped = [line for line in loud.stderr.splitlines() if any(p.search(line) for p in STARTUP_LINES)]
        assert dropped, loud.stderr  # the lines the quiet start hid are TensorFlow's own, here too
