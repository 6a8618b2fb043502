"""DescribeCluster's ``endpoint_type`` (KIP-919, ``broker.api.admin.handle_describe_cluster``): 1
answers the brokers, 2 the controllers on a node and listener that serve the quorum (the voters of
``controller.quorum.voters``, the quorum leader as controller id), MISMATCHED_ENDPOINT_TYPE where
no quorum is served, UNSUPPORTED_ENDPOINT_TYPE for an unknown type."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.api.admin import handle_describe_cluster
from broker.api.context import Request
from broker.config import BrokerConfig
from broker.network.connection import ConnectionContext
from broker.raft.config import parse_quorum_voters
from broker.security.listeners import ListenerPolicy
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message

VOTERS = "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"


class Image:
    cluster_id = "test-cluster"
    controller_id = 2

    def __init__(self) -> None:
        endpoint = SimpleNamespace(node_id=2, rack=None, endpoint=lambda listener: ("127.0.0.1", 9092))
        self.brokers = {2: endpoint}


VOTER_ENDPOINTS = {v.voter_id: (v.host, v.port) for v in parse_quorum_voters(VOTERS).values()}  # the set in effect


def broker(
    *, roles: str = "broker,controller", node_id: int = 2, raft: bool = True,
    controller_listeners: frozenset[str] = frozenset(),
) -> Any:  # fmt: skip
    config = BrokerConfig.from_mapping(
        {"process.roles": roles, "node.id": str(node_id), "controller.quorum.voters": VOTERS}, warn_unknown=False
    )
    image = Image()
    return SimpleNamespace(
        config=config,
        raft=SimpleNamespace(leader_id=3, voter_endpoints=lambda: VOTER_ENDPOINTS) if raft else None,
        listener_policy=ListenerPolicy(controller_listeners),
        image=lambda: image,
    )


def call(target: Any, endpoint_type: int, listener: str = "PLAINTEXT") -> dict[str, Any]:
    header = RequestHeader(ApiKey.DESCRIBE_CLUSTER, 1, 1, "c")
    body = Message(include_cluster_authorized_operations=False, endpoint_type=endpoint_type)
    return dict(handle_describe_cluster(target, Request(header, body, ConnectionContext("p", listener, 1))))


def test_brokers_are_answered_as_before():
    answer = call(broker(), 1)
    assert (answer["error_code"], answer["endpoint_type"], answer["controller_id"]) == (0, 1, 2)
    assert [(b["broker_id"], b["port"]) for b in answer["brokers"]] == [(2, 9092)]


def test_controllers_are_the_voters_and_the_quorum_leader():
    answer = call(broker(), 2)
    assert (answer["error_code"], answer["endpoint_type"], answer["controller_id"]) == (0, 2, 3)
    assert [(b["broker_id"], b["host"], b["port"]) for b in answer["brokers"]] == [
        (1, "127.0.0.1", 9101),
        (2, "127.0.0.1", 9102),
        (3, "127.0.0.1", 9103),
    ]
    on_controller_listener = call(broker(controller_listeners=frozenset({"CONTROLLER"})), 2, "CONTROLLER")
    assert on_controller_listener["endpoint_type"] == 2
    assert len(on_controller_listener["brokers"]) == 3


def test_controllers_asked_where_no_quorum_is_served_is_a_mismatch():
    for target, listener in [
        (broker(roles="broker", node_id=4), "PLAINTEXT"),  # a broker-only node
        (broker(controller_listeners=frozenset({"CONTROLLER"})), "PLAINTEXT"),  # the client listener
        (broker(raft=False), "PLAINTEXT"),  # no KRaft quorum at all
    ]:
        answer = call(target, 2, listener)
        assert answer["error_code"] == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        assert answer["brokers"] == []
        assert "CONTROLLER" in answer["error_message"]


def test_an_unknown_endpoint_type_is_unsupported():
    answer = call(broker(), 7)
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert answer["error_message"] == "Unsupported endpoint type 7"
