"""Transport security both sides share: TLS credentials, the shared token, and the rule
that plaintext with no token needs `--insecure` unless the port is local.

The learner's port hands out the policy and trains on whatever arrives, so anyone who
can reach it can steer a run. Three defences, which combine:
- TLS (`--tls-cert`, `--tls-key`): the stream is encrypted and the actor checks the
  learner's certificate against `--tls-ca`;
- mTLS (the learner's `--tls-client-ca`): an actor must present a certificate signed by
  that CA, or its handshake fails (UNAVAILABLE);
- a shared token (`--token-file` on both sides): actors send it as call metadata; a
  missing or wrong one gets UNAUTHENTICATED before the handshake, so no env config and
  no action reaches the peer. The health service stays open, for probes.
Plain TCP with no token is allowed on loopback and Unix sockets only, unless `--insecure`.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import grpc

from seedfleet.errors import UsageError

TOKEN_METADATA_KEY = "authorization"  # value: "Bearer <token>"


def read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise UsageError(f"{what} {path!r}: {error.strerror or error}") from error


def read_token(path: str) -> str | None:
    """The token in the file at `path` (surrounding whitespace dropped), None without a path."""
    if not path:
        return None
    token = read_file(path, "--token-file").decode("utf-8", "replace").strip()
    if not token:
        raise UsageError(f"--token-file {path!r} is empty")
    return token


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata an actor sends: the token, or nothing."""
    return ((TOKEN_METADATA_KEY, f"Bearer {token}"),) if token else ()


def is_local_address(address: str) -> bool:
    """A Unix socket, or a host:port on loopback only (not a wildcard like [::] or 0.0.0.0)."""
    if address.startswith("unix:"):
        return True
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_peer(peer: str) -> bool:
    """A gRPC peer string (ipv4:127.0.0.1:5000, ipv6:[::1]:5000, unix:...) that is this machine's loopback."""
    kind, _, rest = peer.partition(":")
    if kind == "unix":
        return True
    if kind in ("ipv4", "ipv6"):
        return is_local_address(rest)
    return False


def require_protection(address: str, tls: bool, token: bool, insecure: bool, role: str) -> None:
    """Refuses plain TCP with no token off loopback, unless `--insecure` says it is meant."""
    if tls or token or insecure or is_local_address(address):
        return
    raise UsageError(
        f"the {role} would use {address} in plaintext with no token, so anyone who reaches it "
        f"could take part: give --token-file (and --tls-* flags), or --insecure to accept that")


def server_credentials(cert: str, key: str, client_ca: str) -> grpc.ServerCredentials | None:
    """TLS for the learner's port (None without a certificate); with `client_ca`, mTLS."""
    if not cert and not key:
        if client_ca:
            raise UsageError("--tls-client-ca needs --tls-cert and --tls-key (mTLS runs over TLS)")
        return None
    if not (cert and key):
        raise UsageError("--tls-cert and --tls-key go together")
    pair = (read_file(key, "--tls-key"), read_file(cert, "--tls-cert"))
    roots = read_file(client_ca, "--tls-client-ca") if client_ca else None
    return grpc.ssl_server_credentials([pair], root_certificates=roots, require_client_auth=roots is not None)


def channel_credentials(ca: str, cert: str, key: str) -> grpc.ChannelCredentials | None:
    """TLS to the learner, checked against `ca` (None without one); `cert` and `key` for mTLS."""
    if not ca:
        if cert or key:
            raise UsageError("--tls-cert and --tls-key of an actor need --tls-ca (mTLS runs over TLS)")
        return None
    if bool(cert) != bool(key):
        raise UsageError("--tls-cert and --tls-key go together")
    return grpc.ssl_channel_credentials(
        read_file(ca, "--tls-ca"),
        private_key=read_file(key, "--tls-key") if key else None,
        certificate_chain=read_file(cert, "--tls-cert") if cert else None,
    )
