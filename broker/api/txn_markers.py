"""WriteTxnMarkers (27): a transaction coordinator asks this broker to end transactions on the
partitions it leads (KIP-98; Kafka documentation §4.6 "Message Delivery Semantics", transactions: control
messages tell readers whether a
transaction was committed or aborted).

Each marker names a producer id and epoch, COMMIT (``transaction_result`` true) or ABORT, the
coordinator epoch, and partitions. Each partition gets one control batch through
``ReplicaManager.append_control_marker`` (which ends the producer's ongoing transaction there,
moves the LSO, wakes read_committed fetches and tells the marker listeners, e.g. the group
coordinator for ``__consumer_offsets``) and its own error code: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (the producer has a newer epoch here),
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's), or
KAFKA_STORAGE_ERROR. Markers are written as Kafka writes them, with acks=all: the answer waits
until every ISR member has them (REQUEST_TIMED_OUT after ``MARKER_TIMEOUT_MS``, and the coordinator
writes them again), so a COMMIT acknowledged to the coordinator survives a leader change. The
coordinator on this same broker calls ``append_control_marker`` directly; this API serves
coordinators on other brokers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.api.context import Broker, Request
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode

MARKER_TIMEOUT_MS = 30_000


def handle_write_txn_markers(broker: Broker, request: Request) -> Any:
    markers = []
    waiting: list[tuple[dict[str, Any], str, int]] = []
    for marker in request.body.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                code, offset = _write_one(broker, marker, topic.name, index)
                entry = {"partition_index": index, "error_code": code}
                partitions.append(entry)
                if code == ErrorCode.NONE and not broker.replicas.marker_replicated(topic.name, index, offset):
                    waiting.append((entry, topic.name, offset))
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    response = {"markers": markers}
    return _after_replication(broker, response, waiting) if waiting else response


async def _after_replication(
    broker: Broker, response: dict[str, Any], waiting: list[tuple[dict[str, Any], str, int]]
) -> dict[str, Any]:
    codes = await asyncio.gather(
        *(
            broker.replicas.wait_replicated(topic, entry["partition_index"], offset, MARKER_TIMEOUT_MS)
            for entry, topic, offset in waiting
        )
    )
    for (entry, _, _), code in zip(waiting, codes, strict=True):
        entry["error_code"] = code
    return response


def _write_one(broker: Broker, marker: Any, topic: str, partition: int) -> tuple[int, int]:
    try:
        offset = broker.replicas.append_control_marker(
            topic,
            partition,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            commit=bool(marker.transaction_result),
        )
    except PartitionError as exc:
        return exc.code, -1
    return ErrorCode.NONE, offset
