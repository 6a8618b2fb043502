"""KIP-430 authorized operations without an authorizer (found by tests/differential against Kafka
4.1.1): asked for, Metadata and DescribeCluster carry every supported operation of the resource
type, as Kafka's do (topic 3576, cluster 8096); not asked for, the "not requested" -2147483648."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.api.admin import handle_describe_cluster
from broker.api.context import Request
from broker.api.metadata import ALL_CLUSTER_OPERATIONS, ALL_TOPIC_OPERATIONS
from broker.config import BrokerConfig
from broker.network.connection import ConnectionContext
from broker.security.listeners import ListenerPolicy
from pyspark_log.wire import ApiKey
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message


def broker() -> Any:
    endpoint = SimpleNamespace(node_id=1, rack=None, endpoint=lambda listener: ("127.0.0.1", 9092))
    image = SimpleNamespace(cluster_id="c", controller_id=1, brokers={1: endpoint})
    config = BrokerConfig.from_mapping({"node.id": "1"}, warn_unknown=False)
    return SimpleNamespace(config=config, raft=None, listener_policy=ListenerPolicy(frozenset()), image=lambda: image)


def describe_cluster(include: bool) -> dict[str, Any]:
    header = RequestHeader(ApiKey.DESCRIBE_CLUSTER, 1, 1, "c")
    body = Message(include_cluster_authorized_operations=include, endpoint_type=1)
    return dict(handle_describe_cluster(broker(), Request(header, body, ConnectionContext("p", "PLAINTEXT", 1))))


def test_all_operations_are_kafkas_bit_fields() -> None:
    assert (ALL_TOPIC_OPERATIONS, ALL_CLUSTER_OPERATIONS) == (3576, 8096)


def test_describe_cluster_answers_every_cluster_operation_when_asked() -> None:
    assert describe_cluster(True)["cluster_authorized_operations"] == 8096
    assert "cluster_authorized_operations" not in describe_cluster(False)  # the schema default: not requested
