"""Command-line flags made from config dataclasses, so each default is written once.

Each field `some_name: type = default  # help` becomes `--some-name`, its help text the
comment beside the field, or else the comment lines right above it. The environment variable
SEEDFLEET_SOME_NAME, when set and not empty, replaces the flag's default: a flag given on the
command line still wins over it, and it wins over the task's defaults and the dataclass's.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import os
import re

from seedfleet.settings import parse_setting

ENV_PREFIX = "SEEDFLEET_"
ENV_HELP = (
    "Every flag --some-name takes its default from the environment variable SEEDFLEET_SOME_NAME when that is "
    "set and not empty (bools: 1/0/true/false/yes/no; tuples: comma-separated); a flag given here still wins."
)


def env_name(field_name: str) -> str:
    """The environment variable of the flag for `field_name`: SEEDFLEET_SOME_NAME for some_name."""
    return ENV_PREFIX + field_name.upper()


def env_setting(field_name: str, like: object) -> object | None:
    """The value of SEEDFLEET_<FIELD_NAME> typed like `like`, or None when it is unset or empty.

    A value that does not parse ends the program with a message naming the variable.
    """
    var = env_name(field_name)
    raw = os.environ.get(var, "")
    if not raw.strip():
        return None
    try:
        return parse_setting(raw, like)
    except ValueError as error:
        flag = "--" + field_name.replace("_", "-")
        raise SystemExit(f"seedfleet: environment variable {var}={raw!r} {error} (it sets {flag})") from None


def _help_texts(cls) -> dict[str, str]:
    """Each field's help: the comment beside it, or else the comment lines right above it, read
    in the source of the dataclass that declares it (a base class's fields in the base's)."""
    helps: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        above: list[str] = []
        for line in inspect.getsource(klass).splitlines():
            comment = re.match(r"^\s+#\s?(.*)$", line)
            field = re.match(r"^\s+(\w+):[^#\n]*(?:#\s*(.+))?$", line)
            if comment:
                above.append(comment.group(1).strip())
            elif field:
                helps[field.group(1)] = field.group(2) or " ".join(above)
                above = []
            else:
                above = []
    return helps


def add_flags(parser: argparse.ArgumentParser, cls, taken: set[str], defaults: dict | None = None) -> None:
    """Adds one flag per field of dataclass `cls`; `taken` guards against name clashes.

    `defaults` replaces some fields' defaults (the task's defaults, shown as such in --help);
    a SEEDFLEET_* environment variable replaces both, and --help says so.
    """
    helps = _help_texts(cls)
    group = parser.add_argument_group(cls.__name__)
    for field in dataclasses.fields(cls):
        if field.name in taken:
            raise ValueError(f"flag --{field.name} is defined twice")
        taken.add(field.name)
        flag = "--" + field.name.replace("_", "-")
        default = (defaults or {}).get(field.name, field.default)
        from_env = env_setting(field.name, field.default)
        if from_env is not None:
            default = from_env
        shown = "unset" if isinstance(default, float) and math.isnan(default) else default
        if isinstance(default, tuple):
            shown = " ".join(str(v) for v in default)
        source = f", from {env_name(field.name)}" if from_env is not None else ""
        help_text = f"{helps.get(field.name, '')} (default: {shown}{source})".lstrip()
        if isinstance(default, bool):
            group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction,
                               default=default, help=help_text)
        elif isinstance(default, tuple):
            group.add_argument(flag, dest=field.name, nargs="+", type=type(default[0]),
                               default=default, help=help_text)
        else:
            group.add_argument(flag, dest=field.name, type=type(field.default), default=default, help=help_text)


def from_flags(cls, args: argparse.Namespace):
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
