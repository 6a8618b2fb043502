"""Zig-zag varints (protobuf style), as used inside RecordBatch v2 records (seed 002 §5.3.2).

A varint is a signed int32 and a varlong a signed int64, both zig-zag encoded into 7-bit groups,
least significant group first, high bit set on every byte but the last.
"""

from __future__ import annotations

from pyspark_log.records.errors import CorruptRecordError

_MAX_VARLONG_BYTES = 10


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed integer (varint or varlong; the bytes are the same)."""
    v = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag encoding of ``value`` to ``out``."""
    v = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint/varlong at ``pos``; return ``(value, next_pos)``."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(_MAX_VARLONG_BYTES):
        if pos >= end:
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return unzigzag(result), pos
        shift += 7
    raise CorruptRecordError("varint longer than 10 bytes")


def varint_size(value: int) -> int:
    """Bytes the zig-zag encoding of ``value`` takes."""
    v = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size
