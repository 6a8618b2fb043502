"""Consumer-group offsets without group membership: what Kafka's Admin API calls
``alterConsumerGroupOffsets`` / ``listConsumerGroupOffsets``.

FindCoordinator (key type 0, group) names the broker that owns the group; OffsetCommit with
generation -1 and an empty member id stores offsets for a group that has no active members (a
"simple" commit, as Spark's Kafka source and lag tools use); OffsetFetch reads them back.
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS (and broken
connections) find the coordinator again and retry with backoff until the time budget is spent.
Group membership (JoinGroup/SyncGroup/Heartbeat) is a later issue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.cluster import Cluster
from pyspark_log.client.errors import KafkaTimeoutError, error_for
from pyspark_log.client.offset_commit import offset_commit_body
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError

T = TypeVar("T")

COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (the next offset to read), its metadata string and leader epoch."""

    offset: int
    metadata: str | None = None
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group membership as a transaction's offsets carry it (KIP-447; Java's
    ``ConsumerGroupMetadata``, ``Consumer.group_metadata()``): TxnOffsetCommit sends the
    generation (the member epoch under ``group.protocol=consumer``), the member id and the
    instance id, and the coordinator refuses them once that generation is over, so a zombie
    member's transaction cannot commit offsets its successor owns. A bare group id is
    ``ConsumerGroupMetadata(group_id)``: no membership, so nothing is checked."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @property
    def has_membership(self) -> bool:
        return self.generation_id >= 0 or bool(self.member_id) or self.group_instance_id is not None


class GroupOffsets:
    """Commit and fetch one group's offsets through its coordinator."""

    def __init__(self, cluster: Cluster, backoff: ExponentialBackoff) -> None:
        self._cluster = cluster
        self._backoff = backoff
        self._coordinators: dict[str, int] = {}

    async def _coordinator(self, group_id: str) -> int:
        node = self._coordinators.get(group_id)
        if node is not None:
            return node
        node = await self._cluster.find_coordinator(0, group_id, context=f"find coordinator of group {group_id!r}")
        self._coordinators[group_id] = node
        return node

    async def _retrying(self, group_id: str, timeout_ms: float, attempt_fn: Callable[[int], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        attempt = 0
        while True:
            try:
                return await attempt_fn(await self._coordinator(group_id))
            except KafkaError as exc:
                if not (exc.retriable or exc.code in COORDINATOR_ERRORS):
                    raise
                self._coordinators.pop(group_id, None)
                wait_s = self._backoff.backoff_ms(attempt) / 1000.0
                attempt += 1
                if loop.time() + wait_s >= deadline:
                    raise KafkaTimeoutError(f"group {group_id!r}: no success in {timeout_ms:.0f} ms: {exc}") from exc
                await asyncio.sleep(wait_s)

    async def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """Store ``offsets`` for ``group_id`` (generation -1: no membership needed)."""
        body = offset_commit_body(group_id, -1, "", None, offsets)

        async def attempt(node: int) -> None:
            resp = await self._cluster.send(node, ApiKey.OFFSET_COMMIT, body)
            errors: dict[TopicPartition, KafkaError] = {}
            for topic in resp.topics:
                for part in topic.partitions:
                    if part.error_code != ErrorCode.NONE:
                        tp = TopicPartition(topic.name, part.partition_index)
                        errors[tp] = error_for(part.error_code, context=f"commit offset of {tp} for {group_id!r}")
            retry = next((e for e in errors.values() if e.code in COORDINATOR_ERRORS), None)
            if retry is not None:
                raise retry
            if errors:
                first = next(iter(errors.values()))
                first.errors = errors  # type: ignore[attr-defined]
                raise first

        await self._retrying(group_id, timeout_ms, attempt)

    async def fetch(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        timeout_ms: float,
        *,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id`` (all its partitions when ``partitions`` is None);
        partitions without a committed offset are omitted."""
        wanted = None if partitions is None else list(partitions)
        topics = None
        if wanted is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = {"group_id": group_id, "topics": topics, "require_stable": require_stable}

        async def attempt(node: int) -> dict[TopicPartition, OffsetAndMetadata]:
            resp = await self._cluster.send(node, ApiKey.OFFSET_FETCH, body)
            if resp.error_code != ErrorCode.NONE:
                raise error_for(resp.error_code, context=f"fetch offsets of group {group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for topic in resp.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        continue
                    if part.error_code != ErrorCode.NONE:
                        raise error_for(part.error_code, context=f"fetch offset of {tp} for {group_id!r}")
                    if part.committed_offset >= 0:
                        epoch = part.committed_leader_epoch if part.committed_leader_epoch >= 0 else None
                        out[tp] = OffsetAndMetadata(part.committed_offset, part.metadata, epoch)
            return out

        return await self._retrying(group_id, timeout_ms, attempt)
