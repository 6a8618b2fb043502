"""Partition changes the active controller decides: ISR changes asked by leaders, and leader
elections when brokers are fenced or come back (pure: ``ClusterState`` in, records out).

Kafka documentation §4.7 "Replication" "Replicated Logs": "the leader keeps track of the set of in sync nodes" and "if a
follower dies, gets stuck, or falls behind, the leader will remove it from the list of in sync
replicas"; the leader proposes such changes with AlterPartition (KIP-497) and the controller
writes them to the metadata log (``PartitionChangeRecord``), so every broker learns them in the
same order. Kafka documentation §4.7 "Replication" "Replica Management": the controller "detects broker-level
failures and
is responsible for changing the leader of all affected partitions in a failed broker" — in one
metadata entry for all of them, not one election per partition.

Rules (Kafka's ``PartitionChangeBuilder`` / ``ReplicationControlManager``, with
``unclean.leader.election.enable=false``):

* ``alter_partition``: the request must come from the partition's current leader at its current
  leader epoch (else FENCED_LEADER_EPOCH) and name the current partition epoch (else
  INVALID_UPDATE_VERSION); the new ISR must hold the leader, only replicas of the partition
  (INVALID_REQUEST), and only unfenced brokers when it adds any (INELIGIBLE_REPLICA). An ISR equal
  to the current one is answered with the current state and writes nothing.
* ``fence_broker``: the broker leaves the ISR of every partition whose ISR has another member;
  where it led, the first replica (in replica order) left in the ISR and unfenced leads, with the
  leader epoch bumped. A partition whose only ISR member is the fenced broker keeps that ISR and
  gets no leader (leader -1): only that broker has every committed record, so electing another
  would lose data (Kafka documentation §4.7 "Replication" "Unclean leader election: What if they all die?").
* ``unfence_broker``: every partition without a leader whose ISR holds the returning broker gets
  a leader again: the first replica of its ISR that is unfenced (the returning one counts).
* Unclean election (``unclean.leader.election.enable``, per topic, ``unclean(topic)``): where no
  ISR member is live, the first live replica is elected with an ISR of itself — the partition is
  available again, and whatever only the old ISR had is lost (Kafka documentation §4.7 "Replication": "choose the first
  replica (not necessarily in the ISR) that comes back to life as the leader"). Logged as a
  warning by the controller.

Elections an admin asks for (ElectLeaders, KIP-460) and automatic rebalancing, for Kafka documentation
§4.7 "Replication"'s "balance of leadership" (Kafka's ``ReplicationControlManager.electLeader`` rules):

* ``elect_leaders`` PREFERRED: the preferred (first) replica leads if it is live and in the ISR
  (else PREFERRED_LEADER_NOT_AVAILABLE); one that already leads is ELECTION_NOT_NEEDED.
  UNCLEAN: only a partition without a live leader gets one — the first live ISR member, else
  the first live replica with an ISR of itself (ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica
  is live); a partition with a live leader is ELECTION_NOT_NEEDED. An unknown topic or partition
  is UNKNOWN_TOPIC_OR_PARTITION. ``partitions`` None means every partition, and then (as Kafka
  does) partitions that need no election are left out of the results.
* ``rebalance_leaders`` (``auto.leader.rebalance.enable``): per broker, the share of the
  partitions it is the preferred replica of that another broker leads; above
  ``leader.imbalance.per.broker.percentage``, those whose preferred replica is live and in the
  ISR get a preferred election. Every election of one call goes in one metadata entry.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from broker.controller.errors import MetadataError
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import NO_LEADER, PartitionImage
from broker.metadata.records import (
    NO_CHANGE,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from broker.metadata.replay import apply_record
from pyspark_log.wire.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


def alter_partition(state: ClusterState, broker_id: int, change: IsrChange) -> list[MetadataRecord]:
    """The records that apply ``change`` (empty when the ISR is already that); raises
    MetadataError with the partition's error code (module docstring)."""
    current = _partition(state, change.topic_id, change.partition)
    if current.leader != broker_id or change.leader_epoch != current.leader_epoch:
        raise MetadataError(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"broker {broker_id} at leader epoch {change.leader_epoch} is not the leader "
            f"(leader {current.leader}, epoch {current.leader_epoch})",
        )
    if change.partition_epoch != current.partition_epoch:
        raise MetadataError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {change.partition_epoch} is not the current {current.partition_epoch}",
        )
    new_isr = tuple(change.new_isr)
    if broker_id not in new_isr or len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(current.replicas):
        raise MetadataError(
            ErrorCode.INVALID_REQUEST,
            f"ISR {list(new_isr)} must hold the leader {broker_id} and only replicas {list(current.replicas)}",
        )
    if set(new_isr) == set(current.isr):
        return []
    added = set(new_isr) - set(current.isr)
    live = set(state.live_brokers())
    if not added <= live:
        raise MetadataError(
            ErrorCode.INELIGIBLE_REPLICA, f"broker(s) {sorted(added - live)} are fenced and cannot join the ISR"
        )
    ordered = tuple(b for b in current.replicas if b in set(new_isr))  # replica order, as Kafka keeps it
    return [PartitionChangeRecord(change.topic_id, change.partition, isr=ordered)]


