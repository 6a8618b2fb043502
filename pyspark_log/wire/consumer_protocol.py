"""The consumer's embedded protocol: what JoinGroup metadata and SyncGroup assignments carry for
groups of protocol type ``consumer`` (Kafka ``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment``, versions 0-3, never flexible).

Layout: an int16 version, then the fields of that version::

    Subscription  topics []string, user_data bytes?, owned_partitions [topic, [partition]] (v1+),
                  generation_id int32 (v2+, default -1), rack_id string? (v3+)
    Assignment    assigned_partitions [topic string, partitions []int32], user_data bytes?

A version newer than ours is read with our newest schema (newer versions only append fields);
the broker reads subscriptions to know a group's topics, the client writes and reads both.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
_INT16 = struct.Struct(">h")

SUBSCRIPTION = Schema(
    "ConsumerProtocolSubscription",
    parse_fields(
        """
        topics                    []string
        user_data                 bytes   null  default=null
        owned_partitions          []      1+
          topic                   string  1+
          partitions              []int32 1+
        generation_id             int32   2+  default=-1
        rack_id                   string  3+  null  default=null
        """,
        None,
        "ConsumerProtocolSubscription",
    ),
    Versions.parse("0-3"),
    Versions.parse("none"),
)

ASSIGNMENT = Schema(
    "ConsumerProtocolAssignment",
    parse_fields(
        """
        assigned_partitions       []
          topic                   string
          partitions              []int32
        user_data                 bytes   null  default=null
        """,
        None,
        "ConsumerProtocolAssignment",
    ),
    Versions.parse("0-3"),
    Versions.parse("none"),
)


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[tuple[str, int], ...] = field(default=())
    user_data: bytes | None = None


def _group(pairs: Iterable[tuple[str, int]]) -> list[dict[str, object]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]


def _flatten(entries: Iterable[Mapping[str, object]]) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for entry in entries:
        topic = str(entry["topic"])
        parts = entry["partitions"]
        assert isinstance(parts, list)
        out.extend((topic, int(p)) for p in parts)
    return tuple(out)


def _version(buf: bytes | memoryview, what: str) -> tuple[int, memoryview]:
    view = memoryview(buf)
    if len(view) < 2:
        raise DecodeError(f"{what}: {len(view)} bytes is too short")
    version = _INT16.unpack_from(view)[0]
    if version < 0:
        raise DecodeError(f"{what}: version {version}")
    return version, view[2:]


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    body = {
        "topics": list(sub.topics),
        "user_data": sub.user_data,
        "owned_partitions": _group(sub.owned_partitions),
        "generation_id": sub.generation_id,
        "rack_id": sub.rack_id,
    }
    return _INT16.pack(version) + SUBSCRIPTION.encode(body, version)


def decode_subscription(buf: bytes | memoryview) -> Subscription:
    """Raises DecodeError on bytes that are not a consumer subscription."""
    version, body = _version(buf, "consumer subscription")
    m = SUBSCRIPTION.decode(body, min(version, SUBSCRIPTION.valid.hi))
    user_data = None if m.user_data is None else bytes(m.user_data)
    return Subscription(tuple(m.topics), user_data, _flatten(m.owned_partitions), m.generation_id, m.rack_id)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    body = {"assigned_partitions": _group(assignment.partitions), "user_data": assignment.user_data}
    return _INT16.pack(version) + ASSIGNMENT.encode(body, version)


def decode_assignment(buf: bytes | memoryview) -> Assignment:
    """An empty buffer is an empty assignment (what the coordinator gives a member the leader
    left out); raises DecodeError on other malformed bytes."""
    if len(buf) == 0:
        return Assignment()
    version, body = _version(buf, "consumer assignment")
    m = ASSIGNMENT.decode(body, min(version, ASSIGNMENT.valid.hi))
    user_data = None if m.user_data is None else bytes(m.user_data)
    return Assignment(_flatten(m.assigned_partitions), user_data)
