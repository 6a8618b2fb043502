"""The body of an OffsetCommit request and its ``topics`` (which TxnOffsetCommit shares: the same
partition fields), built in one place: Kafka protocol guide, OffsetCommit v2+ and TxnOffsetCommit
``topics[].partitions[]`` = ``partition_index``, ``committed_offset``,
``committed_leader_epoch`` (-1: unknown, KIP-320) and ``committed_metadata``.

Every OffsetCommit the client sends is built by ``offset_commit_body``: the standalone commit of
``groups.GroupOffsets`` (generation -1, no member), the classic member's (its generation) and the
KIP-848 member's (its member epoch, OffsetCommit v9).

Offsets come as a plain offset or as anything with ``offset``, ``leader_epoch`` and ``metadata``
(``groups.OffsetAndMetadata``; this module imports none of the modules that send these requests,
so each of them can import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, SupportsInt, runtime_checkable

from pyspark_log.client.types import TopicPartition


@runtime_checkable
class CommittedOffset(Protocol):
    """What a commit stores for one partition (``groups.OffsetAndMetadata`` is one)."""

    @property
    def offset(self) -> int: ...

    @property
    def metadata(self) -> str | None: ...

    @property
    def leader_epoch(self) -> int | None: ...


def offset_commit_topics(offsets: Mapping[TopicPartition, SupportsInt | CommittedOffset]) -> list[dict[str, Any]]:
    """``offsets`` as the request's ``topics`` list: one entry per topic, in first-seen order,
    each with its partitions in the order given. A plain offset has no metadata and an unknown
    leader epoch."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, value in offsets.items():
        if isinstance(value, CommittedOffset):
            offset, epoch, metadata = value.offset, value.leader_epoch, value.metadata
        else:
            offset, epoch, metadata = int(value), None, None
        topics.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1 if epoch is None else epoch,
                "committed_metadata": metadata or "",
            }
        )
    return [{"name": topic, "partitions": partitions} for topic, partitions in topics.items()]


def offset_commit_body(
    group_id: str,
    generation_id_or_member_epoch: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, SupportsInt | CommittedOffset],
) -> dict[str, Any]:
    """An OffsetCommit body: ``generation_id_or_member_epoch`` is -1 with an empty ``member_id``
    for a commit without membership (Kafka protocol guide, OffsetCommit; KIP-848 "Offset Commit
    and Fetch" for the member epoch); the retention is the broker's (-1, ``offsets.retention.minutes``)."""
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation_id_or_member_epoch,
        "member_id": member_id,
        "group_instance_id": group_instance_id,
        "retention_time_ms": -1,
        "topics": offset_commit_topics(offsets),
    }
