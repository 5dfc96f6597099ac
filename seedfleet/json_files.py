"""JSON files written whole: the learner's summary and records, an actor's round trips."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_json(path: Path, body: object, indent: int | None = 2) -> None:
    """Writes `body` as JSON atomically (a temporary file, then a rename): a reader never sees
    half of it. OSError when it cannot be written (a full disk); the file as it was is kept,
    and no temporary file is left beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(body, indent=indent) + "\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
