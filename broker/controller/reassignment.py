"""Partition reassignment (KIP-455): the active controller's decisions, pure (``ClusterState`` in,
records and results out).

A reassignment moves a partition from its replicas (the *original* set) to a *target* set. While
it runs, the partition's ``replicas`` is the union, target first then the replicas being removed,
with ``adding_replicas`` (target minus original) and ``removing_replicas`` (original minus
target) beside it (Kafka's ``PartitionRecord``/``PartitionChangeRecord`` fields of the same
names). The added replicas are followers like any other: they fetch from the leader, catch up,
and the leader adds them to the ISR with AlterPartition. Once every target replica is in the ISR
the reassignment completes in one ``PartitionChangeRecord``: ``replicas`` becomes the target,
the removed replicas leave the ISR, and if the leader is being removed (or is not live) the first
live target replica in the ISR leads, with the leader epoch bumped. Every change of the replica
set bumps the leader epoch (``broker.metadata.replay.partition_after_change``).

Rules (Kafka's ``ReplicationControlManager.alterPartitionReassignments`` /
``PartitionReassignmentReplicas``):

* ``alter_reassignment`` with a target: the target must be non-empty, without duplicates, and
  name only registered brokers (else INVALID_REPLICA_ASSIGNMENT); with
  ``allow_replication_factor_change`` false (KIP-860) its size must be that of the original set
  (INVALID_REPLICATION_FACTOR). A new target replaces a reassignment in progress: it starts again
  from the original replicas. A target equal to the replicas of a partition that is not moving
  writes nothing.
* ``alter_reassignment`` with None cancels: NO_REASSIGNMENT_IN_PROGRESS when nothing moves; else
  the replicas go back to the original set, the added replicas leave the ISR, and a leader that
  was an added replica hands over to the first live original replica in the ISR. A cancellation
  that would leave no original replica in the ISR is refused (INVALID_REPLICA_ASSIGNMENT): it
  would lose acknowledged records.
* An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
* ``complete_reassignments``: the completion records of every moving partition whose target
  replicas are all in the ISR (run after each ISR change and periodically).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.controller.errors import MetadataError
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import NO_LEADER, PartitionImage
from broker.metadata.records import NO_CHANGE, MetadataRecord, PartitionChangeRecord
from broker.metadata.replay import apply_records
from pyspark_log.wire.errors import ErrorCode

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Ongoing:
    """One reassignment in progress, as ListPartitionReassignments shows it."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Move:
    """One partition of an AlterPartitionReassignments request: ``replicas`` None cancels."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


MoveResult = tuple[int, str | None]  # (error code, error message) of one partition's move


def original_replicas(part: PartitionImage) -> tuple[int, ...]:
    """The replicas before the reassignment in progress (all replicas when none is)."""
    return tuple(b for b in part.replicas if b not in part.adding_replicas)


def target_replicas(part: PartitionImage) -> tuple[int, ...]:
    """The replicas the partition moves to (all replicas when nothing moves)."""
    return tuple(b for b in part.replicas if b not in part.removing_replicas)


def is_reassigning(part: PartitionImage) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def alter_reassignment(
    state: ClusterState, topic: str, partition: int, target: Sequence[int] | None,
    *, allow_replication_factor_change: bool = True,
) -> list[MetadataRecord]:  # fmt: skip
    """The records that start, replace or (``target`` None) cancel one partition's reassignment;
    raises MetadataError with the partition's error code (module docstring)."""
    topic_id, part = _find(state, topic, partition)
    if target is None:
        return _cancel(state, topic_id, part)
    wanted = tuple(int(b) for b in target)
    if not wanted or len(set(wanted)) != len(wanted) or any(b < 0 for b in wanted):
        raise MetadataError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the replica list {list(wanted)} must be non-empty and distinct"
        )
    unknown = sorted(set(wanted) - set(state.registrations))
    if unknown:
        raise MetadataError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"the replica list {list(wanted)} names broker(s) {unknown}, but no such broker is registered",
        )
    original = original_replicas(part)
    if not allow_replication_factor_change and len(wanted) != len(original):
        raise MetadataError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"the reassignment changes the replication factor from {len(original)} to {len(wanted)}",
        )
    if not is_reassigning(part) and wanted == part.replicas:
        return []
    adding = tuple(b for b in wanted if b not in original)
    removing = tuple(b for b in original if b not in wanted)
    replicas = wanted + removing
    # Replicas added by a replaced reassignment that the new target drops leave the ISR.
    isr = tuple(b for b in part.isr if b in replicas)
    if not isr:
        raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "no replica in the ISR would be left")
    moving = PartitionImage(
        part.partition, part.leader, part.leader_epoch, replicas, isr, part.partition_epoch, adding, removing
    )
    final = _completed(state, moving)
    if final is not None:  # the target is in the ISR already (e.g. a replica only removed): done at once
        replicas, isr, leader, adding, removing = (*final, (), ())
    else:
        leader = part.leader if part.leader in isr else _first_live(isr, state, replicas)
    return [_record(topic_id, part, replicas, isr, leader, adding=adding, removing=removing)]


