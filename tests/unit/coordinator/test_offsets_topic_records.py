"""``__consumer_offsets`` records (Kafka's OffsetCommitKey/Value, GroupMetadataKey/Value) and the
coordinator partition (``abs(String.hashCode(group)) % partitions``, Kafka documentation §5.5 "Distribution")."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.group.records import (
    CommittedOffset,
    GroupKey,
    OffsetKey,
    StoredGroup,
    StoredMember,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    java_string_hashcode,
    kafka_abs,
    offset_key,
    offset_value,
    partition_for,
)
from pyspark_log.wire.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),  # Java's famous collision
        ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # one code point, two UTF-16 units
        ("é", 233),
    ],
)
def test_java_string_hashcode_golden_values(text: str, java_hash: int) -> None:
    assert java_string_hashcode(text) == java_hash


def test_utils_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("BB", 7) == partition_for("Aa", 7) == 2112 % 7


def test_offset_commit_key_v1_golden_bytes() -> None:
    key = offset_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert decode_key(key) == OffsetKey("g", "t", 3)
    # v0 keys (older brokers) read the same way
    assert decode_key(struct.pack(">hh1sh1si", 0, 1, b"g", 1, b"t", 3)) == OffsetKey("g", "t", 3)


def test_group_metadata_key_v2_golden_bytes() -> None:
    assert group_key("grp") == struct.pack(">hh3s", 2, 3, b"grp")
    assert decode_key(group_key("grp")) == GroupKey("grp")
    assert decode_key(struct.pack(">hh1s", 9, 1, b"x")) is None  # unknown record types are skipped


def test_offset_commit_value_v3_golden_bytes_and_v1_with_expiry() -> None:
    value = offset_value(CommittedOffset(42, 5, "meta", 1000))
    assert value == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1000)
    assert decode_offset_value(value) == CommittedOffset(42, 5, "meta", 1000, -1)
    expiring = offset_value(CommittedOffset(7, -1, "", 1000, 9000))
    assert expiring == struct.pack(">hqhqq", 1, 7, 0, 1000, 9000)
    assert decode_offset_value(expiring) == CommittedOffset(7, -1, "", 1000, 9000)
    v0 = struct.pack(">hqh1sq", 0, 8, 1, b"m", 55)
    assert decode_offset_value(v0) == CommittedOffset(8, -1, "m", 55, -1)


def test_group_metadata_value_v3_round_trip() -> None:
    stored = StoredGroup(
        "consumer",
        4,
        "range",
        "m-1",
        123,
        (
            StoredMember("m-1", None, "client", "/127.0.0.1", 5000, 3000, b"sub", b"assign"),
            StoredMember("m-2", "inst", "client", "/127.0.0.2", 5000, 3000, b"", b""),
        ),
    )
    encoded = group_value(stored)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group_value(encoded) == stored
    empty = StoredGroup("consumer", 5, None, None, 456, ())
    assert decode_group_value(group_value(empty)) == empty


def test_consumer_protocol_round_trips_and_reads_v0() -> None:
    sub = Subscription(("a", "b"), b"ud", (("a", 0), ("a", 1)), 3, "rack")
    assert decode_subscription(encode_subscription(sub)) == sub
    v0 = encode_subscription(Subscription(("x",)), version=0)
    assert v0 == struct.pack(">hih1si", 0, 1, 1, b"x", -1)
    assert decode_subscription(v0).topics == ("x",)
    assignment = Assignment((("t", 0), ("t", 2), ("u", 1)))
    assert decode_assignment(encode_assignment(assignment)) == assignment
    assert decode_assignment(b"") == Assignment()
