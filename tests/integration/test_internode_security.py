"""Issue #15 (inter-node security): a 3-node KRaft cluster (combined roles) whose controller listener
is SASL_SSL (PLAIN, the nodes log in with ``listener.name.controller.plain.sasl.jaas.config``'s
``username``/``password``) and whose inter-broker listener is SSL with ``ssl.client.auth=required``
(the nodes present their keystore as client certificate). It forms and elects over SASL_SSL,
registers and forwards over it, replicates over mTLS (acks=all, RF 3, confluent-kafka), and
survives a SIGKILL of a leader. A client connection on the client listener cannot vote, fetch the
metadata log or register a broker, and a connection to the controller listener with wrong
credentials (or none) is refused cleanly while the cluster keeps working. The SASL sessions last
6 s (``connections.max.reauth.ms``): the nodes renew their connections and are never cut off.
The authorizer is on: the nodes' own principals are super users, and a valid login on the
controller listener without CLUSTER_ACTION gets CLUSTER_AUTHORIZATION_FAILED for every quorum RPC.
Certificates are made at test time (tests/tls_certs.py).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from broker.network.dial import AuthenticationError, Dialer
from broker.raft.messages import BeginQuorumEpochRequest, FetchRequest, VoteRequest
from broker.raft.rpc import request_to_wire
from broker.security.outbound import OutboundSecurity, SaslLogin
from pyspark_log.embedded_cluster import CLUSTER_ID, EmbeddedCluster, PartitionView, partitions, request
from pyspark_log.wire import ApiKey, decode_response, encode_request
from tests.integration.compat import confluent_consume, confluent_produce, numbered_records
from tests.tls_certs import Certs, make_certs
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)
PASSWORD = "controller-secret-71c"
MALLORY_PASSWORD = "mallory-secret-9d2"  # a valid login on the controller listener, without CLUSTER_ACTION
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="controller" password="{PASSWORD}" user_controller="{PASSWORD}" user_mallory="{MALLORY_PASSWORD}";'
)
TOPIC = "secured-rf3"
DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[EmbeddedCluster]:
    overrides = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.node.both),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",  # the inter-broker (and client) listener: mTLS
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": JAAS,
        "default.replication.factor": "3",
        # KIP-368 on the controller listener: the nodes' own logins expire every 6 s and their
        # connections are renewed before the controllers would cut them off
        "connections.max.reauth.ms": "6000",
        # ACLs: the nodes' own principals (the SASL login on the controller listener, the node
        # certificate on the inter-broker listener) and the test's client are super users; mallory
        # may log in on the controller listener but holds no CLUSTER_ACTION
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:controller;User:CN=localhost,OU=brokers,O=pylog;User:CN=alice,OU=eng,O=pylog",
    }
    root = Path(tmp_path_factory.mktemp("internode"))
    c = EmbeddedCluster(
        root, brokers=NODES, combined=True, controller_listener=True, overrides=overrides,
        client_protocol="SSL", controller_protocol="SASL_SSL",
    )  # fmt: skip
    try:
        c.start()
        yield c
    finally:
        c.close()


def client_tls(certs: Certs) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.alice.cert), str(certs.alice.key))
    return ctx


def librdkafka(certs: Certs) -> dict[str, str]:
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.alice.cert),
        "ssl.key.location": str(certs.alice.key),
    }


def call(address: str, certs: Certs, api_key: int, version: int, body: Mapping[str, Any], **kw: Any) -> Any:
    return request(address, api_key, version, body, timeout_s=20, ssl_context=client_tls(certs), **kw)


def quorum_state(cluster: EmbeddedCluster, certs: Certs, node: int) -> tuple[int, int]:
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    part = call(cluster.address(node), certs, ApiKey.DESCRIBE_QUORUM, 0, body).topics[0].partitions[0]
    return part.leader_id, part.leader_epoch


def agreed(cluster: EmbeddedCluster, certs: Certs, nodes: tuple[int, ...] = NODES) -> tuple[int, int] | None:
    try:
        states = {quorum_state(cluster, certs, n) for n in nodes}
    except OSError:
        return None
    state = states.pop() if len(states) == 1 else None
    return state if state is not None and state[0] >= 0 else None


def view(cluster: EmbeddedCluster, certs: Certs, via: int) -> PartitionView | None:
    try:
        return partitions(cluster.address(via), TOPIC, ssl_context=client_tls(certs)).get(0)
    except OSError:
        return None


def create_topic(cluster: EmbeddedCluster, certs: Certs) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **librdkafka(certs)})
    futures = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})], request_timeout=60)
    futures[TOPIC].result(timeout=90)


def test_cluster_forms_over_sasl_ssl_and_replicates_over_mtls(cluster: EmbeddedCluster, certs: Certs) -> None:
    leader, _ = wait_until(lambda: agreed(cluster, certs), "a quorum leader all three agree on", timeout_s=DEADLINE_S)
    assert leader in NODES
    create_topic(cluster, certs)  # forwarded to the active controller over SASL_SSL unless it is the one asked
    full = wait_until(
        lambda: (v := view(cluster, certs, 1)) is not None and len(v.isr) == 3 and v,
        "three in-sync replicas (the followers fetch over mTLS)",
        timeout_s=DEADLINE_S,
    )
    assert sorted(full.replicas) == list(NODES)
    records = numbered_records("sec", 0, 200)
    assert len(confluent_produce(cluster.bootstrap(), TOPIC, records, acks=-1, **librdkafka(certs))) == 200
    got = confluent_consume(cluster.bootstrap(), TOPIC, 200, **librdkafka(certs))
    assert [g.value for g in got] == [r.value for r in records]


def registration(broker_id: int) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "cluster_id": CLUSTER_ID,
        "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "SSL", "host": "127.0.0.1", "port": 1, "security_protocol": 1}],
        "features": [],
        "rack": None,
    }


def test_client_listener_cannot_vote_fetch_the_metadata_log_or_register(cluster: EmbeddedCluster, certs: Certs) -> None:
    leader, epoch = wait_until(lambda: agreed(cluster, certs), "a quorum leader", timeout_s=DEADLINE_S)
    follower = next(n for n in NODES if n != leader)
    forged = [
        request_to_wire(VoteRequest(CLUSTER_ID, epoch + 5, follower, epoch, 1 << 40)),
        request_to_wire(BeginQuorumEpochRequest(CLUSTER_ID, follower, epoch + 5)),
        request_to_wire(FetchRequest(CLUSTER_ID, follower, 0, epoch, 1 << 40, epoch)),
        (ApiKey.BROKER_REGISTRATION, 0, registration(99)),
    ]
    for api_key, version, body in forged:  # an authenticated mTLS client, on the client listener
        with pytest.raises(OSError):
            call(cluster.address(leader), certs, api_key, version, body)
    assert wait_until(lambda: agreed(cluster, certs), "the quorum undisturbed", timeout_s=DEADLINE_S) == (leader, epoch)


def _frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4:]


def _controller_socket(cluster: EmbeddedCluster, certs: Certs, node: int) -> ssl.SSLSocket:
    host, port = cluster.controller_address(node).rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=20)
    return ssl.create_default_context(cafile=str(certs.ca)).wrap_socket(raw, server_hostname=host)


def test_wrong_credentials_on_the_controller_listener_are_refused_and_the_cluster_keeps_working(
    cluster: EmbeddedCluster, certs: Certs
) -> None:
    leader, epoch = wait_until(lambda: agreed(cluster, certs), "a quorum leader", timeout_s=DEADLINE_S)
    follower = next(n for n in NODES if n != leader)
    with _controller_socket(cluster, certs, leader) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "intruder", {"mechanism": "PLAIN"}))
        frame = _frame(sock)
        assert frame is not None
        assert decode_response(ApiKey.SASL_HANDSHAKE, 1, frame)[1].error_code == 0
        token = b"\0controller\0not-the-password"
        sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 2, 2, "intruder", {"auth_bytes": token}))
        frame = _frame(sock)
        assert frame is not None
        answer = decode_response(ApiKey.SASL_AUTHENTICATE, 2, frame)[1]
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert _frame(sock) is None  # then closed
    with _controller_socket(cluster, certs, leader) as sock:  # no login at all: a Vote closes the connection
        api_key, version, body = request_to_wire(VoteRequest(CLUSTER_ID, epoch + 5, follower, epoch, 1 << 40))
        sock.sendall(encode_request(api_key, version, 1, "intruder", body))
        assert _frame(sock) is None

    async def dial(password: str, ca: str | None = str(certs.ca)) -> int:
        login = SaslLogin("PLAIN", "controller", password)
        tls = ssl.create_default_context(cafile=ca)
        dialer = Dialer(OutboundSecurity("CONTROLLER", "SASL_SSL", tls, login), client_id="test")
        host, port = cluster.controller_address(leader).rsplit(":", 1)
        reader, writer = await dialer(host, int(port))
        try:
            body = {"client_software_name": "t", "client_software_version": "1"}
            writer.write(encode_request(ApiKey.API_VERSIONS, 3, 7, "test", body))
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            return int(decode_response(ApiKey.API_VERSIONS, 3, await reader.readexactly(size))[1].error_code)
        finally:
            writer.close()

    with pytest.raises(AuthenticationError, match="SASL_AUTHENTICATION_FAILED") as caught:
        asyncio.run(dial("wrong"))
    assert "wrong" not in str(caught.value).replace("SASL", "")
    assert asyncio.run(dial(PASSWORD)) == 0  # the nodes' own login, through the shared dial function
    with pytest.raises(ssl.SSLCertVerificationError):  # a peer certificate our truststore does not trust
        asyncio.run(dial(PASSWORD, ca=None))

    assert wait_until(lambda: agreed(cluster, certs), "the quorum undisturbed", timeout_s=DEADLINE_S) == (leader, epoch)
    assert "after its SASL session expired" not in cluster.outputs()  # no node's own connection was cut off
    records = numbered_records("after", 1000, 20)
    assert len(confluent_produce(cluster.bootstrap(), "after-intrusion", records, **librdkafka(certs))) == 20
    got = confluent_consume(cluster.bootstrap(), "after-intrusion", 20, **librdkafka(certs))
    assert [g.value for g in got] == [r.value for r in records]


def test_a_valid_login_without_cluster_action_cannot_vote_fetch_or_register_on_the_controller_listener(
    cluster: EmbeddedCluster, certs: Certs
) -> None:
    """Authentication is not authorization: mallory logs in on the controller listener (a PLAIN user
    of its JAAS line) but is not a super user and holds no CLUSTER_ACTION ACL, so every quorum RPC
    she sends is answered CLUSTER_AUTHORIZATION_FAILED and the quorum is undisturbed."""
    leader, epoch = wait_until(lambda: agreed(cluster, certs), "a quorum leader", timeout_s=DEADLINE_S)
    follower = next(n for n in NODES if n != leader)
    forged = [
        request_to_wire(VoteRequest(CLUSTER_ID, epoch + 5, follower, epoch, 1 << 40)),
        request_to_wire(BeginQuorumEpochRequest(CLUSTER_ID, follower, epoch + 5)),
        request_to_wire(FetchRequest(CLUSTER_ID, follower, 0, epoch, 1 << 40, epoch)),
        (ApiKey.BROKER_REGISTRATION, 0, registration(99)),
    ]

    async def as_mallory() -> list[int]:
        login = SaslLogin("PLAIN", "mallory", MALLORY_PASSWORD)
        tls = ssl.create_default_context(cafile=str(certs.ca))
        dialer = Dialer(OutboundSecurity("CONTROLLER", "SASL_SSL", tls, login), client_id="mallory")
        host, port = cluster.controller_address(leader).rsplit(":", 1)
        reader, writer = await dialer(host, int(port))
        codes = []
        try:
            for correlation, (api_key, version, body) in enumerate(forged, start=10):
                writer.write(encode_request(api_key, version, correlation, "mallory", body))
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answer = decode_response(api_key, version, await reader.readexactly(size))[1]
                codes.append(int(answer.error_code))
        finally:
            writer.close()
        return codes

    assert asyncio.run(as_mallory()) == [31] * len(forged)  # CLUSTER_AUTHORIZATION_FAILED
    assert wait_until(lambda: agreed(cluster, certs), "the quorum undisturbed", timeout_s=DEADLINE_S) == (leader, epoch)
    assert 99 not in {b.node_id for b in call(cluster.address(leader), certs, ApiKey.METADATA, 12,
                                              {"topics": [], "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False}).brokers}  # fmt: skip


def test_survives_sigkill_of_the_partition_leader(cluster: EmbeddedCluster, certs: Certs) -> None:
    before = wait_until(
        lambda: (v := view(cluster, certs, 1)) is not None and len(v.isr) == 3 and v, "a full ISR", timeout_s=DEADLINE_S
    )
    killed = before.leader
    cluster.kill(killed)
    alive = tuple(n for n in NODES if n != killed)
    wait_until(lambda: agreed(cluster, certs, alive), "a quorum leader among the survivors", timeout_s=DEADLINE_S)
    after = wait_until(
        lambda: (v := view(cluster, certs, alive[0])) is not None and v.leader in alive and killed not in v.isr and v,
        "a new partition leader and a shrunk ISR",
        timeout_s=DEADLINE_S,
    )
    assert after.leader_epoch > before.leader_epoch
    bootstrap = cluster.bootstrap()
    more = numbered_records("sec", 200, 50)
    assert len(confluent_produce(bootstrap, TOPIC, more, acks=-1, **librdkafka(certs))) == 50  # min.insync=2
    got = confluent_consume(bootstrap, TOPIC, 250, **librdkafka(certs))
    assert [g.value for g in got] == [r.value for r in numbered_records("sec", 0, 250)]