Unclean = Callable[[str], bool]  # topic name -> unclean.leader.election.enable


def _never(_: str) -> bool:
    return False


def fence_broker(state: ClusterState, broker_id: int, unclean: Unclean = _never) -> list[MetadataRecord]:
    """Fence ``broker_id`` and move its leaderships and ISR memberships, in one entry."""
    reg = state.registrations.get(broker_id)
    if reg is None:
        return []
    live = set(state.live_brokers()) - {broker_id}
    records: list[MetadataRecord] = [FenceBrokerRecord(broker_id, reg.epoch)]
    for topic_id, part in _partitions(state):
        if broker_id not in part.isr and part.leader != broker_id:
            continue
        isr = tuple(b for b in part.isr if b != broker_id) or part.isr
        leader = part.leader
        if leader == broker_id:
            leader = _first_live(isr, live, part.replicas)
            if leader == NO_LEADER and unclean(state.topic_ids[topic_id]):
                leader = _first_live(part.replicas, live, part.replicas)
                isr = (leader,) if leader != NO_LEADER else isr
        if isr != part.isr or leader != part.leader:
            records.append(_change(topic_id, part, isr, leader))
    return records


def register_broker(
    state: ClusterState, record: RegisterBrokerRecord, unclean: Unclean = _never
) -> list[MetadataRecord]:
    """A broker's registration, with what it changes: when an earlier incarnation of it is still
    registered and unfenced (a crash and a restart within ``broker.session.timeout.ms``), that
    incarnation is fenced first — its leaderships move to other ISR members and it leaves every ISR
    that has another member — since the new process may have lost records the old one
    acknowledged (a machine crash loses the unflushed tail); it catches up as a follower and rejoins.
    Then every leaderless partition it can lead gets it as leader (``elect_leaderless``). Kafka
    answers DUPLICATE_BROKER_REGISTRATION until the old session expires, to the same end."""
    current = state.registrations.get(record.broker_id)
    records: list[MetadataRecord] = []
    after = state
    if current is not None and not current.fenced:
        records.extend(fence_broker(state, record.broker_id, unclean))
        for fenced in records:
            after = apply_record(after, after.applied_offset, fenced)
    records.append(record)
    records.extend(elect_leaderless(after, record.broker_id, unclean))
    return records


def unfence_broker(state: ClusterState, broker_id: int, unclean: Unclean = _never) -> list[MetadataRecord]:
    """Unfence ``broker_id`` and give a leader to the partitions that lacked one because of it."""
    reg = state.registrations.get(broker_id)
    if reg is None:
        return []
    return [UnfenceBrokerRecord(broker_id, reg.epoch), *elect_leaderless(state, broker_id, unclean)]


def elect_leaderless(state: ClusterState, broker_id: int, unclean: Unclean = _never) -> list[MetadataRecord]:
    """Leaders for the partitions without one whose ISR holds ``broker_id``, which is (again) live:
    on its unfencing, or its registration after a restart; with unclean election on for the topic,
    also those where it is only a replica and no ISR member is live."""
    live = set(state.live_brokers()) | {broker_id}
    records: list[MetadataRecord] = []
    for topic_id, part in _partitions(state):
        if part.leader != NO_LEADER or broker_id not in part.replicas:
            continue
        leader = _first_live(part.isr, live, part.replicas)
        if leader != NO_LEADER:
            records.append(PartitionChangeRecord(topic_id, part.partition, leader=leader))
        elif unclean(state.topic_ids[topic_id]):
            records.append(PartitionChangeRecord(topic_id, part.partition, isr=(broker_id,), leader=broker_id))
    return records


def unclean_elections(records: Sequence[MetadataRecord], state: ClusterState) -> list[str]:
    """``topic-partition`` names of the unclean elections among ``records`` (for the warning)."""
    out = []
    for record in records:
        if isinstance(record, PartitionChangeRecord) and record.leader >= 0 and record.isr == (record.leader,):
            name = state.topic_ids.get(record.topic_id)
            topic = state.topics.get(name) if name is not None else None
            part = topic.partitions.get(record.partition) if topic is not None else None
            if part is not None and record.leader not in part.isr:
                out.append(f"{name}-{record.partition}")
    return out


class ElectionType(IntEnum):
    """ElectLeaders' ``election_type`` (Kafka's ``ElectionType``)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's answer to an election: Kafka error code and message (None on success)."""

    error_code: int
    error_message: str | None = None


TopicPartitionKey = tuple[str, int]


