"""Golden bytes for the protocol primitives (protocol guide, "Protocol Primitive Types"; KIP-482
for compact forms and tagged fields), plus round-trip properties."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyspark_log.wire import types as t
from pyspark_log.wire.errors import DecodeError


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2**31 - 1, "ffffffff07"),
        (2**32 - 1, "ffffffff0f"),
    ],
)
def test_unsigned_varint_golden(value: int, golden: str):
    assert t.write_uvarint(value).hex() == golden
    assert t.read_uvarint(bytes.fromhex(golden), 0) == (value, len(golden) // 2)


@pytest.mark.parametrize(
    ("value", "golden"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)  # fmt: skip
def test_zigzag_varint_golden(value: int, golden: str):
    assert t.write_varint(value).hex() == golden
    assert t.read_varint(bytes.fromhex(golden), 0)[0] == value


def test_varlong_extremes():
    assert t.write_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert t.write_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert t.read_varlong(bytes.fromhex("ffffffffffffffffff01"), 0) == (-(2**63), 10)


def test_varint_too_long_or_truncated():
    with pytest.raises(DecodeError):
        t.read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)  # 6 bytes for a 32-bit varint
    with pytest.raises(DecodeError):
        t.read_uvarint(b"\x80", 0)
    with pytest.raises(ValueError, match="int32"):
        t.write_varint(2**31)


@given(st.integers(0, 2**64 - 1))
def test_uvarlong_round_trip(value: int):
    data = t.write_uvarint(value)
    assert t.read_uvarint(data, 0, 10) == (value, len(data))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int):
    assert t.read_varint(t.write_varint(value), 0)[0] == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int):
    assert t.read_varlong(t.write_varlong(value), 0)[0] == value


def test_fixed_width_golden():
    assert t.write_int8(-1) == b"\xff"
    assert t.write_int16(258) == b"\x01\x02"
    assert t.write_int32(-2) == b"\xff\xff\xff\xfe"
    assert t.write_int64(1) == b"\x00" * 7 + b"\x01"
    assert t.write_uint16(65535) == b"\xff\xff"
    assert t.write_uint32(2**32 - 1) == b"\xff" * 4
    assert t.write_float64(1.5) == bytes.fromhex("3ff8000000000000")
    assert t.write_bool(True) == b"\x01"
    assert t.read_bool(b"\x02", 0) == (True, 1)  # any non-zero byte is true
    assert t.read_int64(b"\xff" * 8, 0) == (-1, 8)
    with pytest.raises(DecodeError):
        t.read_int32(b"\x00\x00", 0)


def test_strings_golden():
    assert t.write_string("abc").hex() == "0003616263"
    assert t.write_nullable_string(None).hex() == "ffff"
    assert t.write_compact_string("abc").hex() == "04616263"
    assert t.write_compact_string("").hex() == "01"
    assert t.write_compact_nullable_string(None).hex() == "00"
    assert t.write_string("é").hex() == "0002c3a9"  # length counts UTF-8 bytes
    assert t.read_string(bytes.fromhex("0003616263"), 0) == ("abc", 5)
    assert t.read_nullable_string(b"\xff\xff", 0) == (None, 2)
    assert t.read_compact_string(bytes.fromhex("04616263"), 0) == ("abc", 4)
    assert t.read_compact_nullable_string(b"\x00", 0) == (None, 1)
    with pytest.raises(DecodeError):
        t.read_string(b"\xff\xff", 0)
    with pytest.raises(DecodeError):
        t.read_string(bytes.fromhex("0005616263"), 0)  # truncated
    with pytest.raises(DecodeError):
        t.read_string(bytes.fromhex("0001ff"), 0)  # not UTF-8
    with pytest.raises(DecodeError):
        t.read_compact_string(b"\x00", 0)


def test_bytes_and_records_golden():
    assert t.write_bytes(b"ab").hex() == "000000026162"
    assert t.write_nullable_bytes(None).hex() == "ffffffff"
    assert t.write_compact_bytes(b"ab").hex() == "036162"
    assert t.write_compact_nullable_bytes(None).hex() == "00"
    assert t.read_bytes(bytes.fromhex("000000026162"), 0) == (b"ab", 6)
    assert t.read_compact_nullable_bytes(b"\x00", 0) == (None, 1)
    frame = bytes.fromhex("00000003") + b"xyz" + b"tail"
    records, end = t.read_records(frame, 0, compact=False)
    assert isinstance(records, memoryview)
    assert (bytes(records), end) == (b"xyz", 7)
    assert t.read_records(b"\x00", 0, compact=True) == (None, 1)
    assert t.read_records(b"\xff\xff\xff\xff", 0, compact=False) == (None, 4)


@given(st.text(max_size=300))
def test_string_round_trips(value: str):
    assert t.read_string(t.write_string(value), 0)[0] == value
    assert t.read_compact_string(t.write_compact_string(value), 0)[0] == value


def test_uuid():
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    assert t.write_uuid(u) == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert t.read_uuid(u.bytes, 0) == (u, 16)
    assert t.write_uuid(None) == bytes(16)
    assert t.read_uuid(bytes(16), 0)[0] == t.ZERO_UUID


def test_arrays_golden():
    assert t.write_array([1, 2], t.write_int32).hex() == "000000020000000100000002"
    assert t.write_array([1, 2], t.write_int32, compact=True).hex() == "030000000100000002"
    assert t.write_array(None, t.write_int32).hex() == "ffffffff"
    assert t.write_array(None, t.write_int32, compact=True).hex() == "00"
    assert t.read_array(bytes.fromhex("000000020000000100000002"), 0, t.read_int32) == ([1, 2], 12)
    assert t.read_array(b"\x00", 0, t.read_int32, compact=True) == (None, 1)
    assert t.read_array(b"\x01", 0, t.read_int32, compact=True) == ([], 1)
    with pytest.raises(DecodeError):
        t.read_array(bytes.fromhex("7fffffff"), 0, t.read_int32)  # cannot fit


def test_tagged_fields_golden():
    data = t.write_tagged_fields({5: b"ab", 0: b"\x01"})
    assert data.hex() == "020001010502" + "6162"  # ascending tags: (0, 1 byte), (5, 2 bytes)
    fields, end = t.read_tagged_fields(data, 0)
    assert {k: bytes(v) for k, v in fields.items()} == {0: b"\x01", 5: b"ab"}
    assert end == len(data)
    assert t.write_tagged_fields({}) == b"\x00"
    with pytest.raises(DecodeError):
        t.read_tagged_fields(bytes.fromhex("010005ab"), 0)
