"""Zig-zag varints of RecordBatch v2 records (Kafka documentation §5.3.2 "Record": "length: varint", "timestampDelta:
varlong"), checked against hand-written encodings and by round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.varint import (
    encode_varint,
    read_uvarint,
    read_varint,
    unzigzag,
    varint_size,
    write_uvarint,
    write_varint,
    zigzag,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

GOLDEN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (8191, "fe7f"),
    (8192, "808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), GOLDEN)
def test_golden_encodings(value: int, hex_bytes: str) -> None:
    expected = bytes.fromhex(hex_bytes)
    assert encode_varint(value) == expected
    out = bytearray(b"\xaa")
    write_varint(out, value)
    assert bytes(out) == b"\xaa" + expected
    assert read_varint(b"\xaa" + expected + b"\xbb", 1) == (value, 1 + len(expected))
    assert varint_size(value) == len(expected)


def test_zigzag_maps_small_magnitudes_to_small_numbers() -> None:
    assert [zigzag(v) for v in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert [unzigzag(v) for v in (0, 1, 2, 3, 4)] == [0, -1, 1, -2, 2]
    assert zigzag(INT64_MIN) == 2**64 - 1


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_round_trip(value: int) -> None:
    data = encode_varint(value)
    assert read_varint(data, 0) == (value, len(data))
    assert len(data) == varint_size(value) <= 10


def test_out_of_range_values_are_rejected() -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varint(2**63)
    with pytest.raises(ValueError, match="int64"):
        write_varint(bytearray(), -(2**63) - 1)


@pytest.mark.parametrize("hex_bytes", [h for _, h in GOLDEN if len(h) > 2])
def test_truncated_varint_at_every_position(hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes)
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            read_varint(data[:cut], 0)


def test_varint_longer_than_ten_bytes() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        read_varint(b"\x80" * 10 + b"\x00", 0)


def test_reading_from_memoryview_and_bytearray() -> None:
    data = bytearray(b"\x00" + encode_varint(-300))
    assert read_varint(memoryview(data), 1) == (-300, 3)
    assert read_varint(data, 1) == (-300, 3)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    out = bytearray()
    write_uvarint(out, value)
    assert read_uvarint(bytes(out), 0) == (value, len(out))


def test_unsigned_varint_golden_and_errors() -> None:
    out = bytearray()
    write_uvarint(out, 300)
    assert bytes(out) == bytes.fromhex("ac02")
    with pytest.raises(ValueError, match="unsigned"):
        write_uvarint(bytearray(), -1)
    with pytest.raises(CorruptRecordError, match="exceeds 32 bits"):
        read_uvarint(bytes.fromhex("ffffffff7f"), 0)
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        read_uvarint(b"\x80" * 5 + b"\x01", 0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        read_uvarint(b"\x80", 0)
