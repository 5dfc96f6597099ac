"""Native libraries' start-up lines kept off the console, unless the user asks for them.

TensorFlow's wheel logs through two channels. Its own (tsl) logging honours
TF_CPP_MIN_LOG_LEVEL; Abseil's, used while the shared libraries load, writes to file
descriptor 2 before anything can configure it. On a machine without a GPU the second prints
"Could not find cuda drivers" and a note on oneDNN at every start, and the first a
"failed call to cuInit" error: lines a new user reads as failures.
`import_tensorflow_quietly` sets the level: 2 where an NVIDIA driver is present (errors
stay visible: there they matter), 3 elsewhere, where TensorFlow's C++ error lines for the
whole run are the missing GPU's and oneDNN's fallbacks (a user's own level, or --verbose,
shows them). Then it imports TensorFlow and finds its devices with fd 2
filtered, every other line passed on as it comes. Nothing else is lost: Python's own writes
in that window go through too, in order. Both import TensorFlow without the Keras it would
import eagerly (`import_tensorflow`): we use none, and it is a quarter of the import.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
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
    """File descriptor 2 (native libraries' and Python's writes alike) goes through a pipe
    for the block; a thread writes every line that matches none of `dropped` to the real
    stderr as it comes, so nothing else is held back, even if the process dies in the block."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    saved = os.dup(2)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not any(pattern.search(line.decode(errors="replace")) for pattern in dropped):
                    os.write(saved, line)

    forwarder = threading.Thread(target=forward, name="stderr-filter", daemon=True)
    forwarder.start()
    try:
        os.dup2(write_end, 2)
        os.close(write_end)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer gone: the thread reads to its end
        forwarder.join(timeout=5.0)  # a child started in the block may hold the pipe open
        if not forwarder.is_alive():  # else it still writes there: the descriptor stays its own
            os.close(saved)


# TensorFlow's __init__ imports Keras' optimizers "so that any function/method that needs to
# happen at load time will trigger" (b/196254385), inside a `try` that passes on ImportError.
# seedfleet uses no Keras (algorithms/optim.py), and that import is a quarter of TensorFlow's.
KERAS_EAGER_IMPORT = "keras.src.optimizers"


def import_tensorflow() -> ModuleType:
    """`import tensorflow` without the eager Keras import: for that one statement the module
    is marked absent (None in sys.modules makes its import raise ImportError), then unmarked,
    so a later `import keras` or `tf.keras` in the same process still works."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    marked = sys.modules.setdefault(KERAS_EAGER_IMPORT, None) is None
    try:
        return importlib.import_module("tensorflow")
    finally:
        if marked and sys.modules.get(KERAS_EAGER_IMPORT, "") is None:
            del sys.modules[KERAS_EAGER_IMPORT]


def import_tensorflow_quietly(verbose: bool = False) -> ModuleType:
    """Imports TensorFlow and finds its devices without the start-up lines, all of them info
    lines but the failed cuInit where no NVIDIA driver is present. With `verbose`, or
    TF_CPP_MIN_LOG_LEVEL set to 0 or 1 (info, warnings), everything shows as TensorFlow
    prints it; a level the user set is kept."""
    level = os.environ.get(LEVEL_VARIABLE)
    if verbose or (level is not None and level.strip() in ("0", "1")):
        return import_tensorflow()
    driver = nvidia_driver_present()
    if level is None:  # 3 hides tsl's errors too: without a driver they are about the missing GPU
        os.environ[LEVEL_VARIABLE] = "2" if driver else "3"
    with stderr_filtered(STARTUP_LINES + (() if driver else (NO_DRIVER_LINE,))):
        tf = import_tensorflow()
        tf.config.list_physical_devices()  # CUDA's initialisation, and its line, happen here
    return tf
