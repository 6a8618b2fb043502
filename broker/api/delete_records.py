"""DeleteRecords (21): move partitions' log start offsets forward (KIP-107; kafka-delete-records).

Each partition is handled by ``ReplicaManager.delete_records`` on its leader (the errors it
raises become the partition's error code, low watermark -1), then the answer waits, up to the
request's ``timeout_ms``, until every live replica's log start offset reached the requested
offset, and carries that low watermark (``broker.replication.delete_records``; Kafka's
DelayedDeleteRecords). Partitions still waiting at the timeout answer REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.api.context import Broker, Request
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode


def handle_delete_records(broker: Broker, request: Request) -> Any:
    body = request.body
    topics = []
    waiting: list[tuple[dict[str, Any], str, int]] = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            entry = {"partition_index": part.partition_index, "low_watermark": -1, "error_code": ErrorCode.NONE}
            try:
                offset = broker.replicas.delete_records(topic.name, part.partition_index, part.offset)
            except PartitionError as exc:
                entry["error_code"] = exc.code
            else:
                waiting.append((entry, topic.name, offset))
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    response = {"throttle_time_ms": 0, "topics": topics}
    if not waiting:
        return response
    return _after_replicas(broker, response, waiting, body.timeout_ms)


async def _after_replicas(
    broker: Broker, response: dict[str, Any], waiting: list[tuple[dict[str, Any], str, int]], timeout_ms: int
) -> dict[str, Any]:
    outcomes = await asyncio.gather(
        *(
            broker.replicas.wait_for_low_watermark(topic, entry["partition_index"], offset, timeout_ms)
            for entry, topic, offset in waiting
        )
    )
    for (entry, _, _), (code, low) in zip(waiting, outcomes, strict=True):
        entry["error_code"], entry["low_watermark"] = code, low
    return response
