"""One record inside a RecordBatch v2 (Kafka documentation §5.3.2 "Record")::

    length: varint            bytes after this field
    attributes: int8          bits 0-7 unused, written as 0
    timestampDelta: varlong   timestamp - batch baseTimestamp
    offsetDelta: varint       offset - batch baseOffset
    keyLength: varint         -1 = null key
    key: byte[]
    valueLen: varint          -1 = null value
    value: byte[]
    headersCount: varint      ("no separate count for the array": it is this varint)
    Header => headerKeyLength: varint, headerKey: utf-8 (never null),
              headerValueLength: varint (-1 = null), value: byte[]

The smallest record body is 6 bytes (attributes and five one-byte varints: empty everything).

``read_records`` is the consumer hot path: a single loop over a records section with the common
one- and two-byte varints decoded inline; ``read_record`` is the plain one-record reader.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.varint import read_varint, write_varint

Header = tuple[str, bytes | None]

MIN_RECORD_BODY_BYTES = 6
NULL_LENGTH = -1

# Decoded value of every varint of one or two bytes, indexed by its 14 payload bits
# (``b0 & 0x7f | b1 << 7``): a tuple lookup is cheaper than the zig-zag arithmetic in Python.
ZIGZAG_2B: tuple[int, ...] = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))


class Record(NamedTuple):
    """A record as users see it: absolute offset and timestamp, nullable key/value, headers.

    A named tuple rather than a frozen dataclass: building one is ~6x cheaper, which matters
    on the consumer path (immutable, compared by value, ``_replace`` instead of
    ``dataclasses.replace``).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def write_record(  # noqa: PLR0917 - the lead's positional signature, used by producers
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] | list[Header] = (),
) -> None:
    """Append one encoded record (length prefix included) to ``out``."""
    head = bytearray(b"\x00")  # attributes
    write_varint(head, timestamp_delta)
    write_varint(head, offset_delta)
    if key is None:
        head.append(1)  # zig-zag(-1)
        key = b""
    else:
        write_varint(head, len(key))
    mid = bytearray()
    if value is None:
        mid.append(1)
        value = b""
    else:
        write_varint(mid, len(value))
    tail = bytearray()
    write_varint(tail, len(headers))
    for hkey, hvalue in headers:
        hkey_bytes = hkey.encode()
        write_varint(tail, len(hkey_bytes))
        tail += hkey_bytes
        if hvalue is None:
            tail.append(1)
        else:
            write_varint(tail, len(hvalue))
            tail += hvalue
    write_varint(out, len(head) + len(key) + len(mid) + len(value) + len(tail))
    out += head
    out += key
    out += mid
    out += value  # appended straight from the caller's bytes: no intermediate copy of the value
    out += tail


def _read_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        if length != NULL_LENGTH:
            raise CorruptRecordError(f"invalid field length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(buf[pos : pos + length]), pos + length


def read_headers(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    """Decode headersCount and the headers at ``pos`` (inside a record ending at ``end``)."""
    count, pos = read_varint(buf, pos)
    if count < 0 or count > end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        hkey, pos = _read_bytes(buf, pos, end)
        if hkey is None:
            raise CorruptRecordError("null header key")
        hvalue, pos = _read_bytes(buf, pos, end)
        try:
            headers.append((hkey.decode(), hvalue))
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("header key is not UTF-8") from exc
    return tuple(headers), pos


def read_record(
    buf: bytes | bytearray | memoryview, pos: int, base_offset: int, base_timestamp: int
) -> tuple[Record, int]:
    """Decode the record at ``pos``; return ``(record, next_pos)``."""
    length, pos = read_varint(buf, pos)
    end = pos + length
    if length < MIN_RECORD_BODY_BYTES or end > len(buf):
        raise CorruptRecordError(f"record length {length} is invalid or runs past the end of the batch")
    pos += 1  # attributes
    timestamp_delta, pos = read_varint(buf, pos)
    offset_delta, pos = read_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    headers, pos = read_headers(buf, pos, end)
    if pos != end:
        raise CorruptRecordError(f"record length says {length} bytes but its fields take {pos - end + length}")
    record = Record(base_offset + offset_delta, base_timestamp + timestamp_delta, key, value, headers)
    return record, end


def read_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None = None,
) -> list[Record]:
    """Decode exactly ``count`` records filling ``data[pos:end]``.

    ``timestamp_override`` replaces every record's timestamp (LogAppendTime batches use the
    batch's maxTimestamp). Raises CorruptRecordError when the records do not fill the range
    exactly or any field is malformed.
    """
    records: list[Record] = []
    zz = ZIGZAG_2B
    append = records.append
    new = tuple.__new__
    cls = Record
    try:
        for _ in range(count):
            # length: one or two bytes inline (records of up to 8 KiB), else the general reader
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    length = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    length, pos = read_varint(data, pos)
            rec_end = pos + length
            if length < MIN_RECORD_BODY_BYTES or rec_end > end:
                raise CorruptRecordError(f"record length {length} is invalid or overruns its batch")
            # attributes (ignored), then timestampDelta and offsetDelta: one or two bytes inline
            pos += 1
            b = data[pos]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    ts_delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    ts_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    off_delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    off_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                key: bytes | None = data[pos : pos + klen]
                pos += klen
            elif klen == NULL_LENGTH:
                key = None
            else:
                raise CorruptRecordError(f"invalid key length {klen}")
            # value: one or two bytes inline
            b = data[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    vlen = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                value: bytes | None = data[pos : pos + vlen]
                pos += vlen
            elif vlen == NULL_LENGTH:
                value = None
            else:
                raise CorruptRecordError(f"invalid value length {vlen}")
            # headers: almost always none
            if data[pos] == 0:
                headers: tuple[Header, ...] = ()
                pos += 1
            else:
                headers, pos = read_headers(data, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError(f"record fields do not fill its {length} bytes")
            append(
                new(
                    cls,
                    (
                        base_offset + off_delta,
                        base_timestamp + ts_delta if timestamp_override is None else timestamp_override,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of its batch") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the batch's {count} records")
    return records
