"""OffsetForLeaderEpoch answers for epochs the leader knows, older ones and newer ones (Kafka
``LeaderEpochFileCache.endOffsetFor``; the newer-epoch case found by tests/differential)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.offset_for_leader_epoch import handle_offset_for_leader_epoch
from broker.network.connection import ConnectionContext
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from pyspark_log.wire import ApiKey
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message


def answer(requested_epoch: int) -> tuple[int, int, int]:
    hosted = SimpleNamespace(
        epochs=LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 10)]), log=SimpleNamespace(log_end_offset=25)
    )
    broker: Any = SimpleNamespace(replicas=SimpleNamespace(leader_partition=lambda topic, partition, current: hosted))
    partition = Message(partition=0, current_leader_epoch=-1, leader_epoch=requested_epoch)
    body = Message(replica_id=-1, topics=[Message(topic="t", partitions=[partition])])
    request = Request(RequestHeader(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, 1, "c"), body, ConnectionContext("p", "L", 1))
    part = handle_offset_for_leader_epoch(broker, request)["topics"][0]["partitions"][0]
    return part["error_code"], part["leader_epoch"], part["end_offset"]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (3, (0, 3, 25)),  # the latest epoch: the log end
        (2, (0, 1, 10)),  # unknown, between: the largest below it, ending where the next starts
        (1, (0, 1, 10)),
        (0, (0, 0, 0)),  # older than every epoch: it ends where the first starts
        (4, (0, -1, -1)),  # newer than the latest: undefined, as Kafka
        (-1, (0, -1, -1)),
    ],
)
def test_end_offsets_by_requested_epoch(requested: int, expected: tuple[int, int, int]) -> None:
    assert answer(requested) == expected