def elect_leaders(
    state: ClusterState, election_type: ElectionType, partitions: Iterable[TopicPartitionKey] | None
) -> tuple[list[MetadataRecord], dict[TopicPartitionKey, ElectionResult]]:
    """The records of every election ``partitions`` (None: all) asks for, and each partition's
    result (module docstring); the records go in one metadata entry."""
    live = set(state.live_brokers())
    everything = partitions is None
    wanted = [(name, p.partition) for name, p in _named_partitions(state)] if partitions is None else partitions
    records: list[MetadataRecord] = []
    results: dict[TopicPartitionKey, ElectionResult] = {}
    for name, index in wanted:
        topic = state.topics.get(name)
        part = topic.partitions.get(index) if topic is not None else None
        if topic is None or part is None:
            results[(name, index)] = ElectionResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{index} does not exist"
            )
            continue
        if election_type == ElectionType.PREFERRED:
            record, result = _preferred(topic.topic_id, part, live)
        else:
            record, result = _unclean(topic.topic_id, part, live)
        if record is not None:
            records.append(record)
        if not (everything and result.error_code == ErrorCode.ELECTION_NOT_NEEDED):
            results[(name, index)] = result
    return records, results


def _preferred(
    topic_id: uuid.UUID, part: PartitionImage, live: set[int]
) -> tuple[PartitionChangeRecord | None, ElectionResult]:
    preferred = part.replicas[0] if part.replicas else NO_LEADER
    if part.leader == preferred and preferred in live:
        return None, ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, f"broker {preferred} already leads")
    if preferred not in live or preferred not in part.isr:
        where = "not live" if preferred not in live else "not in the ISR"
        return None, ElectionResult(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"the preferred replica {preferred} is {where}"
        )
    return PartitionChangeRecord(topic_id, part.partition, leader=preferred), ElectionResult(ErrorCode.NONE)


def _unclean(
    topic_id: uuid.UUID, part: PartitionImage, live: set[int]
) -> tuple[PartitionChangeRecord | None, ElectionResult]:
    if part.leader != NO_LEADER and part.leader in live:
        return None, ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, f"broker {part.leader} leads")
    leader = _first_live(part.isr, live, part.replicas)
    if leader != NO_LEADER:
        return PartitionChangeRecord(topic_id, part.partition, leader=leader), ElectionResult(ErrorCode.NONE)
    leader = _first_live(part.replicas, live, part.replicas)
    if leader == NO_LEADER:
        return None, ElectionResult(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {list(part.replicas)} is live"
        )
    return PartitionChangeRecord(topic_id, part.partition, isr=(leader,), leader=leader), ElectionResult(ErrorCode.NONE)


def imbalanced_partitions(state: ClusterState, per_broker_percentage: int) -> list[TopicPartitionKey]:
    """The partitions ``rebalance_leaders`` elects (module docstring): for each broker whose
    share of not-led preferred partitions exceeds ``per_broker_percentage``, those of them whose
    preferred replica is live and in the ISR."""
    live = set(state.live_brokers())
    by_preferred: dict[int, list[tuple[str, PartitionImage]]] = {}
    for name, part in _named_partitions(state):
        if part.replicas:
            by_preferred.setdefault(part.replicas[0], []).append((name, part))
    chosen: list[TopicPartitionKey] = []
    for broker, owned in sorted(by_preferred.items()):
        elsewhere = [(name, part) for name, part in owned if part.leader != broker]
        if len(elsewhere) * 100 <= per_broker_percentage * len(owned):
            continue
        if broker in live:
            chosen.extend((name, part.partition) for name, part in elsewhere if broker in part.isr)
    return chosen


def rebalance_leaders(state: ClusterState, per_broker_percentage: int) -> list[MetadataRecord]:
    """Preferred elections for ``imbalanced_partitions`` (none when balanced), for one entry."""
    wanted = imbalanced_partitions(state, per_broker_percentage)
    if not wanted:
        return []
    records, _ = elect_leaders(state, ElectionType.PREFERRED, wanted)
    return records


def _named_partitions(state: ClusterState) -> Iterable[tuple[str, PartitionImage]]:
    for name in sorted(state.topics):
        topic = state.topics[name]
        for index in sorted(topic.partitions):
            yield name, topic.partitions[index]


def _change(topic_id: uuid.UUID, part: PartitionImage, isr: tuple[int, ...], leader: int) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        topic_id,
        part.partition,
        isr=isr if isr != part.isr else None,
        leader=leader if leader != part.leader else NO_CHANGE,
    )


def _first_live(isr: Sequence[int], live: set[int], replicas: Sequence[int]) -> int:
    """The first replica, in replica order, that is in ``isr`` and live; NO_LEADER if none."""
    for broker in replicas:
        if broker in isr and broker in live:
            return broker
    return NO_LEADER


def _partitions(state: ClusterState) -> Iterable[tuple[uuid.UUID, PartitionImage]]:
    for name in sorted(state.topics):
        topic = state.topics[name]
        for index in sorted(topic.partitions):
            yield topic.topic_id, topic.partitions[index]


def _partition(state: ClusterState, topic_id: uuid.UUID, partition: int) -> PartitionImage:
    name = state.topic_ids.get(topic_id)
    topic = state.topics.get(name) if name is not None else None
    if topic is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_ID, f"topic id {topic_id} is unknown")
    part = topic.partitions.get(partition)
    if part is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {partition} of {name} does not exist")
    return part
