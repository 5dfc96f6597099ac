"""The standard gRPC health service (grpc.health.v1) on the learner's server.

Both the server as a whole (service "") and the Learner service report NOT_SERVING until
`serving()`, SERVING from then on, and NOT_SERVING again from `stopping()` on.
`python -m seedfleet.deploy.healthcheck` asks it; so do container health checks.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from seedfleet.v1 import actor_learner_pb2 as pb

SERVICES = ("", pb.DESCRIPTOR.services_by_name["Learner"].full_name)


class LearnerHealth:
    """The health servicer registered on `server` (made by add_health, before the server starts)."""

    def __init__(self, server: grpc.aio.Server):
        self.servicer = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    async def _set(self, status: int) -> None:
        for service in SERVICES:
            await self.servicer.set(service, status)

    async def serving(self) -> None:
        await self._set(health_pb2.HealthCheckResponse.SERVING)

    async def stopping(self) -> None:
        await self.servicer.enter_graceful_shutdown()


async def add_health(server: grpc.aio.Server) -> LearnerHealth:
    """Registers the health service on `server` (not started yet), reporting NOT_SERVING."""
    health = LearnerHealth(server)
    await health._set(health_pb2.HealthCheckResponse.NOT_SERVING)
    return health
