"""Zig-zag varints (protobuf style), as used inside RecordBatch v2 records (Kafka documentation §5.3.2 "Record").

Layout: a signed value ``v`` is first zig-zag mapped to an unsigned one
(``0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, …``, i.e. ``(v << 1) ^ (v >> 63)``), then written in 7-bit
groups, least significant group first, with the continuation bit ``0x80`` set on every byte but
the last::

    value   zig-zag   bytes
    0       0         00
    -1      1         01
    1       2         02
    63      126       7e
    -64     127       7f
    64      128       80 01
    300     600       d8 04
    int32 min         ff ff ff ff 0f        (a varint is at most 5 bytes)
    int64 min         ff ff ff ff ff ff ff ff ff 01   (a varlong at most 10)

Kafka calls the 32-bit form a *varint* (record length, offsetDelta, key/value/header lengths,
header count) and the 64-bit form a *varlong* (timestampDelta); the bytes of a value are the
same in both. Readers here accept up to 10 bytes for either and leave range checks to callers.

The hot decoders in ``batch.py`` and ``columnar.py`` inline the one-byte case
(``b < 0x80 -> (b >> 1) ^ -(b & 1)``) and call ``read_varint`` only for longer encodings.
"""

from __future__ import annotations

from pyspark_log.records.errors import CorruptRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
CONTINUATION_MASK = 0x80
PAYLOAD_MASK = 0x7F

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_UINT64_MASK = 0xFFFFFFFFFFFFFFFF

# One-byte encodings of every value in [-64, 63], precomputed for the encoder's fast path.
_SMALL = {v: bytes((((v << 1) ^ (v >> 63)) & PAYLOAD_MASK,)) for v in range(-64, 64)}


def zigzag(value: int) -> int:
    """Map a signed int64 to the unsigned value whose 7-bit groups are written."""
    return ((value << 1) ^ (value >> 63)) & _UINT64_MASK


def unzigzag(value: int) -> int:
    """Inverse of ``zigzag``."""
    return (value >> 1) ^ -(value & 1)


def _check_range(value: int) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed integer (varint or varlong; the bytes are the same)."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag encoding of ``value`` (an int64) to ``out``."""
    if -64 <= value < 64:
        out.append(((value << 1) ^ (value >> 63)) & PAYLOAD_MASK)
        return
    _check_range(value)
    v = ((value << 1) ^ (value >> 63)) & _UINT64_MASK
    while v >= CONTINUATION_MASK:
        out.append((v & PAYLOAD_MASK) | CONTINUATION_MASK)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint/varlong at ``pos``; return ``(value, next_pos)``.

    Raises CorruptRecordError when the input ends inside the varint or it runs past 10 bytes.
    """
    end = len(buf)
    if pos >= end:
        raise CorruptRecordError("truncated varint")
    b = buf[pos]
    if b < CONTINUATION_MASK:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & PAYLOAD_MASK
    shift = 7
    pos += 1
    for _ in range(MAX_VARLONG_BYTES - 1):
        if pos >= end:
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & PAYLOAD_MASK) << shift
        if b < CONTINUATION_MASK:
            result &= _UINT64_MASK
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError("varint longer than 10 bytes")


def varint_size(value: int) -> int:
    """Bytes the zig-zag encoding of ``value`` takes."""
    v = zigzag(value)
    size = 1
    while v >= CONTINUATION_MASK:
        v >>= 7
        size += 1
    return size


# Unsigned varints (no zig-zag) appear in the flexible-version ("compact") encodings of KRaft
# control records: array lengths + 1 and tagged-field counts.


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (7-bit groups, no zig-zag)."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value >= CONTINUATION_MASK:
        out.append((value & PAYLOAD_MASK) | CONTINUATION_MASK)
        value >>= 7
    out.append(value)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint of at most 5 bytes (a uint32); return ``(value, next_pos)``."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(MAX_VARINT_BYTES):
        if pos >= end:
            raise CorruptRecordError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        result |= (b & PAYLOAD_MASK) << shift
        if b < CONTINUATION_MASK:
            if result > 0xFFFFFFFF:
                raise CorruptRecordError("unsigned varint exceeds 32 bits")
            return result, pos
        shift += 7
    raise CorruptRecordError("unsigned varint longer than 5 bytes")
