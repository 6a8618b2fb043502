"""A share group's membership as Kafka 4.1 writes it to ``__consumer_offsets``, and back. Pure.

Facts: Kafka 4.1.1's ``group-coordinator`` record schemas (checked against the generated classes'
``SCHEMAS`` in ``kafka-group-coordinator-4.1.1.jar``; record type ids from its
``CoordinatorRecordType``). A key is an int16 record type then the key fields (v0, not
flexible); a value an int16 version (0) then the value fields (flexible)::

    type 10 ShareGroupMemberMetadata            key group, member  value rack, client id/host,
                                                                         subscribed topic names
    type 11 ShareGroupMetadata                  key group          value epoch, metadata hash
    type 12 ShareGroupTargetAssignmentMetadata  key group          value assignment epoch
    type 13 ShareGroupTargetAssignmentMember    key group, member  value [topic id, partitions]
    type 14 ShareGroupCurrentMemberAssignment   key group, member  value epoch, previous epoch,
                                                                         state, assigned partitions
    type 15 ShareGroupStatePartitionMetadata    key group          value initializing, initialized
                                                                         and deleting topics
    a null value: a tombstone

pylog writes a metadata hash of 0 (Kafka 4.1 recomputes it when it differs) and member state 0
(STABLE: share groups have no revocation). The initialized topics are the share-partitions the
group has been assigned or reset (whose state ``kafka-share-groups --delete`` removes from
``__share_group_state``). ``group_records`` gives the records of a group's whole state; the
driver writes the difference from what it wrote before, tombstones for keys that are gone;
``replay`` rebuilds the groups (members keep their epochs and assignments).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.coordinator.share_group.group import ShareGroup, ShareMember, TopicsView
from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITIONS = range(10, 16)
RECORD_TYPES = frozenset(range(10, 16))
_MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
_INT16 = struct.Struct(">h")

Initialized = dict[str, tuple[uuid.UUID, frozenset[int]]]  # topic name -> (topic id, partitions)


def _schema(name: str, flexible: str, fields: str) -> Schema:
    return Schema(name, parse_fields(fields, None, name), Versions.parse("0"), Versions.parse(flexible))


_GROUP_KEY = _schema("ShareGroupKey", "none", "group_id string")
_MEMBER_KEY = _schema("ShareGroupMemberKey", "none", "group_id string\nmember_id string")
_VALUES = {
    MEMBER_METADATA: _schema("ShareGroupMemberMetadataValue", "0+", """
        rack_id                   string  null
        client_id                 string
        client_host               string
        subscribed_topic_names    []string
    """),
    GROUP_METADATA: _schema("ShareGroupMetadataValue", "0+", "epoch int32\nmetadata_hash int64"),
    TARGET_METADATA: _schema("ShareGroupTargetAssignmentMetadataValue", "0+", "assignment_epoch int32"),
    TARGET_MEMBER: _schema("ShareGroupTargetAssignmentMemberValue", "0+", """
        topic_partitions          []
          topic_id                uuid
          partitions              []int32
    """),
    CURRENT_ASSIGNMENT: _schema("ShareGroupCurrentMemberAssignmentValue", "0+", """
        member_epoch              int32
        previous_member_epoch     int32
        state                     int8
        assigned_partitions       []
          topic_id                uuid
          partitions              []int32
    """),
    STATE_PARTITIONS: _schema("ShareGroupStatePartitionMetadataValue", "0+", """
        initializing_topics       []
          topic_id                uuid
          topic_name              string
          partitions              []int32
        initialized_topics        []
          topic_id                uuid
          topic_name              string
          partitions              []int32
        deleting_topics           []
          topic_id                uuid
          topic_name              string
    """),
}  # fmt: skip


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return _INT16.pack(record_type) + _GROUP_KEY.encode({"group_id": group_id}, 0)
    return _INT16.pack(record_type) + _MEMBER_KEY.encode({"group_id": group_id, "member_id": member_id}, 0)


def _value(record_type: int, body: Mapping[str, object]) -> bytes:
    return _INT16.pack(0) + _VALUES[record_type].encode(body, 0)


def decode_key(buf: bytes) -> tuple[int, str, str | None] | None:
    """``(record type, group id, member id or None)``; None for a record type not listed above."""
    if len(buf) < 2:
        raise DecodeError("share group record key: too short")
    record_type = _INT16.unpack_from(buf)[0]
    if record_type not in RECORD_TYPES:
        return None
    if record_type in _MEMBER_TYPES:
        k = _MEMBER_KEY.decode(buf[2:], 0)
        return record_type, k.group_id, k.member_id
    return record_type, _GROUP_KEY.decode(buf[2:], 0).group_id, None


def _assignment(member: ShareMember, topics: TopicsView) -> list[dict[str, object]]:
    return [
        {"topic_id": topics[t][0], "partitions": sorted(ps)}
        for t, ps in sorted(member.assignment.items())
        if t in topics
    ]


def group_records(group: ShareGroup, initialized: Initialized, topics: TopicsView) -> dict[bytes, bytes]:
    """Every record of the group's current state, by key."""
    gid = group.group_id
    out = {
        _key(GROUP_METADATA, gid): _value(GROUP_METADATA, {"epoch": group.group_epoch, "metadata_hash": 0}),
        _key(TARGET_METADATA, gid): _value(TARGET_METADATA, {"assignment_epoch": group.group_epoch}),
        _key(STATE_PARTITIONS, gid): _value(STATE_PARTITIONS, {
            "initializing_topics": [],
            "initialized_topics": [
                {"topic_id": tid, "topic_name": name, "partitions": sorted(ps)}
                for name, (tid, ps) in sorted(initialized.items())
            ],
            "deleting_topics": [],
        }),
    }  # fmt: skip
    for m in group.members.values():
        mid = m.member_id
        out[_key(MEMBER_METADATA, gid, mid)] = _value(MEMBER_METADATA, {
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
        })  # fmt: skip
        assigned = _assignment(m, topics)
        out[_key(TARGET_MEMBER, gid, mid)] = _value(TARGET_MEMBER, {"topic_partitions": assigned})
        out[_key(CURRENT_ASSIGNMENT, gid, mid)] = _value(CURRENT_ASSIGNMENT, {
            "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_epoch, "state": 0,
            "assigned_partitions": assigned,
        })  # fmt: skip
    return out


