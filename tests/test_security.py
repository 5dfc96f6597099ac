"""TLS, mTLS and the shared token on real learners (loopback only), the rule against
plaintext with no token off loopback, and who may end a run on its target."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest
from conftest import Proc, seedfleet, start_learner

from seedfleet.actor_client.actor import Actor, ActorConfig
from seedfleet.deploy.certs import make_credentials
from seedfleet.deploy.healthcheck import check
from seedfleet.errors import UsageError
from seedfleet.security import channel_credentials, is_local_address, is_local_peer, token_metadata
from seedfleet.server.actor_port import secure_server
from seedfleet.server.config import LearnerConfig
from seedfleet.server.metrics import Metrics
from seedfleet.v1 import actor_learner_pb2 as pb
from seedfleet.v1 import actor_learner_pb2_grpc as pb_grpc
from seedfleet.wire import PROTOCOL_VERSION


@pytest.fixture(scope="module")
def creds(tmp_path_factory):
    """Two sets of development credentials: the learner's, and another CA's with another token."""
    good, other = tmp_path_factory.mktemp("good"), tmp_path_factory.mktemp("other")
    make_credentials(good)
    make_credentials(other)
    return good, other


def first_reply(address: str, credentials: grpc.ChannelCredentials | None = None, token: str | None = None):
    """Says Hello on one Act stream and returns the learner's first reply (or raises its RpcError)."""
    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        hello = pb.Hello(run_id=7, num_envs=2, protocol_version=PROTOCOL_VERSION)
        replies = pb_grpc.LearnerStub(channel).Act(iter([pb.ActorMessage(hello=hello)]),
                                                   metadata=token_metadata(token), timeout=20)
        return next(replies)


def refused_with(code: grpc.StatusCode, address: str, credentials=None, token=None) -> str:
    with pytest.raises(grpc.RpcError) as error:
        first_reply(address, credentials, token)
    assert error.value.code() == code, error.value
    return error.value.details()


def connected(learner: Proc) -> int:
    return sum("actor connected" in line for line in learner.lines)


@pytest.fixture(scope="module")
def tls_learner(creds):
    """TLS and a token, no client certificates."""
    good, _ = creds
    learner, address = start_learner("--env", "CartPole-v1", "--tls-cert", str(good / "learner.pem"),
                                     "--tls-key", str(good / "learner.key"), "--token-file", str(good / "token"))
    yield learner, address
    learner.stop()


def test_tls_and_token_admit_good_credentials_and_refuse_the_rest(creds, tls_learner):
    good, other = creds
    learner, address = tls_learner
    token, wrong_token = (d.joinpath("token").read_text().strip() for d in (good, other))
    tls = channel_credentials(str(good / "ca.pem"), "", "")
    before = connected(learner)
    assert first_reply(address, tls, token).config.env_id == "CartPole-v1"
    assert "token" in refused_with(grpc.StatusCode.UNAUTHENTICATED, address, tls, wrong_token)
    refused_with(grpc.StatusCode.UNAUTHENTICATED, address, tls, None)
    refused_with(grpc.StatusCode.UNAVAILABLE, address, channel_credentials(str(other / "ca.pem"), "", ""), token)
    refused_with(grpc.StatusCode.UNAVAILABLE, address, None, token)  # plaintext to a TLS port
    learner.wait_for("actor gone")
    assert connected(learner) == before + 1  # only the good stream got as far as a handshake
    assert sum("refused a call" in line for line in learner.lines) >= 2
    # Probes carry no token: the health service answers without one.
    assert check(address, tls_ca=str(good / "ca.pem")) == "SERVING"


def test_a_real_actor_with_credentials_is_served_and_one_with_a_wrong_token_exits_2(creds, tls_learner, procs):
    good, other = creds
    learner, address = tls_learner
    ok = Proc(seedfleet("actor", "--learner", address, "--envs", "2", "--tls-ca", str(good / "ca.pem"),
                        "--token-file", str(good / "token"), "--log-interval-s", "0"))
    wrong = Proc(seedfleet("actor", "--learner", address, "--envs", "2", "--tls-ca", str(good / "ca.pem"),
                           "--token-file", str(other / "token"), "--log-interval-s", "0"))
    procs.extend([ok, wrong])
    ok.wait_for("connected to")
    assert wrong.popen.wait(30) == 2
    assert "UNAUTHENTICATED" in wrong.output() or "token" in wrong.output()
    assert ok.popen.poll() is None


