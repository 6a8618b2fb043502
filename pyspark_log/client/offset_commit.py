"""The ``topics`` of an OffsetCommit request (and of TxnOffsetCommit, which has the same
partition fields), built in one place: Kafka protocol guide, OffsetCommit v2+ and TxnOffsetCommit
``topics[].partitions[]`` = ``partition_index``, ``committed_offset``,
``committed_leader_epoch`` (-1: unknown, KIP-320) and ``committed_metadata``.

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
