"""A share-partition's state as Kafka 4.1 persists it in ``__share_group_state``, and back. Pure.

Facts: Kafka 4.1.1's ``share-coordinator`` record schemas (``ShareSnapshotKey/Value``,
``ShareUpdateKey/Value``; checked against the generated classes' ``SCHEMAS`` in
``kafka-share-coordinator-4.1.1.jar``). A key is an int16 record type (0 ShareSnapshot,
1 ShareUpdate) then ``group_id string, topic_id uuid, partition int32`` (not flexible); a value an
int16 version (0) then, flexible::

    ShareSnapshotValue  snapshot_epoch, state_epoch, leader_epoch int32, start_offset,
                        create_timestamp, write_timestamp int64,
                        state_batches [first_offset, last_offset int64, delivery_state int8,
                                       delivery_count int16]
    ShareUpdateValue    snapshot_epoch, leader_epoch int32, start_offset int64, state_batches

The share coordinator (``coordinator``) writes a ShareSnapshot for an initialisation, a new
state epoch, and after ``share.coordinator.snapshot.update.records.per.snapshot`` updates;
ShareUpdates otherwise (Kafka's rule). Replay: an update replaces the batches it covers and moves
the start offset (batches below it go). The record's topic partition in
``__share_group_state`` is ``abs(hashCode("group:topicId:partition")) % partitions`` (Kafka's
``SharePartitionKey`` as the share coordinator hashes it).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from broker.coordinator.group.records import java_string_hashcode, kafka_abs
from broker.coordinator.share_group.partition import StateBatch
from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

SHARE_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
_INT16 = struct.Struct(">h")


def _schema(name: str, flexible: str, fields: str) -> Schema:
    return Schema(name, parse_fields(fields, None, name), Versions.parse("0"), Versions.parse(flexible))


_KEY = _schema("ShareSnapshotKey", "none", "group_id string\ntopic_id uuid\npartition int32")
_BATCHES = """
    state_batches             []
      first_offset            int64
      last_offset             int64
      delivery_state          int8
      delivery_count          int16
"""
_SNAPSHOT = _schema("ShareSnapshotValue", "0+", """
    snapshot_epoch            int32
    state_epoch               int32
    leader_epoch              int32
    start_offset              int64
    create_timestamp          int64
    write_timestamp           int64
""" + _BATCHES)  # fmt: skip
_UPDATE = _schema("ShareUpdateValue", "0+", """
    snapshot_epoch            int32
    leader_epoch              int32
    start_offset              int64
""" + _BATCHES)  # fmt: skip


@dataclass(frozen=True)
class PersistedState:
    """What ``__share_group_state`` holds for one share-partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    snapshot_epoch: int = 0


def state_partition(group_id: str, topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    return kafka_abs(java_string_hashcode(f"{group_id}:{topic_id_str(topic_id)}:{partition}")) % partitions


def topic_id_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(SHARE_SNAPSHOT) + _KEY.encode(
        {"group_id": group_id, "topic_id": topic_id, "partition": partition}, 0
    )


def snapshot_value(state: PersistedState, now_ms: int) -> bytes:
    body = {
        "snapshot_epoch": state.snapshot_epoch,
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "create_timestamp": now_ms,
        "write_timestamp": now_ms,
        "state_batches": [b.__dict__ for b in state.batches],
    }
    return _INT16.pack(0) + _SNAPSHOT.encode(body, 0)


def update_value(state: PersistedState) -> bytes:
    body = {
        "snapshot_epoch": state.snapshot_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "state_batches": [b.__dict__ for b in state.batches],
    }
    return _INT16.pack(0) + _UPDATE.encode(body, 0)


def update_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(SHARE_UPDATE) + _KEY.encode(
        {"group_id": group_id, "topic_id": topic_id, "partition": partition}, 0
    )


def decode_key(buf: bytes) -> tuple[int, str, uuid.UUID, int] | None:
    """``(record type, group, topic id, partition)``; None for a record type not listed above."""
    if len(buf) < 2:
        raise DecodeError("share state key: too short")
    record_type = _INT16.unpack_from(buf)[0]
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        return None
    k = _KEY.decode(buf[2:], 0)
    return record_type, k.group_id, k.topic_id, k.partition


def _batches(entries: Iterable[object]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)  # type: ignore[attr-defined]
        for b in entries
    )


def replay(previous: PersistedState | None, record_type: int, value: bytes | None) -> PersistedState | None:
    """Apply one record to the share-partition's state (a null value deletes it)."""
    if value is None:
        return None
    if len(value) < 2 or _INT16.unpack_from(value)[0] < 0:
        raise DecodeError("share state value: bad version")
    if record_type == SHARE_SNAPSHOT:
        v = _SNAPSHOT.decode(value[2:], 0)
        return PersistedState(
            v.state_epoch, v.leader_epoch, v.start_offset, _batches(v.state_batches), v.snapshot_epoch
        )
    v = _UPDATE.decode(value[2:], 0)
    if previous is None:
        return None  # an update without its snapshot: Kafka ignores it as well
    start = v.start_offset if v.start_offset >= 0 else previous.start_offset
    update = _batches(v.state_batches)
    kept: list[StateBatch] = []
    for b in previous.batches:  # the update's batches replace the offsets they cover
        for lo, hi in _uncovered(b.first_offset, b.last_offset, update):
            kept.append(StateBatch(lo, hi, b.delivery_state, b.delivery_count))
    merged = sorted([*kept, *update], key=lambda b: b.first_offset)
    return PersistedState(
        previous.state_epoch, v.leader_epoch, start, tuple(b for b in merged if b.last_offset >= start),
        v.snapshot_epoch,
    )  # fmt: skip


def _uncovered(lo: int, hi: int, cover: Iterable[StateBatch]) -> list[tuple[int, int]]:
    parts = [(lo, hi)]
    for c in cover:
        nxt = []
        for a, b in parts:
            if c.last_offset < a or c.first_offset > b:
                nxt.append((a, b))
                continue
            if a < c.first_offset:
                nxt.append((a, c.first_offset - 1))
            if b > c.last_offset:
                nxt.append((c.last_offset + 1, b))
        parts = nxt
    return parts
