"""The learner's grpc.health.v1 service and `python -m seedfleet.deploy.healthcheck`."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
from conftest import ROOT, start_learner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seedfleet.deploy.healthcheck import LEARNER_ADDRESS, check, local_address


def healthcheck(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seedfleet.deploy.healthcheck", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, env={**os.environ, **(env or {})})


def test_wildcard_listen_addresses_are_asked_at_localhost():
    from seedfleet.server.assembly import LearnerConfig

    assert LEARNER_ADDRESS == LearnerConfig.address  # the healthcheck's default is the learner's
    assert local_address("[::]:8470") == "localhost:8470"
    assert local_address("0.0.0.0:9000") == "localhost:9000"
    assert local_address(":7") == "localhost:7"
    assert local_address("10.1.2.3:8470") == "10.1.2.3:8470"
    assert local_address("unix:/tmp/learner.sock") == "unix:/tmp/learner.sock"


def test_the_healthcheck_loads_no_tensorflow():
    """It runs in the learner's container every few seconds, and on actor hosts (.[actor] has no TensorFlow)."""
    code = "import sys, deploy.healthcheck; print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', " \
           "'server', 'algorithms'}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_health_follows_the_servers_life():
    """NOT_SERVING before serving(), SERVING, then NOT_SERVING from stopping() on, for both services asked."""
    from seedfleet.server.health import SERVICES, add_health

    async def statuses() -> list[list[str]]:
        server = grpc.aio.server()
        health = await add_health(server)
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        loop = asyncio.get_running_loop()

        async def ask() -> list[str]:
            return [await loop.run_in_executor(None, check, address, 3.0, service) for service in SERVICES]

        seen = [await ask()]
        await health.serving()
        seen.append(await ask())
        await health.stopping()
        seen.append(await ask())
        await health.serving()  # no way back once stopping
        seen.append(await ask())
        await server.stop(None)
        return seen

    assert SERVICES == ("", "seedfleet.v1.Learner")
    assert asyncio.run(statuses()) == [["NOT_SERVING"] * 2, ["SERVING"] * 2, ["NOT_SERVING"] * 2,
                                       ["NOT_SERVING"] * 2]


def test_a_real_learner_reports_serving_then_not_serving_as_it_stops(procs, tmp_path):
    learner, address = start_learner("--env", "CartPole-v1", "--logdir", str(tmp_path))
    procs.append(learner)
    asked = healthcheck(address)
    assert asked.returncode == 0 and "SERVING" in asked.stdout, asked
    port = address.rsplit(":", 1)[1]
    # No address: the one SEEDFLEET_ADDRESS tells the learner to listen on, asked at localhost.
    assert healthcheck(env={"SEEDFLEET_ADDRESS": f"[::]:{port}"}).returncode == 0
    assert healthcheck("--service", "seedfleet.v1.Learner", address).returncode == 0
    assert healthcheck("--service", "no.such.Service", address).returncode == 1

    watched: list[str] = []
    channel = grpc.insecure_channel(address)
    stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)

    def watch() -> None:
        try:
            for reply in stream:
                watched.append(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
        except grpc.RpcError:
            pass  # the server went away

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    deadline = time.monotonic() + 10
    while not watched and time.monotonic() < deadline:
        time.sleep(0.05)
    learner.popen.send_signal(signal.SIGTERM)
    assert learner.popen.wait(timeout=30) == 0, learner.output()[-2000:]
    watcher.join(timeout=10)
    channel.close()
    assert watched[:1] == ["SERVING"] and "NOT_SERVING" in watched, watched
    stopped = healthcheck(address, "--timeout-s", "1")
    assert stopped.returncode == 1 and "UNAVAILABLE" in stopped.stderr, stopped
