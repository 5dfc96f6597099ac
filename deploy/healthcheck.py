"""`python -m seedfleet.deploy.healthcheck [ADDRESS]`: is the learner at ADDRESS serving?

Asks the learner's standard gRPC health service (grpc.health.v1) and exits 0 if it
answers SERVING, 1 otherwise (another status, no answer within --timeout-s, nothing
listening). Without ADDRESS it asks the address the learner is told to listen on, from
SEEDFLEET_ADDRESS like the learner itself, at localhost when that is a wildcard such as
[::]:8470: so a container's health check needs no arguments. No TensorFlow is loaded.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seedfleet.security import channel_credentials

LEARNER_ADDRESS = "[::]:8470"  # the default of `seedfleet learner --address` (seedfleet.server.config.LearnerConfig)
WILDCARD_HOSTS = ("[::]", "0.0.0.0", "")


def local_address(listen: str) -> str:
    """Where this machine reaches a server that listens on `listen` (host:port or unix:PATH)."""
    if listen.startswith("unix:"):
        return listen
    host, _, port = listen.rpartition(":")
    return f"localhost:{port}" if host in WILDCARD_HOSTS else listen


def check(address: str, timeout_s: float = 3.0, service: str = "", tls_ca: str = "", server_name: str = "") -> str:
    """The status name the health service at `address` reports for `service`, or the gRPC error's code name.
    With `tls_ca` it asks over TLS (a learner with --tls-cert), checking the certificate against that CA."""
    if tls_ca:
        options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        channel = grpc.secure_channel(address, channel_credentials(tls_ca, "", ""), options)
    else:
        channel = grpc.insecure_channel(address)
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seedfleet.deploy.healthcheck", description=__doc__.splitlines()[0])
    parser.add_argument("address", nargs="?", help="host:port or unix:PATH (default: from SEEDFLEET_ADDRESS, "
                                                   f"else {local_address(LEARNER_ADDRESS)})")
    parser.add_argument("--timeout-s", type=float, default=3.0, help="seconds to wait for the answer")
    parser.add_argument("--service", default="", help="the service asked about (default: the whole server)")
    parser.add_argument("--tls-ca", default="", help="a learner with TLS: the CA its certificate is checked against")
    parser.add_argument("--tls-server-name", default="", help="the name that certificate is checked for")
    args = parser.parse_args(argv)
    address = args.address or local_address(os.environ.get("SEEDFLEET_ADDRESS", "").strip() or LEARNER_ADDRESS)
    status = check(address, args.timeout_s, args.service, args.tls_ca, args.tls_server_name)
    print(f"{address}: {status}", file=sys.stdout if status == "SERVING" else sys.stderr)
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
