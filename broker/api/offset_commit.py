"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), TxnOffsetCommit (28).

Kafka documentation §5.5 "Distribution": the coordinator appends each commit to ``__consumer_offsets`` before it answers
(and, as Kafka with ``offsets.commit.required.acks=-1``, waits until the offsets partition's ISR
has it, at most ``offsets.commit.timeout.ms``),
and answers fetches from its cache; while the group's partition loads, both get
COORDINATOR_LOAD_IN_PROGRESS and clients retry. As in Kafka: a partition of a topic that does not
exist is answered UNKNOWN_TOPIC_OR_PARTITION on commit; a missing commit fetches as offset -1
with empty metadata and no error; null metadata is stored as ""; OffsetCommit v1's
``commit_timestamp`` and v2-v4's ``retention_time_ms`` are honoured (an explicit expiry).
OffsetFetch v8+ carries several groups, each answered on its own. OffsetFetch v7+
``require_stable`` (KIP-447): a partition with a pending transactional commit is answered
UNSTABLE_OFFSET_COMMIT (retriable) until its transaction's marker lands. TxnOffsetCommit stages
offsets of a transaction in the group coordinator (Kafka ``handleTxnOffsetCommitRequest``) and,
as an OffsetCommit, answers once the offsets partition's ISR has them: unknown topics or
partitions are UNKNOWN_TOPIC_OR_PARTITION; v0-v1 see COORDINATOR_NOT_AVAILABLE for
COORDINATOR_LOAD_IN_PROGRESS (clients before KAFKA-7296 did not retry the latter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.coordinator.group import OFFSETS_TOPIC, CommittedOffset, GroupCoordinator, partition_for
from pyspark_log.wire.errors import ErrorCode

TopicPartition = tuple[str, int]
DEFAULT_TIMESTAMP = -1
DEFAULT_RETENTION = -1


def _exists(broker: Broker, topic: str, partition: int) -> bool:
    found = broker.image().topics.get(topic)
    return found is not None and partition in found.partitions


# -- OffsetCommit and TxnOffsetCommit: one per-partition loop --------------------------------


def _commit_each_partition(
    broker: Broker,
    body: Any,
    offset_of: Callable[[Any], CommittedOffset],
    commit: Callable[[GroupCoordinator, dict[TopicPartition, CommittedOffset]], Mapping[TopicPartition, int]],
) -> dict[TopicPartition, int]:
    """The error code of every partition of ``body.topics``: COORDINATOR_NOT_AVAILABLE when this
    broker serves no groups, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist, and
    for the others what ``commit(coordinator, offsets)`` answers, ``offsets`` holding
    ``offset_of(partition)`` of each (one call, so the commit is one append)."""
    coordinator = broker.groups
    results: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, CommittedOffset] = {}
    for topic in body.topics:
        for part in topic.partitions:
            tp = (topic.name, part.partition_index)
            if coordinator is None:
                results[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif not _exists(broker, *tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = offset_of(part)
    if coordinator is not None and offsets:
        results.update(commit(coordinator, offsets))
    return results


def _commit_response(body: Any, results: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """The OffsetCommit / TxnOffsetCommit response: the requested partitions, in request order."""
    topics: dict[str, list[dict[str, int]]] = {}
    for topic in body.topics:
        entries = topics.setdefault(topic.name, [])
        for part in topic.partitions:
            entries.append(
                {"partition_index": part.partition_index, "error_code": results[(topic.name, part.partition_index)]}
            )
    return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def handle_offset_commit(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    now = broker.clock_ms()
    retention = body.retention_time_ms if 2 <= version <= 4 else DEFAULT_RETENTION

    def offset_of(part: Any) -> CommittedOffset:
        commit_ts = part.commit_timestamp if version == 1 and part.commit_timestamp != DEFAULT_TIMESTAMP else now
        return CommittedOffset(
            offset=part.committed_offset,
            leader_epoch=part.committed_leader_epoch if version >= 6 else -1,
            metadata=part.committed_metadata or "",
            commit_timestamp_ms=commit_ts,
            expire_timestamp_ms=now + retention if retention != DEFAULT_RETENTION else -1,
        )

    generation = body.generation_id_or_member_epoch if version >= 1 else -1
    member_id = (body.member_id if version >= 1 else "") or ""

    def commit(coordinator: GroupCoordinator, offsets: dict[TopicPartition, CommittedOffset]) -> Any:
        consumer = coordinator.consumer
        if consumer is not None and coordinator.manager.status(body.group_id, allow_empty_id=True) is None:
            verdicts = consumer.validate_offset_commit(body.group_id, member_id, generation, version, offsets)
            if verdicts is not None:  # a KIP-848 group
                return _store_accepted(verdicts, offsets, lambda ok: consumer.commit_offsets(body.group_id, ok))
        return coordinator.commit_offsets(body.group_id, member_id, body.group_instance_id, generation, offsets)

    results = _commit_each_partition(broker, body, offset_of, commit)
    pending = _replication_pending(broker, body.group_id, results)
    if pending is None:
        return _commit_response(body, results)
    return _after_replication(broker, body, results, pending)


def _store_accepted(
    verdicts: Mapping[TopicPartition, int],
    offsets: dict[TopicPartition, CommittedOffset],
    store: Callable[[dict[TopicPartition, CommittedOffset]], Mapping[TopicPartition, int]],
) -> dict[TopicPartition, int]:
    """A KIP-848 group's commit checked per partition (KIP-1251: a member epoch may be fresh for
    one partition and stale for another): ``store`` the accepted ones, answer the others' errors."""
    accepted = {tp: o for tp, o in offsets.items() if verdicts[tp] == ErrorCode.NONE}
    refused = {tp: code for tp, code in verdicts.items() if code != ErrorCode.NONE}
    return refused | (dict(store(accepted)) if accepted else {})


def _replication_pending(
    broker: Broker, group_id: str, results: Mapping[TopicPartition, int]
) -> tuple[int, int] | None:
    """``(offsets partition, its last offset)`` when a commit was appended that the partition's
    ISR does not have yet (``offsets.commit.required.acks=-1``, Kafka's default and pylog's only
    setting); None when the answer need not wait."""
    if not any(code == ErrorCode.NONE for code in results.values()):
        return None
    topic = broker.image().topics.get(OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        return None
    partition = partition_for(group_id, len(topic.partitions))
    hosted = broker.replicas.get_partition(OFFSETS_TOPIC, partition)
    if hosted is None or not hosted.is_leader:
        return None
    last = hosted.log.log_end_offset - 1
    return None if broker.replicas.acknowledged(OFFSETS_TOPIC, partition, last) else (partition, last)


async def _after_replication(
    broker: Broker, body: Any, results: dict[TopicPartition, int], pending: tuple[int, int]
) -> dict[str, Any]:
    """Answer once the commit is on every ISR member of its offsets partition; a failure becomes
    what Kafka's coordinator answers (``GroupMetadataManager``): COORDINATOR_NOT_AVAILABLE for a
    timeout or a too small ISR, NOT_COORDINATOR when the partition moved — both retried by clients."""
    timeout_ms = int(broker.config.get("offsets.commit.timeout.ms", 5000))
    code = await broker.replicas.wait_for_acks(OFFSETS_TOPIC, pending[0], pending[1], timeout_ms)
    coordinator = broker.groups
    group = coordinator.manager.groups.get(body.group_id) if coordinator is not None else None
    if code == ErrorCode.NONE and coordinator is not None and group is not None:
        coordinator.manager.cache_replicated(group)  # what OffsetFetch answers from now on
    if code != ErrorCode.NONE:
        mapped = (
            ErrorCode.NOT_COORDINATOR
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
        for tp, current in results.items():
            if current == ErrorCode.NONE:
                results[tp] = mapped
    return _commit_response(body, results)


# -- OffsetFetch -------------------------------------------------------------------------------

BATCHED_FETCH_VERSION = 8


def handle_offset_fetch(broker: Broker, request: Request) -> Any:
    """Answered from the coordinator's cache, only while this broker holds its session lease
    (``broker.controller.broker_session``): without it the offsets partition may have moved to
    another coordinator that took newer commits, and every group is answered NOT_COORDINATOR
    (clients look the coordinator up again). Kafka answers from its cache regardless."""
    body, version = request.body, request.version
    coordinator = broker.groups
    leased = broker.controller.holds_session_lease()
    if version >= BATCHED_FETCH_VERSION:
        groups = []
        for group in body.groups:
            wanted = _wanted(group.topics)
            refused = None
            if version >= 9 and coordinator is not None and coordinator.consumer is not None:
                refused = coordinator.consumer.validate_offset_fetch(
                    group.group_id, group.member_id, group.member_epoch
                )
            if refused is not None:  # KIP-848: a member fetching with a stale epoch or an unknown id
                groups.append({"group_id": group.group_id, "topics": [], "error_code": refused})
                continue
            code, topics = _fetch(
                coordinator, group.group_id, wanted, require_stable=body.require_stable, leased=leased
            )
            groups.append({"group_id": group.group_id, "topics": [] if code else topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    wanted = _wanted(body.topics)
    code, topics = _fetch(
        coordinator, body.group_id, wanted, require_stable=version >= 7 and body.require_stable, leased=leased
    )
    if code and version >= 2:
        topics = []
    elif code:  # v0-v1 have no group-level error: every partition carries it
        topics = [
            {
                "name": t["name"],
                "partitions": [
                    {**p, "committed_offset": -1, "metadata": "", "error_code": code} for p in t["partitions"]
                ],
            }
            for t in topics
        ]
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}


def _wanted(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [(t.name, p) for t in topics for p in t.partition_indexes]


def _fetch(
    coordinator: GroupCoordinator | None,
    group_id: str,
    wanted: list[TopicPartition] | None,
    *,
    require_stable: bool = False,
    leased: bool = True,
) -> tuple[int, list[dict[str, Any]]]:
    found: dict[TopicPartition, CommittedOffset | int | None]
    if coordinator is None or not leased:
        code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator is None else ErrorCode.NOT_COORDINATOR
        found = dict.fromkeys(wanted or [])
    else:
        code, found = coordinator.fetch_offsets(group_id, wanted, require_stable=require_stable)
        if code and wanted is not None:
            found = dict.fromkeys(wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        committed = value if isinstance(value, CommittedOffset) else None
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": -1 if committed is None else committed.offset,
                "committed_leader_epoch": -1 if committed is None else committed.leader_epoch,
                "metadata": "" if committed is None else committed.metadata,
                "error_code": value if isinstance(value, int) else 0,
            }
        )
    return code, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


# -- TxnOffsetCommit ---------------------------------------------------------------------------

TXN_LOAD_ERROR_VERSION = 2  # below it, COORDINATOR_LOAD_IN_PROGRESS is sent as COORDINATOR_NOT_AVAILABLE


def handle_txn_offset_commit(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    now = broker.clock_ms()

    def offset_of(part: Any) -> CommittedOffset:
        return CommittedOffset(
            offset=part.committed_offset,
            leader_epoch=part.committed_leader_epoch if version >= 2 else -1,
            metadata=part.committed_metadata or "",
            commit_timestamp_ms=now,
        )

    member_id = body.member_id or ""

    def commit(coordinator: GroupCoordinator, offsets: dict[TopicPartition, CommittedOffset]) -> Any:
        consumer = coordinator.consumer
        if consumer is not None and coordinator.manager.status(body.group_id) is None:
            verdicts = consumer.validate_offset_commit(
                body.group_id,
                member_id,
                body.generation_id,
                version,
                offsets,
                transactional=True,
                instance_id=body.group_instance_id,
            )
            if verdicts is not None:  # a KIP-848 group (librdkafka's consumer_group_metadata of a member)
                return _store_accepted(
                    verdicts,
                    offsets,
                    lambda ok: consumer.stage_txn_offsets(body.group_id, body.producer_id, body.producer_epoch, ok),
                )
        return coordinator.commit_txn_offsets(
            body.group_id,
            body.producer_id,
            body.producer_epoch,
            member_id,
            body.group_instance_id,
            body.generation_id,
            offsets,
        )

    results = _commit_each_partition(broker, body, offset_of, commit)
    if version < TXN_LOAD_ERROR_VERSION:
        results = {
            tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else code
            for tp, code in results.items()
        }
    # Answered once the offsets partition's ISR has it, as an OffsetCommit (Kafka writes both with
    # offsets.commit.required.acks=-1): a TxnOffsetCommit answered earlier could be truncated by a
    # failover and its transaction then commit without its offsets (found by the chaos
    # transactions workload: a committed transaction whose consumed offset was lost).
    pending = _replication_pending(broker, body.group_id, results)
    if pending is None:
        return _commit_response(body, results)
    return _after_replication(broker, body, results, pending)


# -- OffsetDelete ------------------------------------------------------------------------------


def handle_offset_delete(broker: Broker, request: Request) -> Any:
    body = request.body
    coordinator = broker.groups
    requested = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    results: dict[TopicPartition, int] = {}
    known = [tp for tp in requested if _exists(broker, *tp)]
    for tp in requested:
        if tp not in known:
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    consumer = coordinator.consumer if coordinator is not None else None
    group = consumer.get(body.group_id) if consumer is not None else None
    if group is not None and group.members:  # KIP-848: a live group keeps its subscribed topics' offsets
        subscribed = frozenset().union(*group.subscribed_topics(consumer.topics).values())  # type: ignore[union-attr]
        for tp in [tp for tp in known if tp[0] in subscribed]:
            results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            known.remove(tp)
    if coordinator is None:
        code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code, deleted = coordinator.delete_offsets(body.group_id, known)
        results.update(deleted)
    if code:
        return {"error_code": code, "throttle_time_ms": 0, "topics": []}
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition in requested:
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": results.get((topic, partition), 0)}
        )
    return {
        "error_code": 0,
        "throttle_time_ms": 0,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
    }
