"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log (KIP-101, KIP-279).

For each partition the leader answers the largest epoch of its leader-epoch cache not above the
requested one, and the offset where it ends: the start of the next epoch, or the log end offset
for the current epoch (``LeaderEpochCache.end_offset_for``); ``-1``/``-1`` when it knows no such
epoch, and for an epoch above every epoch it knows (Kafka ``LeaderEpochFileCache.endOffsetFor``:
no higher entry is UNDEFINED_EPOCH_OFFSET; the replication code's own use of the cache reads a
later epoch as the latest). Clients (librdkafka, the Java consumer) use it after a leader change to detect that the
log was truncated below their position (KIP-320); followers of another Kafka-protocol broker
would use it to find where to truncate. v2+ fence the caller with ``current_leader_epoch``
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); a partition led elsewhere is NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import Any

from broker.api.context import Broker, Request
from broker.replication.replica_manager import PartitionError


def handle_offset_for_leader_epoch(broker: Broker, request: Request) -> Any:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition": part.partition, "error_code": 0}
            try:
                hosted = broker.replicas.leader_partition(topic.topic, part.partition, part.current_leader_epoch)
                if part.leader_epoch > hosted.epochs.latest_epoch:
                    epoch, end = -1, -1  # Kafka: an epoch newer than the leader's latest is undefined
                else:
                    epoch, end = hosted.epochs.end_offset_for(part.leader_epoch, hosted.log.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except PartitionError as exc:
                entry.update(error_code=exc.code, leader_epoch=-1, end_offset=-1)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
