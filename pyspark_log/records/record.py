"""One record inside a RecordBatch v2 (seed 002 §5.3.2)::

    length: varint            bytes after this field
    attributes: int8          unused, 0
    timestampDelta: varlong   timestamp - batch baseTimestamp
    offsetDelta: varint       offset - batch baseOffset
    keyLength: varint         -1 = null key
    key: byte[]
    valueLen: varint          -1 = null value
    value: byte[]
    headersCount: varint
    headers: [headerKeyLength: varint, headerKey: utf-8, headerValueLength: varint (-1 = null), value]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.varint import read_varint, write_varint

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    """A record as users see it: absolute offset and timestamp, nullable key/value, headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = field(default=())


def write_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] | list[Header] = (),
) -> None:
    """Append one encoded record (length prefix included) to ``out``."""
    body = bytearray(b"\x00")  # attributes
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for hkey, hvalue in headers:
        hkey_bytes = hkey.encode()
        write_varint(body, len(hkey_bytes))
        body += hkey_bytes
        if hvalue is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hvalue))
            body += hvalue
    write_varint(out, len(body))
    out += body


def _read_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(buf[pos : pos + length]), pos + length


def read_record(
    buf: bytes | bytearray | memoryview, pos: int, base_offset: int, base_timestamp: int
) -> tuple[Record, int]:
    """Decode the record at ``pos``; return ``(record, next_pos)``."""
    length, pos = read_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} runs past the end of the batch")
    pos += 1  # attributes
    timestamp_delta, pos = read_varint(buf, pos)
    offset_delta, pos = read_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    count, pos = read_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
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
    if pos != end:
        raise CorruptRecordError(f"record length says {length} bytes but fields took {pos - end + length}")
    record = Record(base_offset + offset_delta, base_timestamp + timestamp_delta, key, value, tuple(headers))
    return record, end
