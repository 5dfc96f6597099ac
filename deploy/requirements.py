"""`python requirements.py EXTRA [PYPROJECT]`: the requirements of one extra of pyproject.toml, one a line.

The images install these in a layer of their own before the code goes in, so that a change of
code reuses the installed TensorFlow. The project's own dependencies come first; an extra that
names the project (seedfleet[actor]) brings in that extra's requirements. Standard library only:
it runs before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def requirements(project: dict, extra: str) -> list[str]:
    """The requirement strings `pip install ".[extra]"` asks for besides the project itself."""
    extras = project.get("optional-dependencies", {})
    if extra not in extras:
        raise SystemExit(f"requirements.py: no extra {extra!r}; pyproject.toml has {', '.join(extras)}")
    found = list(project.get("dependencies", []))
    self_reference = re.compile(rf"{re.escape(project['name'])}\[([^\]]+)\]")

    def add(name: str) -> None:
        for requirement in extras[name]:
            nested = self_reference.fullmatch(requirement.strip())
            if nested:
                for inner in nested.group(1).split(","):
                    add(inner.strip())
            elif requirement not in found:
                found.append(requirement)

    add(extra)
    return found


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        raise SystemExit(__doc__.splitlines()[0])
    pyproject = Path(argv[1] if len(argv) == 2 else "pyproject.toml")
    project = tomllib.loads(pyproject.read_text())["project"]
    print("\n".join(requirements(project, argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
