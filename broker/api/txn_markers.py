"""WriteTxnMarkers (27): a transaction coordinator asks this broker to end transactions on the
partitions it leads (KIP-98; seed 003 "정확히 한 번 전송": control messages tell readers whether a
transaction was committed or aborted).

Each marker names a producer id and epoch, COMMIT (``transaction_result`` true) or ABORT, the
coordinator epoch, and partitions. Each partition gets one control batch through
``ReplicaManager.append_control_marker`` (which ends the producer's ongoing transaction there,
moves the LSO, wakes read_committed fetches and tells the marker listeners, e.g. the group
coordinator for ``__consumer_offsets``) and its own error code: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (the producer has a newer epoch here),
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's), or
KAFKA_STORAGE_ERROR. The coordinator on this same broker calls ``append_control_marker``
directly; this API serves coordinators on other brokers.
"""

from __future__ import annotations

from typing import Any

from broker.api.context import Broker, Request
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode


def handle_write_txn_markers(broker: Broker, request: Request) -> Any:
    markers = []
    for marker in request.body.markers:
        topics = []
        for topic in marker.topics:
            partitions = [
                {"partition_index": index, "error_code": _write_one(broker, marker, topic.name, index)}
                for index in topic.partition_indexes
            ]
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": markers}


def _write_one(broker: Broker, marker: Any, topic: str, partition: int) -> int:
    try:
        broker.replicas.append_control_marker(
            topic,
            partition,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            commit=bool(marker.transaction_result),
        )
    except PartitionError as exc:
        return exc.code
    return ErrorCode.NONE
