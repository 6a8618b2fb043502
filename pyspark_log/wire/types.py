"""Primitive types of the Kafka protocol: fixed-width integers, varints, strings, bytes, arrays,
UUIDs and KIP-482 tagged-field sections.

Byte layouts (protocol guide "Protocol Primitive Types"; all fixed-width integers big-endian)::

    int8 / int16 / int32 / int64      1 / 2 / 4 / 8 bytes, two's complement
    uint16 / uint32                   2 / 4 bytes, unsigned
    float64                           8 bytes, IEEE 754 binary64
    boolean                           1 byte, 0 = false, anything else = true
    unsigned_varint                   7 bits a byte, least significant group first, high bit =
                                      "more bytes follow"; at most 5 bytes (10 for a varlong)
    varint / varlong                  zig-zag ((n << 1) ^ (n >> 31|63)) then unsigned_varint
    uuid                              16 bytes
    string / nullable_string          int16 length (-1 = null), then UTF-8
    compact_(nullable_)string         unsigned_varint length + 1 (0 = null), then UTF-8
    bytes / nullable_bytes            int32 length (-1 = null), then raw bytes
    compact_(nullable_)bytes          unsigned_varint length + 1 (0 = null), then raw bytes
    records                           nullable bytes holding RecordBatch bytes, never decoded here
    array / compact_array             int32 count (-1 = null) / unsigned_varint count + 1 (0 = null)
    tagged fields (KIP-482)           unsigned_varint count, then per field: unsigned_varint tag,
                                      unsigned_varint size, size bytes of data; tags ascending

Every reader is ``read_x(buf, pos) -> (value, new_pos)`` over ``bytes`` or a byte ``memoryview``
and raises ``DecodeError`` on truncated or invalid input; every writer is ``write_x(value) ->
bytes``. The generated codecs (``codegen.py``) inline the fast paths of these and call them for
the rare ones, so this module is also the reference the golden-byte tests pin down.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from pyspark_log.wire.errors import DecodeError

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

ZERO_UUID = uuid.UUID(int=0)

_UVARINT_MAX_BYTES = 5
_UVARLONG_MAX_BYTES = 10
_ONE_BYTE = [bytes((i,)) for i in range(128)]


# -- fixed width -------------------------------------------------------------------------------


def _fixed(s: struct.Struct) -> tuple[Callable[[Buffer, int], tuple[int, int]], Callable[[int], bytes]]:
    size = s.size
    unpack_from = s.unpack_from

    def read(buf: Buffer, pos: int) -> tuple[int, int]:
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error as exc:
            raise DecodeError(f"truncated {s.format}") from exc

    return read, s.pack


read_int8, write_int8 = _fixed(INT8)
read_int16, write_int16 = _fixed(INT16)
read_int32, write_int32 = _fixed(INT32)
read_int64, write_int64 = _fixed(INT64)
read_uint16, write_uint16 = _fixed(UINT16)
read_uint32, write_uint32 = _fixed(UINT32)


def read_float64(buf: Buffer, pos: int) -> tuple[float, int]:
    try:
        return FLOAT64.unpack_from(buf, pos)[0], pos + 8
    except struct.error as exc:
        raise DecodeError("truncated float64") from exc


def write_float64(value: float) -> bytes:
    return FLOAT64.pack(value)


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise DecodeError("truncated boolean")
    return buf[pos] != 0, pos + 1


def write_bool(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


# -- varints -----------------------------------------------------------------------------------


def read_uvarint(buf: Buffer, pos: int, max_bytes: int = _UVARINT_MAX_BYTES) -> tuple[int, int]:
    """An unsigned varint of at most ``max_bytes`` bytes (5: 32-bit; 10: 64-bit)."""
    value = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise DecodeError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise DecodeError(f"unsigned varint longer than {max_bytes} bytes")


def write_uvarint(value: int) -> bytes:
    """Unsigned varint of a non-negative int (up to 64 bits)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag signed varint (int32 range)."""
    raw, pos = read_uvarint(buf, pos, _UVARINT_MAX_BYTES)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(value: int) -> bytes:
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"varint out of int32 range: {value}")
    return write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zig-zag signed varlong (int64 range)."""
    raw, pos = read_uvarint(buf, pos, _UVARLONG_MAX_BYTES)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varlong(value: int) -> bytes:
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"varlong out of int64 range: {value}")
    return write_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# -- uuid --------------------------------------------------------------------------------------


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def uuid_bytes(value: uuid.UUID | Buffer | None) -> bytes:
    """The 16 wire bytes of a UUID given as ``uuid.UUID`` or 16 raw bytes (None = all zero)."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None:
        return ZERO_UUID.bytes
    raw = bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, not {len(raw)}")
    return raw


def write_uuid(value: uuid.UUID | Buffer | None) -> bytes:
    return uuid_bytes(value)


# -- length-prefixed: strings, bytes -----------------------------------------------------------


def _take(buf: Buffer, pos: int, length: int, what: str) -> int:
    end = pos + length
    if end > len(buf):
        raise DecodeError(f"truncated {what}: {length} bytes announced, {len(buf) - pos} left")
    return end


def _utf8(raw: Buffer) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string: {exc}") from exc


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    length, pos = read_int16(buf, pos)
    if length < 0:
        if length != -1:
            raise DecodeError(f"string length {length}")
        return None, pos
    end = _take(buf, pos, length, "string")
    return _utf8(buf[pos:end]), end


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    value, pos = read_nullable_string(buf, pos)
    if value is None:
        raise DecodeError("null in a non-nullable string")
    return value, pos


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "compact string")
    return _utf8(buf[pos:end]), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    value, pos = read_compact_nullable_string(buf, pos)
    if value is None:
        raise DecodeError("null in a non-nullable compact string")
    return value, pos


def write_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes exceeds int16 length")
    return INT16.pack(len(raw)) + raw


def write_string(value: str) -> bytes:
    if value is None:
        raise ValueError("null in a non-nullable string")
    return write_nullable_string(value)


def write_compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode("utf-8")
    return write_uvarint(len(raw) + 1) + raw


def write_compact_string(value: str) -> bytes:
    if value is None:
        raise ValueError("null in a non-nullable compact string")
    return write_compact_nullable_string(value)


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_int32(buf, pos)
    if length < 0:
        if length != -1:
            raise DecodeError(f"bytes length {length}")
        return None, pos
    end = _take(buf, pos, length, "bytes")
    return bytes(buf[pos:end]), end


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    value, pos = read_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null in non-nullable bytes")
    return value, pos


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "compact bytes")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    value, pos = read_compact_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null in non-nullable compact bytes")
    return value, pos


def write_nullable_bytes(value: Buffer | None) -> bytes:
    if value is None:
        return b"\xff\xff\xff\xff"
    return INT32.pack(len(value)) + bytes(value)


def write_bytes(value: Buffer) -> bytes:
    if value is None:
        raise ValueError("null in non-nullable bytes")
    return write_nullable_bytes(value)


def write_compact_nullable_bytes(value: Buffer | None) -> bytes:
    if value is None:
        return b"\x00"
    return write_uvarint(len(value) + 1) + bytes(value)


def write_compact_bytes(value: Buffer) -> bytes:
    if value is None:
        raise ValueError("null in non-nullable compact bytes")
    return write_compact_nullable_bytes(value)


def read_records(buf: Buffer, pos: int, *, compact: bool) -> tuple[memoryview | None, int]:
    """Records: nullable (compact) bytes returned as a zero-copy ``memoryview`` slice of ``buf``."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        length = n - 1
    else:
        length, pos = read_int32(buf, pos)
        if length < -1:
            raise DecodeError(f"records length {length}")
    if length < 0:
        return None, pos
    end = _take(buf, pos, length, "records")
    return memoryview(buf)[pos:end], end


