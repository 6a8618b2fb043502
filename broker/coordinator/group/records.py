"""The records of ``__consumer_offsets`` (Kafka documentation §5.5 "Distribution": the coordinator appends each
OffsetCommit "to a special compacted Kafka topic"): keys, values and the coordinator's partition.

Every record's key and value start with an int16 version, then the fields of that version::

    key   v0, v1   OffsetCommitKey    group string, topic string, partition int32
    key   v2       GroupMetadataKey   group string
    value (offset)  OffsetCommitValue  v0-v4 (v4 flexible):
                    offset int64, leader_epoch int32 (v3+), metadata string,
                    commit_timestamp int64, expire_timestamp int64 (v1 only)
    value (group)   GroupMetadataValue v0-v4 (v4 flexible):
                    protocol_type string, generation int32, protocol string?, leader string?,
                    current_state_timestamp int64 (v2+), members [member_id, group_instance_id (v3+),
                    client_id, client_host, rebalance_timeout int32 (v1+), session_timeout int32,
                    subscription bytes, assignment bytes]
    a null value   tombstone: the offset, or the group, was removed

Strings are int16-length (compact in flexible versions). We write what Kafka 3.7 writes: offset
key v1, offset value v3 (v1 when the commit carries an expire timestamp, OffsetCommit v1-v4),
group key v2, group value v3. Values of a newer version are read with our newest schema
(KIP-915: new fields of those versions are tagged, so the known prefix still parses).

The coordinator of a group is the leader of partition ``abs(hashCode(group)) % partitions`` of
the topic, with Java's ``String.hashCode`` over UTF-16 code units and Kafka's ``Utils.abs``
(which maps ``Integer.MIN_VALUE`` to 0).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

OFFSETS_TOPIC = "__consumer_offsets"

_INT16 = struct.Struct(">h")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


def _schema(name: str, valid: str, flexible: str, fields: str) -> Schema:
    return Schema(name, parse_fields(fields, None, name), Versions.parse(valid), Versions.parse(flexible))


OFFSET_COMMIT_KEY = _schema(
    "OffsetCommitKey", "0-1", "none",
    """
    group                     string
    topic                     string
    partition                 int32
    """,
)  # fmt: skip

GROUP_METADATA_KEY = _schema(
    "GroupMetadataKey", "2", "none",
    """
    group                     string
    """,
)  # fmt: skip

OFFSET_COMMIT_VALUE = _schema(
    "OffsetCommitValue", "0-4", "4+",
    """
    offset                    int64
    leader_epoch              int32   3+  default=-1
    metadata                  string
    commit_timestamp          int64
    expire_timestamp          int64   1   default=-1
    """,
)  # fmt: skip

GROUP_METADATA_VALUE = _schema(
    "GroupMetadataValue", "0-4", "4+",
    """
    protocol_type             string
    generation                int32
    protocol                  string  null
    leader                    string  null
    current_state_timestamp   int64   2+  default=-1
    members                   []
      member_id               string
      group_instance_id       string  3+  null  default=null
      client_id               string
      client_host             string
      rebalance_timeout       int32   1+
      session_timeout         int32
      subscription            bytes
      assignment              bytes
    """,
)  # fmt: skip


# -- the coordinator's partition ---------------------------------------------------------------


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + … + s[n-1]`` over UTF-16 code units, int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    return kafka_abs(java_string_hashcode(group_id)) % partitions


# -- typed records -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed offset as the cache and the offset value record hold it."""

    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # -1: expire per offsets.retention.minutes


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A group metadata value: what survives a coordinator restart."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


def _versioned(version: int, body: bytes) -> bytes:
    return _INT16.pack(version) + body


def offset_key(group: str, topic: str, partition: int) -> bytes:
    body = OFFSET_COMMIT_KEY.encode({"group": group, "topic": topic, "partition": partition}, OFFSET_KEY_VERSION)
    return _versioned(OFFSET_KEY_VERSION, body)


def group_key(group: str) -> bytes:
    return _versioned(GROUP_KEY_VERSION, GROUP_METADATA_KEY.encode({"group": group}, GROUP_KEY_VERSION))


def offset_value(value: CommittedOffset) -> bytes:
    version = OFFSET_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp_ms >= 0 else OFFSET_VALUE_VERSION
    body = {
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp_ms,
        "expire_timestamp": value.expire_timestamp_ms,
    }
    return _versioned(version, OFFSET_COMMIT_VALUE.encode(body, version))


def offset_entries(group: str, offsets: Mapping[tuple[str, int], CommittedOffset]) -> list[tuple[bytes, bytes | None]]:
    """The (key, value) records of a commit of ``offsets`` by ``group``: one OffsetCommit record
    per partition, in the order given (OffsetCommit and TxnOffsetCommit write the same records)."""
    return [(offset_key(group, t, p), offset_value(v)) for (t, p), v in offsets.items()]


def group_value(group: StoredGroup) -> bytes:
    body = {
        "protocol_type": group.protocol_type,
        "generation": group.generation,
        "protocol": group.protocol,
        "leader": group.leader,
        "current_state_timestamp": group.current_state_timestamp_ms,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in group.members
        ],
    }
    return _versioned(GROUP_VALUE_VERSION, GROUP_METADATA_VALUE.encode(body, GROUP_VALUE_VERSION))


def _split(buf: bytes, what: str) -> tuple[int, bytes]:
    if len(buf) < 2:
        raise DecodeError(f"{what}: {len(buf)} bytes is too short for a version")
    return _INT16.unpack_from(buf)[0], buf[2:]


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key of a ``__consumer_offsets`` record; None for a key version we do not know (Kafka
    3.7 skips those too: other record types of newer coordinators)."""
    version, body = _split(buf, "key")
    if version in (0, 1):
        k = OFFSET_COMMIT_KEY.decode(body, version)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_KEY_VERSION:
        return GroupKey(GROUP_METADATA_KEY.decode(body, version).group)
    return None


def decode_offset_value(buf: bytes) -> CommittedOffset:
    version, body = _split(buf, "offset commit value")
    if version < 0:
        raise DecodeError(f"offset commit value version {version}")
    v = OFFSET_COMMIT_VALUE.decode(body, min(version, OFFSET_COMMIT_VALUE.valid.hi))
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def decode_group_value(buf: bytes) -> StoredGroup:
    version, body = _split(buf, "group metadata value")
    if version < 0:
        raise DecodeError(f"group metadata value version {version}")
    v = GROUP_METADATA_VALUE.decode(body, min(version, GROUP_METADATA_VALUE.valid.hi))
    members = tuple(
        StoredMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if version >= 1 else m.session_timeout,
            m.session_timeout,
            bytes(m.subscription),
            bytes(m.assignment),
        )
        for m in v.members
    )
    return StoredGroup(v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp, members)
