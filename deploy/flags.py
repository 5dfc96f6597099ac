"""Command-line flags made from config dataclasses, so each default is written once.

Each field `some_name: type = default  # help` becomes `--some-name`, its help text the
comment beside the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import re


def _help_texts(cls) -> dict[str, str]:
    source = inspect.getsource(cls)
    return dict(re.findall(r"^\s+(\w+):[^#\n]*#\s*(.+)$", source, flags=re.M))


def add_flags(parser: argparse.ArgumentParser, cls, taken: set[str], defaults: dict | None = None) -> None:
    """Adds one flag per field of dataclass `cls`; `taken` guards against name clashes.

    `defaults` replaces some fields' defaults (the task's defaults, shown as such in --help).
    """
    helps = _help_texts(cls)
    group = parser.add_argument_group(cls.__name__)
    for field in dataclasses.fields(cls):
        if field.name in taken:
            raise ValueError(f"flag --{field.name} is defined twice")
        taken.add(field.name)
        flag = "--" + field.name.replace("_", "-")
        default = (defaults or {}).get(field.name, field.default)
        help_text = helps.get(field.name, "")
        shown = "unset" if isinstance(default, float) and math.isnan(default) else default
        help_text = f"{help_text} (default: {shown})" if help_text else f"(default: {shown})"
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