# -- arrays ------------------------------------------------------------------------------------


def read_array(
    buf: Buffer, pos: int, read_item: Callable[[Buffer, int], tuple[T, int]], *, compact: bool = False
) -> tuple[list[T] | None, int]:
    """An (optionally compact) nullable array of items read by ``read_item``."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        count = n - 1
    else:
        count, pos = read_int32(buf, pos)
        if count < -1:
            raise DecodeError(f"array count {count}")
    if count < 0:
        return None, pos
    if count > len(buf) - pos:
        raise DecodeError(f"array of {count} items cannot fit in {len(buf) - pos} bytes")
    items = []
    for _ in range(count):
        item, pos = read_item(buf, pos)
        items.append(item)
    return items, pos


def write_array(items: Sequence[T] | None, write_item: Callable[[T], bytes], *, compact: bool = False) -> bytes:
    if items is None:
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    head = write_uvarint(len(items) + 1) if compact else INT32.pack(len(items))
    return head + b"".join(write_item(item) for item in items)


# -- tagged fields (KIP-482) -------------------------------------------------------------------


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[dict[int, memoryview], int]:
    """A tagged-field section as ``{tag: raw data}`` (callers decode the tags they know)."""
    count, pos = read_uvarint(buf, pos)
    fields: dict[int, memoryview] = {}
    view = memoryview(buf)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = _take(buf, pos, size, "tagged field")
        fields[tag] = view[pos:end]
        pos = end
    return fields, pos


def write_tagged_fields(fields: Mapping[int, Buffer]) -> bytes:
    """A tagged-field section; tags are written in ascending order as KIP-482 requires."""
    if not fields:
        return b"\x00"
    parts = [write_uvarint(len(fields))]
    for tag in sorted(fields):
        data = fields[tag]
        parts += (write_uvarint(tag), write_uvarint(len(data)), bytes(data))
    return b"".join(parts)
