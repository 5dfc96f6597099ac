"""A run's settings as a record: every flag's value, resolved, in the run's log dir.

The learner writes CONFIG_FILE when it starts: the value of each flag of its configs
(the task's defaults and the flags given, resolved), so a curve kept for later says what
ran even after the defaults change. A resumed run adds a stretch (the frames it starts
from and its flags); a fresh one starts the list again. `seedfleet <command> --print-config`
prints the same record without running, and `flag_words` turns a difference between two
records back into the flags that make it.

Also the typed reading of a setting's text (flags' SEEDFLEET_* variables, --env-options) and the
task defaults an algorithm gives per env family (`Presets`), checked against the classes they set.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from seedfleet.json_files import write_json

CONFIG_FILE = "config.json"  # in a run's log dir: [{"from_frames": n, "flags": {name: value}}, ...]
EVALS_FILE = "checkpoint_evals.csv"  # in a run's log dir: its checkpoints' policies played (bench/checkpoint_evals.py)


def _json_value(value: object) -> object:
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None  # strict JSON has no NaN; an unset float flag (--target-return) reads as null
    return value


TRUE_WORDS = ("1", "true", "yes")
FALSE_WORDS = ("0", "false", "no")


def parse_setting(raw: str, like: object) -> object:
    """`raw` read as a value of the same type as `like` (the flag's default); ValueError if it is not one."""
    if isinstance(like, bool):
        word = raw.strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError(f"is not a bool (use one of {'/'.join(TRUE_WORDS + FALSE_WORDS)})")
        return word in TRUE_WORDS
    if isinstance(like, tuple):
        return tuple(parse_setting(part, like[0]) for part in raw.split(","))
    kind = type(like)
    try:
        return kind(raw.strip())
    except ValueError:
        raise ValueError(f"is not a valid {kind.__name__}") from None


def flag_values(*configs: object) -> dict[str, object]:
    """Every field of the config dataclasses by name (a flag each), as strict JSON holds it."""
    return {field.name: _json_value(getattr(config, field.name))
            for config in configs for field in dataclasses.fields(config)}


def record_config(logdir: Path, flags: dict[str, object], from_frames: int) -> None:
    """Writes the run's CONFIG_FILE atomically: a run restored at `from_frames` > 0 adds a
    stretch to the record there; a run from frame 0 starts it again. OSError when it cannot
    be written (the record as it was is kept)."""
    stretches = read_config(logdir) if from_frames > 0 else []
    write_json(logdir / CONFIG_FILE, [*stretches, {"from_frames": from_frames, "flags": flags}], indent=1)


def read_config(logdir: Path) -> list[dict]:
    """The stretches of the run's CONFIG_FILE; [] for a run without one (from before it existed)
    or with one cut short (a full disk while it was written)."""
    path = logdir / CONFIG_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else []
    except json.JSONDecodeError:
        return []


def config_from(cls: type, values: Mapping[str, object]):
    """`cls` from the values of its fields found in `values` (a config.json's flags, a
    checkpoint's setup): JSON lists back to tuples; other keys are left out, and a field
    `values` lacks takes its default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names})


def flag_words(flags: dict[str, object]) -> list[str]:
    """The command-line flags that set these values: `--name value`, `--name` or `--no-name`
    for a bool, `--name a b` for a list."""
    words: list[str] = []
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list):
            words += [flag, *map(str, value)]
        else:
            words += [flag, "unset" if value is None else str(value)]
    return words


class PresetError(ValueError):
    """A task default (an algorithm's preset) that names no flag, or has the wrong type."""


@dataclass(frozen=True)
class Presets:
    """Flag defaults that follow the task (an algorithm's, by env family and kind of actions), each part for the
    config class it sets; a flag given, or its SEEDFLEET_* variable, still wins. The CLI checks
    every part against its class (`check`) before it parses a flag."""

    algorithm: Mapping[str, object] = field(default_factory=dict)  # the algorithm's config class
    network: Mapping[str, object] = field(default_factory=dict)  # NetworkConfig
    learner: Mapping[str, object] = field(default_factory=dict)  # LearnerConfig
    launch: Mapping[str, object] = field(default_factory=dict)  # seedfleet run's LaunchConfig (its actors)

    def __or__(self, other: Presets) -> Presets:
        """Part by part, `other`'s values winning."""
        return Presets(**{part: {**getattr(self, part), **getattr(other, part)} for part in PRESET_PARTS})

    def check(self, classes: Mapping[str, type]) -> None:
        """Every value of each part names a field of the class `classes[part]` and has its type (an
        int where a float is expected is fine): a preset written for a field since renamed fails
        here, at start-up, rather than being dropped without a word."""
        for part in PRESET_PARTS:
            values, cls = getattr(self, part), classes.get(part)
            if values and cls is None:
                raise PresetError(f"task defaults for the {part} ({', '.join(values)}) but no class to set")
            fields = {f.name: f for f in dataclasses.fields(cls)} if values else {}
            for key, value in values.items():
                if key not in fields:
                    raise PresetError(f"task default {key}={value!r} names no flag of {cls.__name__}")
                like = fields[key].default
                expected = (int, float) if type(like) is float else type(like)
                if type(value) is bool and type(like) is not bool or not isinstance(value, expected):
                    raise PresetError(f"task default {key}={value!r}: a {type(like).__name__} is expected")


PRESET_PARTS = tuple(f.name for f in dataclasses.fields(Presets))

ANY_FAMILY = "*"  # a task-defaults key that holds for every env family with that kind of actions
TaskPresets = Mapping[tuple[str, str], Presets]  # (env family, kind of actions) -> task defaults


def task_presets(table: TaskPresets, family: str, kind: str) -> Presets:
    """The task defaults of `table` for an env family and a kind of actions (seedfleet/actions.py):
    the family's own entry for that kind, else the entry every family shares for it, else none."""
    return table.get((family, kind)) or table.get((ANY_FAMILY, kind)) or Presets()