def _record(
    topic_id: uuid.UUID, before: PartitionImage, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
    *, adding: tuple[int, ...] = (), removing: tuple[int, ...] = (),
) -> PartitionChangeRecord:  # fmt: skip
    return PartitionChangeRecord(
        topic_id, before.partition,
        isr=isr if isr != before.isr else None,
        leader=leader if leader != before.leader else NO_CHANGE,
        replicas=replicas, adding_replicas=adding, removing_replicas=removing,
    )  # fmt: skip


def _cancel(state: ClusterState, topic_id: uuid.UUID, part: PartitionImage) -> list[MetadataRecord]:
    if not is_reassigning(part):
        raise MetadataError(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of partition {part.partition} is in progress"
        )
    original = original_replicas(part)
    isr = tuple(b for b in original if b in part.isr)
    if not isr:
        raise MetadataError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"cannot cancel: no original replica of {list(original)} is in the ISR {list(part.isr)}",
        )
    leader = part.leader if part.leader in original else _first_live(isr, state, original)
    return [_record(topic_id, part, original, isr, leader)]


def _completed(state: ClusterState, part: PartitionImage) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """``(replicas, isr, leader)`` once every target replica of a moving partition is in the ISR."""
    if not is_reassigning(part):
        return None
    target = target_replicas(part)
    if not set(target) <= set(part.isr):
        return None
    isr = tuple(b for b in target if b in part.isr)
    live = set(state.live_brokers())
    leader = part.leader if part.leader in target and part.leader in live else _first_live(isr, state, target)
    return target, isr, leader


def complete_reassignments(state: ClusterState) -> list[MetadataRecord]:
    """Completion records of every reassignment whose target replicas are all in the ISR."""
    records: list[MetadataRecord] = []
    for name in sorted(state.topics):
        topic = state.topics[name]
        for index in sorted(topic.partitions):
            part = topic.partitions[index]
            done = _completed(state, part)
            if done is not None:
                records.append(_record(topic.topic_id, part, *done))
    return records


def completed_by(state: ClusterState, records: Sequence[MetadataRecord]) -> list[MetadataRecord]:
    """The completion records of the reassignments that ``records`` (ISR changes, applied after
    ``state`` in the same entry) complete; empty when nothing moves (the common case)."""
    touched = {(r.topic_id, r.partition) for r in records if isinstance(r, PartitionChangeRecord)}
    moving = []
    for topic_id, index in sorted(touched, key=lambda key: (str(key[0]), key[1])):
        name = state.topic_ids.get(topic_id)
        part = state.topics[name].partitions.get(index) if name is not None else None
        if part is not None and is_reassigning(part):
            moving.append((topic_id, index))
    if not moving:
        return []
    after = apply_records(state, state.applied_offset, records)
    out: list[MetadataRecord] = []
    for topic_id, index in moving:
        part = after.topics[after.topic_ids[topic_id]].partitions[index]
        done = _completed(after, part)
        if done is not None:
            out.append(_record(topic_id, part, *done))
    return out


def list_reassignments(
    state: ClusterState, partitions: Iterable[TopicPartitionKey] | None
) -> dict[TopicPartitionKey, Ongoing]:
    """The reassignments in progress among ``partitions`` (None: all); unknown partitions and those
    not moving are left out, as Kafka does."""
    out: dict[TopicPartitionKey, Ongoing] = {}
    if partitions is None:
        keys: Iterable[TopicPartitionKey] = (
            (name, index) for name in sorted(state.topics) for index in sorted(state.topics[name].partitions)
        )
    else:
        keys = partitions
    for name, index in keys:
        topic = state.topics.get(name)
        part = topic.partitions.get(index) if topic is not None else None
        if part is not None and is_reassigning(part):
            out[(name, index)] = Ongoing(part.replicas, part.adding_replicas, part.removing_replicas)
    return out


def _find(state: ClusterState, topic: str, partition: int) -> tuple[uuid.UUID, PartitionImage]:
    found = state.topics.get(topic)
    part = found.partitions.get(partition) if found is not None else None
    if found is None or part is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition} does not exist")
    return found.topic_id, part


def _first_live(isr: Sequence[int], state: ClusterState, order: Sequence[int]) -> int:
    live = set(state.live_brokers())
    for broker in order:
        if broker in isr and broker in live:
            return broker
    return NO_LEADER
