"""Native libraries' start-up lines kept off the console, unless the user asks for them.

TensorFlow's wheel logs through two channels. Its own (tsl) logging honours
TF_CPP_MIN_LOG_LEVEL; Abseil's, used while the shared libraries load, writes to file
descriptor 2 before anything can configure it. On a machine without a GPU the second prints
"Could not find cuda drivers" and a note on oneDNN at every start, and the first a
"failed call to cuInit" error: lines a new user reads as failures.
`import_tensorflow_quietly` sets the level (errors stay visible where an NVIDIA driver is
present, since there they matter), then imports TensorFlow and finds its devices with fd 2
captured, replaying every line but the known start-up ones. Nothing is lost: Python's own
writes in that window are replayed too, in order.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
# Lines printed while TensorFlow loads that say nothing wrong.
STARTUP_LINES = tuple(re.compile(pattern) for pattern in (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"\] oneDNN custom operations are on",
    r"\] Could not find cuda drivers on your machine",
    r"\] This TensorFlow binary is optimized to use available CPU instructions",
    r"\] To enable the following instructions: .* rebuild TensorFlow",
    r"\] Unable to register cu(DNN|FFT|BLAS) factory",
    r"\] computation placer already registered",
))
NO_DRIVER_LINE = re.compile(r"\] failed call to cuInit")  # dropped only where no NVIDIA driver is present


def nvidia_driver_present() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists()


@contextmanager
def stderr_filtered(dropped: tuple[re.Pattern, ...]) -> Iterator[None]:
    """Captures file descriptor 2 (native libraries' and Python's writes alike) for the
    block, then writes back every line that matches none of `dropped`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode(errors="replace").splitlines(keepends=True)
                    if not any(pattern.search(line) for pattern in dropped)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def import_tensorflow_quietly(verbose: bool = False) -> ModuleType:
    """Imports TensorFlow and finds its devices without the start-up lines, all of them info
    lines but the failed cuInit where no NVIDIA driver is present. With `verbose`, or
    TF_CPP_MIN_LOG_LEVEL set to 0 or 1 (info, warnings), everything shows as TensorFlow
    prints it; a level the user set is kept."""
    level = os.environ.get(LEVEL_VARIABLE)
    if verbose or (level is not None and level.strip() in ("0", "1")):
        return importlib.import_module("tensorflow")
    driver = nvidia_driver_present()
    if level is None:  # 3 hides tsl's errors too: without a driver they are about the missing GPU
        os.environ[LEVEL_VARIABLE] = "2" if driver else "3"
    with stderr_filtered(STARTUP_LINES + (() if driver else (NO_DRIVER_LINE,))):
        tf = importlib.import_module("tensorflow")
        tf.config.list_physical_devices()  # CUDA's initialisation, and its line, happen here
    return tf
