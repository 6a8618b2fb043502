"""Encode and decode whole RecordBatch v2 batches (Kafka documentation §5.3.1 "Record Batch").

Layout (header fields in ``header.py``, record fields in ``record.py``)::

    [61-byte header: baseOffset … recordsCount][records section]

The records section is ``recordsCount`` records back to back, compressed as one stream when
attributes bits 0-2 name a codec (``compression.py``). The CRC-32C covers attributes through the
end of the batch, i.e. it is computed over the compressed bytes.

``encode_batch`` is what producers (and the broker, for control batches: ``control.py``) use;
``decode_records`` / ``decode_batches`` are what consumers use (``columnar.py`` is the columnar
variant for Spark). The broker's produce and fetch paths never decode records: they use the
header fast path in ``header.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from pyspark_log.records import compression
from pyspark_log.records.errors import CorruptRecordError, UnsupportedCompressionError
from pyspark_log.records.header import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_POS,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    check_batch,
    crc32c,
    iter_batch_headers,
    read_header,
)
from pyspark_log.records.record import Header, Record, read_records, write_record

DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
_UINT32 = struct.Struct(">I")


class ProducerRecord(NamedTuple):
    """What a producer hands to ``encode_batch``: timestamp in ms, nullable key/value, headers.

    A named tuple (immutable, compared by value) rather than a frozen dataclass: the producer
    makes one per ``send()``, and a tuple is several times cheaper to build."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


class RecordFields(Protocol):
    """What ``encode_batch`` reads of a record: a ``ProducerRecord`` or anything with its fields
    (the producer's per-``send`` objects)."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def headers(self) -> tuple[Header, ...]: ...


def encode_batch(
    records: Sequence[RecordFields],
    *,
    base_offset: int = 0,
    codec: int = compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression_level: int | None = None,
) -> bytes:
    """Build one batch holding ``records`` with offsets ``base_offset + i``.

    baseTimestamp is the first record's timestamp and maxTimestamp the largest (Kafka's
    producer does the same); ``log_append_time`` only sets the attribute bit, the broker then
    rewrites maxTimestamp (``header.set_log_append_time``). ``compression_level`` overrides the
    codec's default level (see ``compression.py``).
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    if codec & ~COMPRESSION_MASK or codec not in compression.CODEC_NAMES:
        raise UnsupportedCompressionError(f"compression codec {codec}")
    base_timestamp = records[0].timestamp
    max_timestamp = base_timestamp
    body = bytearray()
    for i, rec in enumerate(records):
        ts = rec.timestamp
        max_timestamp = max(max_timestamp, ts)
        write_record(body, i, ts - base_timestamp, rec.key, rec.value, rec.headers)
    return bytes(
        encode_batch_parts(
            body,
            len(records),
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            base_offset=base_offset,
            codec=codec,
            log_append_time=log_append_time,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
            control=control,
            partition_leader_epoch=partition_leader_epoch,
            compression_level=compression_level,
        )
    )


class BatchParts:
    """One encoded batch as its header and its records bytes, not joined: the producer's batch
    API writes the two to the socket one after the other, so the records (up to ``batch.size``)
    are never copied into a joined ``bytes``. ``len`` is the batch's size; ``bytes()`` joins.
    A records value the wire encoders pass through as given (``pyspark_log.wire``)."""

    __slots__ = ("header", "payload", "size")

    def __init__(self, header: bytes | bytearray, payload: bytes | bytearray | memoryview) -> None:
        self.header = header
        self.payload = payload
        self.size = len(header) + len(payload)

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join((self.header, self.payload))

    @property
    def parts(self) -> tuple[bytes | bytearray | memoryview, ...]:
        return (self.header, self.payload)


def encode_batch_parts(
    section: bytes | bytearray | memoryview,
    count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    codec: int = compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression_level: int | None = None,
) -> BatchParts:
    """One batch around ``count`` already encoded records (an uncompressed records section, offset
    deltas from 0), not joined: the header (compression and CRC done) and the records bytes
    (``section`` itself, uncompressed, or its compressed form). ``encode_batch`` and the columnar
    and row encoders all end here; ``bytes()`` of the result is the whole batch."""
    if count <= 0:
        raise ValueError("a batch needs at least one record")
    if codec & ~COMPRESSION_MASK or codec not in compression.CODEC_NAMES:
        raise UnsupportedCompressionError(f"compression codec {codec}")
    payload = compression.compress(codec, section, compression_level) if codec != compression.NONE else section
    attributes = codec & COMPRESSION_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    # The header with a zero CRC, then the CRC over its tail and the payload (incremental): the
    # payload (up to batch.size, 1 MiB in the Spark sink) is not copied here.
    out = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        batch_length,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(payload, crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    _UINT32.pack_into(out, CRC_POS, crc)
    return BatchParts(bytes(out), payload)


def decode_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    verify_crc: bool = True,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records (absolute offsets and timestamps).

    For LogAppendTime batches every record's timestamp is the batch's maxTimestamp (what Kafka's
    consumer reports). Control batches decode like any other; see ``control.py`` for their
    keys and values. Raises CorruptRecordError (bad length, magic, CRC, truncation, malformed
    records or a record count that does not match the bytes), RecordTooLargeError (records
    inflating past ``max_decompressed_bytes``) or UnsupportedCompressionError.
    """
    header = check_batch(buf, pos) if verify_crc else _header_unchecked(buf, pos)
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"batch at offset {header.base_offset} has record count {count}")
    start = pos + HEADER_SIZE
    end = pos + header.size
    data: bytes
    if header.compression != compression.NONE:
        data = compression.decompress(header.compression, memoryview(buf)[start:end], max_decompressed_bytes)
        start, end = 0, len(data)
    elif isinstance(buf, bytes):
        data = buf  # slices of ``bytes`` are the record fields; no copy of the batch needed
    else:
        data = bytes(memoryview(buf)[start:end])
        start, end = 0, len(data)
    override = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    records = read_records(
        data,
        start,
        end,
        count,
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        timestamp_override=override,
    )
    return header, records


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    verify_crc: bool = True,
) -> list[tuple[BatchHeader, list[Record]]]:
    """Decode every whole batch in ``buf`` (a fetch response's records), ignoring a partial tail.

    Brokers may cut the last batch of a fetch response short; like Kafka's consumer we drop it.
    """
    out: list[tuple[BatchHeader, list[Record]]] = []
    for pos, _ in iter_batch_headers(buf, verify_crc=False, stop_at_partial=True):
        out.append(decode_records(buf, pos, max_decompressed_bytes=max_decompressed_bytes, verify_crc=verify_crc))
    return out


def _header_unchecked(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    header = read_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(f"truncated batch at byte {pos}")
    return header
