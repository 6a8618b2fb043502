"""Issue #15 (listeners): with ``controller.listener.names`` naming a listener of ``listeners``,
the Raft RPCs, broker registration and heartbeats, AlterPartition, forwarded requests and Fetch of
the metadata log are served on that listener only. A 3-node cluster (combined roles, each node a
PLAINTEXT client listener and a CONTROLLER listener): a client on the client listener cannot vote,
fetch the metadata log as a voter or register a broker — its connection is closed — while the
quorum and the clients on the client listener go on undisturbed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from broker.controller.forwarding import FORWARD_CLIENT_ID
from broker.raft.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, VoteRequest
from broker.raft.rpc import request_to_wire
from pyspark_log.embedded_cluster import CLUSTER_ID, EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.versions import KRAFT_CONTROLLER_APIS
from tests.integration.compat import confluent_consume, confluent_produce, numbered_records
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)
CONTROLLER_ONLY = KRAFT_CONTROLLER_APIS


def call(address: str, api_key: int, version: int, body: Mapping[str, Any], client_id: str = "attacker") -> Any:
    """One request on a fresh connection: the decoded response; OSError when the broker closes it."""
    return request(address, api_key, version, body, timeout_s=20, client_id=client_id)


def quorum_state(address: str) -> tuple[int, int]:
    """``(leader id, leader epoch)`` from DescribeQuorum (served on every listener, read-only)."""
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    part = call(address, ApiKey.DESCRIBE_QUORUM, 0, body).topics[0].partitions[0]
    return part.leader_id, part.leader_epoch


def registration(broker_id: int, cluster_id: str) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "cluster_id": cluster_id,
        "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1, "security_protocol": 0}],
        "features": [],
        "rack": None,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root = tmp_path_factory.mktemp("controller-listener")
    c = EmbeddedCluster(Path(root), brokers=NODES, combined=True, controller_listener=True)
    try:
        c.start()
        yield c
    finally:
        c.close()


def agreed(cluster: EmbeddedCluster) -> tuple[int, int] | None:
    states = {quorum_state(cluster.address(n)) for n in NODES}
    state = states.pop() if len(states) == 1 else None
    return state if state is not None and state[0] >= 0 else None


def test_client_listener_refuses_every_controller_rpc_and_the_quorum_is_undisturbed(
    cluster: EmbeddedCluster,
) -> None:
    leader, epoch = wait_until(lambda: agreed(cluster), "a leader all three agree on")
    follower = next(n for n in NODES if n != leader)
    client = cluster.address(leader)
    forged = [
        request_to_wire(VoteRequest(CLUSTER_ID, epoch + 5, follower, epoch, 1 << 40)),
        request_to_wire(BeginQuorumEpochRequest(CLUSTER_ID, follower, epoch + 5)),
        request_to_wire(EndQuorumEpochRequest(CLUSTER_ID, leader, leader, epoch, (follower,))),
        # a voter's Fetch far ahead would move the high watermark if it were served
        request_to_wire(FetchRequest(CLUSTER_ID, follower, 0, epoch, 1 << 40, epoch)),
        (ApiKey.BROKER_REGISTRATION, 0, registration(99, CLUSTER_ID)),
        (
            ApiKey.BROKER_HEARTBEAT,
            0,
            {
                "broker_id": leader,
                "broker_epoch": 0,
                "current_metadata_offset": 0,
                "want_fence": True,
                "want_shut_down": True,
            },
        ),
    ]
    for api_key, version, body in forged:
        with pytest.raises(OSError):
            call(client, api_key, version, body)
    topic_request = {
        "topics": [{"name": "forged", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    with pytest.raises(OSError):
        call(client, ApiKey.CREATE_TOPICS, 7, topic_request, client_id=FORWARD_CLIENT_ID)

    # the client listener does not even advertise them; the controller listener does
    on_client = {
        k.api_key
        for k in call(
            client, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        ).api_keys
    }
    on_controller = {
        k.api_key
        for k in call(
            cluster.controller_address(leader),
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "t", "client_software_version": "1"},
        ).api_keys
    }

    assert not on_client & CONTROLLER_ONLY
    assert {ApiKey.VOTE, ApiKey.BROKER_REGISTRATION} <= on_controller

    # the same RPCs are served on the controller listener (here: refused for the cluster id, harmlessly)
    wrong = request_to_wire(VoteRequest("another-cluster", epoch + 5, follower, epoch, 1 << 40))
    answer = call(cluster.controller_address(leader), *wrong)
    assert answer.error_code == 104  # INCONSISTENT_CLUSTER_ID
    reg = call(cluster.controller_address(leader), ApiKey.BROKER_REGISTRATION, 0, registration(98, "another"))
    assert reg.error_code == 104

    # nothing moved: same leader and epoch everywhere, no broker 99, every node up and serving clients
    assert wait_until(lambda: agreed(cluster), "the quorum still agreeing") == (leader, epoch)
    assert all(cluster.nodes[n].running for n in NODES)
    metadata = call(
        client,
        ApiKey.METADATA,
        12,
        {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    assert sorted(b.node_id for b in metadata.brokers) == list(NODES)
    assert {b.port for b in metadata.brokers} == {int(cluster.address(n).rsplit(":", 1)[1]) for n in NODES}
    assert "forged" not in {t.name for t in metadata.topics}
    records = numbered_records("ctl", 0, 20)
    bootstrap = cluster.bootstrap()
    acked = confluent_produce(bootstrap, "after-forgery", records)
    assert len(acked) == 20
    got = confluent_consume(bootstrap, "after-forgery", 20)
    assert [g.value for g in got] == [r.value for r in records]


def test_describe_cluster_names_the_controllers_on_the_controller_listener(cluster: EmbeddedCluster) -> None:
    """KIP-919 (``bootstrap.controllers``, ``kafka-metadata-quorum --bootstrap-controller``):
    DescribeCluster with ``endpoint_type`` 2 on the controller listener answers the voters'
    controller endpoints; on the client listener MISMATCHED_ENDPOINT_TYPE, as a Kafka broker."""
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    answer = call(cluster.controller_address(1), ApiKey.DESCRIBE_CLUSTER, 1, body)
    assert (answer.error_code, answer.endpoint_type, answer.cluster_id) == (0, 2, CLUSTER_ID)
    voters = {b.broker_id: f"{b.host}:{b.port}" for b in answer.brokers}
    assert voters == {n: cluster.controller_address(n) for n in NODES}
    assert answer.controller_id in NODES
    refused = call(cluster.address(1), ApiKey.DESCRIBE_CLUSTER, 1, body)
    assert refused.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    brokers = call(cluster.address(1), ApiKey.DESCRIBE_CLUSTER, 1, {**body, "endpoint_type": 1})
    assert {b.broker_id: f"{b.host}:{b.port}" for b in brokers.brokers} == {n: cluster.address(n) for n in NODES}
