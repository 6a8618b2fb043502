"""A KIP-848 consumer group's state as Kafka 4.1 writes it to ``__consumer_offsets``, and back.

Pure codecs and replay, no I/O. Each record's key is an int16 record type then the key fields
(key schema v0, not flexible); each value an int16 version (0) then the value fields (flexible).
Facts: Kafka 4.1's ``group-coordinator`` message schemas of the same names::

    type 3  ConsumerGroupMetadata          key group          value epoch (MetadataHash tag 0: not written)
    type 4  ConsumerGroupPartitionMetadata key group          value topics [id, name, partitions, racks]
    type 5  ConsumerGroupMemberMetadata    key group, member  value instance, rack, client id/host,
                                                                    topic names, regex, rebalance timeout,
                                                                    server assignor, classic member
                                                                    metadata (tag 0: session timeout and
                                                                    protocols of a classic-protocol member)
    type 6  ConsumerGroupTargetAssignmentMetadata key group   value assignment epoch
    type 7  ConsumerGroupTargetAssignmentMember   key group, member  value [topic id, partitions]
    type 8  ConsumerGroupCurrentMemberAssignment  key group, member  value epoch, previous epoch,
                                                                    state, assigned, pending revocation
                                                                    (each with AssignmentEpochs, tag 0,
                                                                    aligned with its partitions: Kafka
                                                                    4.3's KIP-1251 field; 4.1 skips it)
    a null value: a tombstone (the member, or the group, is gone)

Kafka 4.1 replaces type 4 by a metadata hash (KIP-1101); pylog still writes type 4 (Kafka 4.1
reads it) so a reloaded group knows the topic metadata its target assignment was computed for.
``group_records`` gives the records of a group's whole state; the driver writes the difference
from what it wrote before, and tombstones for keys that are gone. ``replay`` rebuilds groups.
Member states as Kafka's ``MemberState``: STABLE 0, UNREVOKED_PARTITIONS 1, UNRELEASED_PARTITIONS 2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from broker.coordinator.consumer_group.group import ClassicMetadata, ConsumerGroup, ConsumerMember, TopicsView
from broker.coordinator.consumer_group.reconcile import MemberAssignment, MemberState, normalize
from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8})
STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
STATES = {code: state for state, code in STATE_CODES.items()}
_INT16 = struct.Struct(">h")


def _schema(name: str, flexible: str, fields: str) -> Schema:
    return Schema(name, parse_fields(fields, None, name), Versions.parse("0"), Versions.parse(flexible))


_GROUP_KEY = _schema("ConsumerGroupKey", "none", "group_id string")
_MEMBER_KEY = _schema("ConsumerGroupMemberKey", "none", "group_id string\nmember_id string")
_VALUES = {
    GROUP_METADATA: _schema("ConsumerGroupMetadataValue", "0+", "epoch int32"),
    PARTITION_METADATA: _schema("ConsumerGroupPartitionMetadataValue", "0+", """
        topics                    []
          topic_id                uuid
          topic_name              string
          num_partitions          int32
          partition_metadata      []
            partition             int32
            racks                 []string
    """),
    MEMBER_METADATA: _schema("ConsumerGroupMemberMetadataValue", "0+", """
        instance_id               string  null
        rack_id                   string  null
        client_id                 string
        client_host               string
        subscribed_topic_names    []string
        subscribed_topic_regex    string  null
        rebalance_timeout_ms      int32   default=-1
        server_assignor           string  null
        classic_member_metadata   {}      null  tag=0  default=null
          session_timeout_ms      int32
          supported_protocols     []
            name                  string
            metadata              bytes
    """),
    TARGET_METADATA: _schema("ConsumerGroupTargetAssignmentMetadataValue", "0+", "assignment_epoch int32"),
    TARGET_MEMBER: _schema("ConsumerGroupTargetAssignmentMemberValue", "0+", """
        topic_partitions          []
          topic_id                uuid
          partitions              []int32
    """),
    CURRENT_ASSIGNMENT: _schema("ConsumerGroupCurrentMemberAssignmentValue", "0+", """
        member_epoch              int32
        previous_member_epoch     int32
        state                     int8
        assigned_partitions       []
          topic_id                uuid
          partitions              []int32
          assignment_epochs       []int32  null  tag=0  default=null
        partitions_pending_revocation  []
          topic_id                uuid
          partitions              []int32
          assignment_epochs       []int32  null  tag=0  default=null
    """),
}  # fmt: skip


def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return _INT16.pack(record_type) + _GROUP_KEY.encode({"group_id": group_id}, 0)
    return _INT16.pack(record_type) + _MEMBER_KEY.encode({"group_id": group_id, "member_id": member_id}, 0)


def decode_key(buf: bytes) -> tuple[int, str, str | None] | None:
    """``(record type, group id, member id or None)``; None for a record type not listed above."""
    if len(buf) < 2:
        raise DecodeError("consumer group record key: too short")
    record_type = _INT16.unpack_from(buf)[0]
    if record_type not in RECORD_TYPES:
        return None
    if record_type in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT):
        k = _MEMBER_KEY.decode(buf[2:], 0)
        return record_type, k.group_id, k.member_id
    return record_type, _GROUP_KEY.decode(buf[2:], 0).group_id, None


def _value(record_type: int, body: Mapping[str, object]) -> bytes:
    return _INT16.pack(0) + _VALUES[record_type].encode(body, 0)


def _decode_value(record_type: int, buf: bytes) -> Any:
    if len(buf) < 2 or _INT16.unpack_from(buf)[0] < 0:
        raise DecodeError("consumer group record value: bad version")
    return _VALUES[record_type].decode(buf[2:], 0)


def _by_id(
    parts: Mapping[str, frozenset[int]], topics: TopicsView, epochs: MemberAssignment | None = None
) -> list[dict[str, object]]:
    """``[{topic_id, partitions}]`` of the topics known; with ``epochs``, each partition's
    assignment epoch too (KIP-1251's ``assignment_epochs``, aligned with ``partitions``)."""
    out: list[dict[str, object]] = []
    for t, ps in sorted(parts.items()):
        if t not in topics or not ps:
            continue
        entry: dict[str, object] = {"topic_id": topics[t][0], "partitions": sorted(ps)}
        if epochs is not None:
            entry["assignment_epochs"] = [epochs.assignment_epoch(t, p) for p in sorted(ps)]
        out.append(entry)
    return out


def _epochs_by_name(entries: Iterable[Any], names: Mapping[object, str]) -> dict[tuple[str, int], int]:
    """The assignment epochs a record holds (none from a writer before KIP-1251)."""
    out: dict[tuple[str, int], int] = {}
    for e in entries:
        name = names.get(e.topic_id)
        if name is not None and e.assignment_epochs is not None and len(e.assignment_epochs) == len(e.partitions):
            out.update(((name, p), epoch) for p, epoch in zip(e.partitions, e.assignment_epochs, strict=True))
    return out


def _by_name(entries: Iterable[Any], names: Mapping[object, str]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for e in entries:
        name = names.get(e.topic_id)
        if name is not None:
            out.setdefault(name, set()).update(e.partitions)
    return normalize(out)


def group_records(group: ConsumerGroup, topics: TopicsView) -> dict[bytes, bytes]:
    """Every record of the group's current state, key -> value (topics by id)."""
    gid = group.group_id
    out: dict[bytes, bytes] = {
        key(GROUP_METADATA, gid): _value(GROUP_METADATA, {"epoch": group.group_epoch}),
        key(PARTITION_METADATA, gid): _value(PARTITION_METADATA, {"topics": [
            {"topic_id": tid, "topic_name": name, "num_partitions": count, "partition_metadata": []}
            for name, (tid, count) in sorted(group.subscription_metadata.items())
        ]}),
        key(TARGET_METADATA, gid): _value(TARGET_METADATA, {"assignment_epoch": group.assignment_epoch}),
    }  # fmt: skip
    for m in group.members.values():
        out[key(MEMBER_METADATA, gid, m.member_id)] = _value(MEMBER_METADATA, {
            "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor,
            "classic_member_metadata": None if m.classic is None else {
                "session_timeout_ms": m.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": meta} for n, meta in m.classic.protocols],
            },
        })  # fmt: skip
        a = m.assignment
        out[key(CURRENT_ASSIGNMENT, gid, m.member_id)] = _value(CURRENT_ASSIGNMENT, {
            "member_epoch": a.member_epoch, "previous_member_epoch": a.previous_member_epoch,
            "state": STATE_CODES[a.state], "assigned_partitions": _by_id(a.assigned, topics, a),
            "partitions_pending_revocation": _by_id(a.pending_revocation, topics, a),
        })  # fmt: skip
    for member_id, parts in group.target.items():
        if member_id in group.members:
            out[key(TARGET_MEMBER, gid, member_id)] = _value(TARGET_MEMBER, {"topic_partitions": _by_id(parts, topics)})
    return out


def replay(records: Iterable[tuple[bytes, bytes | None]], topics: TopicsView) -> dict[str, ConsumerGroup]:
    """Groups rebuilt from their records in log order (a later record replaces an earlier one of
    the same key; a tombstone removes it). Partitions of topics that no longer exist are dropped.
    Unreadable records raise ``DecodeError``."""
    latest: dict[bytes, tuple[tuple[int, str, str | None], bytes | None]] = {}
    for record_key, record_value in records:
        decoded = decode_key(record_key)
        if decoded is not None:
            latest[record_key] = (decoded, record_value)
    names = {tid: name for name, (tid, _) in topics.items()}
    groups: dict[str, ConsumerGroup] = {}
    members: dict[tuple[str, str], ConsumerMember] = {}
    assignments: dict[tuple[str, str], MemberAssignment] = {}
    for (record_type, gid, mid), value in latest.values():
        if value is None:
            continue
        group = groups.setdefault(gid, ConsumerGroup(gid))
        v = _decode_value(record_type, value)
        if record_type == GROUP_METADATA:
            group.group_epoch = v.epoch
        elif record_type == TARGET_METADATA:
            group.assignment_epoch = v.assignment_epoch
        elif record_type == PARTITION_METADATA:
            group.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
        elif record_type == MEMBER_METADATA and mid is not None:
            members[(gid, mid)] = ConsumerMember(
                mid,
                instance_id=v.instance_id,
                rack_id=v.rack_id,
                client_id=v.client_id,
                client_host=v.client_host,
                rebalance_timeout_ms=v.rebalance_timeout_ms,
                subscribed_topic_names=tuple(v.subscribed_topic_names),
                subscribed_topic_regex=v.subscribed_topic_regex,
                server_assignor=v.server_assignor,
                classic=None if v.classic_member_metadata is None else ClassicMetadata(
                    v.classic_member_metadata.session_timeout_ms,
                    tuple((p.name, bytes(p.metadata)) for p in v.classic_member_metadata.supported_protocols),
                ),
            )  # fmt: skip
        elif record_type == TARGET_MEMBER and mid is not None:
            group.target[mid] = _by_name(v.topic_partitions, names)
        elif record_type == CURRENT_ASSIGNMENT and mid is not None:
            assignments[(gid, mid)] = MemberAssignment(
                member_epoch=v.member_epoch,
                previous_member_epoch=v.previous_member_epoch,
                state=STATES.get(v.state, MemberState.STABLE),
                assigned=_by_name(v.assigned_partitions, names),
                pending_revocation=_by_name(v.partitions_pending_revocation, names),
                assigned_at=_epochs_by_name([*v.assigned_partitions, *v.partitions_pending_revocation], names),
            )
    for (gid, mid), member in members.items():
        group = groups[gid]
        group.members[mid] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = mid
        group._set_assignment(member, assignments.get((gid, mid), MemberAssignment()))  # rebuilding the owner map
    for group in groups.values():
        group.target = {m: parts for m, parts in group.target.items() if m in group.members}
    return groups
