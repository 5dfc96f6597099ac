"""`python -m deploy.certs [DIR]` (`make certs`): development credentials for a fleet.

Writes into DIR (default deploy/secrets, which git ignores), with the `openssl` command:
- ca.pem, ca.key: a CA of its own, valid 825 days;
- learner.pem, learner.key: the learner's certificate, for the names given with --name
  (default: localhost, learner, 127.0.0.1 and ::1; `learner` is its compose service name);
- actor.pem, actor.key: a client certificate for actors, for a learner with --tls-client-ca;
- token: a random shared token for --token-file (mode 644: compose mounts it, as it is,
  into containers that run as a non-root user; keys stay 600).
Existing files are kept unless --force. These are for development and private networks;
production fleets take their certificates from their own CA.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_DIR = Path(__file__).parent / "secrets"
DEFAULT_NAMES = ("localhost", "learner", "127.0.0.1", "::1")
DAYS = "825"
FILES = ("ca.pem", "ca.key", "learner.pem", "learner.key", "actor.pem", "actor.key", "token")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _subject_names(names: tuple[str, ...]) -> str:
    def entry(name: str) -> str:
        try:
            ipaddress.ip_address(name)
            return f"IP:{name}"
        except ValueError:
            return f"DNS:{name}"
    return ",".join(entry(name) for name in names)


def _signed(directory: Path, name: str, common_name: str, extensions: str) -> None:
    """name.key and name.pem, signed by the CA in `directory`, with `extensions` (openssl x509v3 lines)."""
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    with tempfile.TemporaryDirectory() as tmp:
        csr, ext = Path(tmp) / "request.csr", Path(tmp) / "extensions.cnf"
        ext.write_text(extensions)
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-subj", f"/CN={common_name}", "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(directory / "ca.pem"), "-CAkey",
                 str(directory / "ca.key"), "-CAcreateserial", "-days", DAYS, "-sha256", "-extfile", str(ext),
                 "-out", str(cert))


def make_credentials(directory: Path, names: tuple[str, ...] = DEFAULT_NAMES, force: bool = False) -> list[Path]:
    """Writes the files above into `directory`; returns those it wrote."""
    if shutil.which("openssl") is None:
        raise SystemExit("deploy.certs needs the openssl command")
    directory.mkdir(parents=True, exist_ok=True)
    if not force and any((directory / f).exists() for f in FILES):
        return []
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(directory / "ca.key"), "-out", str(directory / "ca.pem"), "-days", DAYS,
             "-subj", "/CN=seedfleet development CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _signed(directory, "learner", "seedfleet learner",
            f"subjectAltName={_subject_names(names)}\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "actor", "seedfleet actor", "extendedKeyUsage=clientAuth\n")
    (directory / "token").write_text(secrets.token_urlsafe(32) + "\n")
    (directory / "ca.srl").unlink(missing_ok=True)
    for name in FILES:  # compose mounts file secrets as they are: the token must be readable by the containers' user
        os.chmod(directory / name, 0o600 if name.endswith(".key") else 0o644)
    return [directory / f for f in FILES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.certs", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--name", action="append", help="a name of the learner's certificate (repeat; "
                                                        f"default: {', '.join(DEFAULT_NAMES)})")
    parser.add_argument("--force", action="store_true", help="replace existing files")
    args = parser.parse_args(argv)
    written = make_credentials(args.directory, tuple(args.name or DEFAULT_NAMES), args.force)
    print(f"wrote {', '.join(p.name for p in written)} in {args.directory}" if written
          else f"{args.directory} already holds credentials (--force replaces them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
