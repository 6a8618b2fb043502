"""Partition reassignment through the admin client (KIP-455): AlterPartitionReassignments (45)
and ListPartitionReassignments (46), as Kafka Admin's ``alterPartitionReassignments`` and
``listPartitionReassignments``.

    await admin.alter_partition_reassignments({TopicPartition("t", 0): [2, 3, 4]})   # move
    await admin.alter_partition_reassignments({TopicPartition("t", 0): None})        # cancel
    await admin.list_partition_reassignments()   # {tp: PartitionReassignment(...)} in progress

The functions take the admin's ``send`` (a request to some broker; brokers forward the change to
the active controller). A request-level error is raised; per-partition errors are returned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark_log.client.errors import error_for
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, KafkaError, Message

Send = Callable[[int, dict[str, Any], float], Awaitable[Message]]


@dataclass(frozen=True)
class PartitionReassignment:
    """A move in progress (Kafka's ``PartitionReassignment``): ``replicas`` is the union of the old
    and the new set; ``adding_replicas`` join, ``removing_replicas`` leave when it completes."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


async def alter_partition_reassignments(
    send: Send, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout_ms: float
) -> dict[TopicPartition, KafkaError | None]:
    """Each partition's outcome: None when accepted, else its error (e.g. NO_REASSIGNMENT_IN_PROGRESS
    for a cancel of nothing, INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, replicas in targets.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "replicas": None if replicas is None else [int(b) for b in replicas]}
        )
    body = {
        "timeout_ms": int(timeout_ms),
        "allow_replication_factor_change": True,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }
    resp = await send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, timeout_ms)
    if resp.error_code:
        raise error_for(resp.error_code, resp.error_message, context="AlterPartitionReassignments")
    out: dict[TopicPartition, KafkaError | None] = {}
    for topic in resp.responses:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            out[tp] = (
                None
                if part.error_code == 0
                else error_for(part.error_code, part.error_message, context=f"reassign {tp}")
            )
    return out


async def list_partition_reassignments(
    send: Send, partitions: Iterable[TopicPartition] | None, *, timeout_ms: float
) -> dict[TopicPartition, PartitionReassignment]:
    """The reassignments in progress among ``partitions`` (None: all of the cluster's)."""
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()]
    resp = await send(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": int(timeout_ms), "topics": topics}, timeout_ms
    )
    if resp.error_code:
        raise error_for(resp.error_code, resp.error_message, context="ListPartitionReassignments")
    return {
        TopicPartition(topic.name, part.partition_index): PartitionReassignment(
            tuple(part.replicas), tuple(part.adding_replicas), tuple(part.removing_replicas)
        )
        for topic in resp.topics
        for part in topic.partitions
    }