@dataclass
class Replayed:
    groups: dict[str, ShareGroup] = field(default_factory=dict)
    initialized: dict[str, Initialized] = field(default_factory=dict)


def replay(records: Iterable[tuple[bytes, bytes | None]], topics: TopicsView) -> Replayed:
    """Share groups rebuilt from their records in log order (the last record of a key wins, a
    tombstone removes it). Unreadable records raise ``DecodeError``."""
    latest: dict[bytes, tuple[tuple[int, str, str | None], bytes | None]] = {}
    for key, value in records:
        decoded = decode_key(key)
        if decoded is not None:
            latest[key] = (decoded, value)
    names = {tid: name for name, (tid, _) in topics.items()}
    out = Replayed()
    members: dict[tuple[str, str], ShareMember] = {}
    for (record_type, gid, mid), value in latest.values():
        if value is None:
            continue
        v = _VALUES[record_type].decode(value[2:], 0)
        if record_type == GROUP_METADATA:
            out.groups.setdefault(gid, ShareGroup(gid)).group_epoch = v.epoch
        elif record_type == STATE_PARTITIONS:
            out.initialized[gid] = {t.topic_name: (t.topic_id, frozenset(t.partitions)) for t in v.initialized_topics}
        elif mid is not None:
            member = members.setdefault((gid, mid), ShareMember(mid, 0, ()))
            if record_type == MEMBER_METADATA:
                member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
                member.subscribed_topic_names = tuple(v.subscribed_topic_names)
            elif record_type == CURRENT_ASSIGNMENT:
                member.member_epoch, member.previous_epoch = v.member_epoch, v.previous_member_epoch
                member.assignment = {
                    names[a.topic_id]: frozenset(a.partitions) for a in v.assigned_partitions if a.topic_id in names
                }
    for (gid, mid), member in members.items():
        group = out.groups.get(gid)
        if group is not None:  # members without their group's record were tombstoned with it
            group.members[mid] = member
    return out
