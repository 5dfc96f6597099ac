"""What `make images` and `make fleet` need of the container tools, checked before they run,
each missing piece named in one line (stdlib only: it runs before any install).

    python3 -m deploy.engine build   --docker docker              # an engine answers; BuildKit builds
    python3 -m deploy.engine compose --compose "docker compose"   # compose v2 answers
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys

BUILDX_SINCE = 23  # Docker's client builds through the buildx plugin from 23.0 on


class Missing(Exception):
    """A tool the target needs is not there: what to install or set."""


def _run(command: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, PermissionError, subprocess.TimeoutExpired):
        return None


def client_major(docker: list[str]) -> int:
    done = _run([*docker, "version", "--format", "{{.Client.Version}}"])
    try:
        return int(done.stdout.strip().split(".")[0]) if done else 0
    except ValueError:
        return 0


def check_build(docker: list[str]) -> str:
    """The engine's version; Missing when no engine answers, or when a client of Docker 23 or
    later lacks buildx (its `docker build` needs it once BuildKit is on)."""
    info = _run([*docker, "info", "--format", "{{.ServerVersion}}"])
    if info is None:
        raise Missing(f"'{shlex.join(docker)}' is not installed: install Docker's client and engine, "
                      "or set DOCKER= to a client that reaches one")
    if info.returncode or not info.stdout.strip():
        raise Missing(f"no Docker engine answers '{shlex.join(docker)} info' "
                      f"({(info.stderr.strip().splitlines() or ['no answer'])[-1]}): start dockerd, or set DOCKER_HOST")
    major = client_major(docker)
    buildx = _run([*docker, "buildx", "version"])
    if major >= BUILDX_SINCE and (buildx is None or buildx.returncode):
        raise Missing(f"Docker {major}'s client builds with BuildKit through the buildx plugin, which is missing: "
                      "install it (Debian and Ubuntu: docker-buildx; Docker's packages: docker-buildx-plugin)")
    return info.stdout.strip()


def check_compose(compose: list[str]) -> str:
    """Compose's version; Missing when the command is not compose v2."""
    done = _run([*compose, "version", "--short"])
    if done is None or done.returncode:
        raise Missing(f"'{shlex.join(compose)}' is not Docker Compose: install the compose plugin "
                      "(docker-compose-plugin, or docker-compose v2) or set COMPOSE= to its command")
    version = done.stdout.strip().lstrip("v")
    if not version[:1].isdigit() or int(version.split(".")[0]) < 2:
        raise Missing(f"'{shlex.join(compose)}' is Compose {version}: the compose files need v2 or later")
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("need", choices=("build", "compose"))
    parser.add_argument("--docker", default="docker", help="the docker client command")
    parser.add_argument("--compose", default="docker compose", help="the compose command")
    args = parser.parse_args(argv)
    try:
        if args.need == "build":
            check_build(shlex.split(args.docker))
        else:
            check_compose(shlex.split(args.compose))
    except Missing as missing:
        print(f"make: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