def test_mtls_needs_a_client_certificate_from_the_learners_ca(creds, procs):
    good, other = creds
    learner, address = start_learner("--env", "CartPole-v1", "--tls-cert", str(good / "learner.pem"),
                                     "--tls-key", str(good / "learner.key"), "--tls-client-ca", str(good / "ca.pem"))
    procs.append(learner)
    ca = str(good / "ca.pem")
    assert first_reply(address, channel_credentials(ca, str(good / "actor.pem"), str(good / "actor.key"))).config
    refused_with(grpc.StatusCode.UNAVAILABLE, address, channel_credentials(ca, "", ""))  # no certificate
    refused_with(grpc.StatusCode.UNAVAILABLE, address,  # a certificate from another CA
                 channel_credentials(ca, str(other / "actor.pem"), str(other / "actor.key")))
    refused_with(grpc.StatusCode.UNAVAILABLE, address, None)
    learner.wait_for("actor gone")
    assert connected(learner) == 1


def bind(config: LearnerConfig) -> tuple[int, bool]:
    """secure_server's (port, credentialed) for `config`; the server is stopped again."""
    async def bound():
        server, port, credentialed = secure_server(config, [])
        await server.stop(None)
        return port, credentialed
    return asyncio.run(bound())


def test_plaintext_with_no_token_is_refused_off_loopback_unless_insecure(creds):
    good, _ = creds
    with pytest.raises(UsageError, match="--insecure"):
        bind(LearnerConfig(address="0.0.0.0:0"))
    with pytest.raises(UsageError, match="--insecure"):
        Actor(ActorConfig(learner="192.0.2.1:8470"))
    assert bind(LearnerConfig(address="0.0.0.0:0", insecure=True))[1] is False
    assert bind(LearnerConfig(address="0.0.0.0:0", token_file=str(good / "token")))[1] is True
    assert bind(LearnerConfig(address="127.0.0.1:0"))[0] > 0
    Actor(ActorConfig(learner="192.0.2.1:8470", token_file=str(good / "token")))
    with pytest.raises(UsageError, match="go together"):
        bind(LearnerConfig(tls_cert=str(good / "learner.pem")))
    with pytest.raises(UsageError, match="--target-from"):
        bind(LearnerConfig(address="127.0.0.1:0", target_from="anyone"))
    assert [is_local_address(a) for a in ("127.0.0.1:1", "localhost:1", "[::1]:1", "unix:/tmp/s", "[::]:1",
                                          "0.0.0.0:1", "10.1.2.3:1", "learner:1")] == [True] * 4 + [False] * 4
    assert [is_local_peer(p) for p in ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/tmp/s",
                                       "ipv4:10.0.0.2:5000", "ipv6:[2001:db8::1]:5000")] == [True] * 3 + [False] * 2


def test_only_trusted_streams_episodes_can_reach_the_target():
    metrics = Metrics(frame_skip=1)
    returns, lengths = np.full(100, 500.0), np.full(100, 10)
    evaluation = np.ones(100, bool)
    metrics.add_inference(0, 100, returns, lengths, evaluation, trusted=np.zeros(100, bool))
    assert metrics.mean_eval_return() == 500.0 and not metrics.target_reached(475)  # reported, not counted
    metrics.add_inference(0, 99, returns[:99], lengths[:99], evaluation[:99], trusted=np.ones(99, bool))
    assert not metrics.target_reached(475)  # 99 trusted episodes: the window is not full yet
    metrics.add_inference(0, 1, returns[:1], lengths[:1], evaluation[:1], trusted=np.ones(1, bool))
    assert metrics.target_reached(475)
