"""DescribeProducers (61, KIP-664) through the generated codecs: a partition's producer state as
``kafka-transactions.sh describe-producers`` reads it, from the leader and from a follower."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.txn_admin import handle_describe_producers
from broker.network.connection import ConnectionContext
from broker.replication.replica_manager import ReplicaManager
from pyspark_log.wire import ApiKey, ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import (
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
)
from tests.unit.log.helpers import T0_MS, FakeClock, batch
from tests.unit.replication.test_replica_manager import TOPIC, Node, image

pytestmark = pytest.mark.unit


class FakeBroker:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.replicas: ReplicaManager = node.replicas

    def image(self) -> Any:
        return self.node.current


def describe(node: Node, topics: list[dict[str, Any]]) -> Message:
    api, version = ApiKey.DESCRIBE_PRODUCERS, 0
    body = decode_request_body(api, version, encode_request_body(api, version, {"topics": topics}))
    request = Request(RequestHeader(api, version, 1, "c", 2), body, ConnectionContext("127.0.0.1:1", "PLAINTEXT", 1))
    result = handle_describe_producers(FakeBroker(node), request)  # type: ignore[arg-type]
    return decode_response_body(api, version, encode_response_body(api, version, result))


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Node]:
    node = Node(tmp_path, 1, FakeClock())
    node.set_image(image(1))
    node.replicas.append(TOPIC, 0, batch(2))  # no producer id: not listed
    node.replicas.append(TOPIC, 0, batch(3, producer_id=7, producer_epoch=2, base_sequence=0))
    node.replicas.append(TOPIC, 0, batch(2, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    yield node
    node.close()


def test_every_producer_with_its_open_transaction(leader: Node) -> None:
    resp = describe(leader, [{"name": TOPIC, "partition_indexes": [0]}])
    (part,) = resp.topics[0].partitions
    assert part.error_code == ErrorCode.NONE
    got = [
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in part.active_producers
    ]
    assert got == [(7, 2, 2, T0_MS, -1, -1), (9, 0, 1, T0_MS, -1, 5)]


def test_a_follower_answers_too_and_unknown_partitions_are_named(tmp_path: Path, leader: Node) -> None:
    follower = Node(tmp_path, 2, FakeClock())
    try:
        follower.set_image(image(1))
        read = leader.replicas.read_for_follower(2, TOPIC, 0, 0, 1 << 20, current_leader_epoch=0, last_fetched_epoch=-1)
        follower.partition.append_as_follower(read.records.read_bytes())
        resp = describe(
            follower, [{"name": TOPIC, "partition_indexes": [0, 5]}, {"name": "nope", "partition_indexes": [0]}]
        )
        mine, missing = resp.topics[0].partitions
        assert [p.producer_id for p in mine.active_producers] == [7, 9]
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert resp.topics[1].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        follower.close()
