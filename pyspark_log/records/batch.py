"""Encode and decode whole RecordBatch v2 batches (layout in ``header.py``, records in ``record.py``).

``encode_batch`` is what producers (and the broker, for control batches) use; ``decode_batch``
is what consumers use. The broker's produce and fetch paths never call ``decode_batch``: they
use the header fast path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark_log.records import compression
from pyspark_log.records.errors import CorruptRecordError
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
)
from pyspark_log.records.record import Header, Record, read_record, write_record

DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """What a producer hands to ``encode_batch``: timestamp in ms, nullable key/value, headers."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


def encode_batch(
    records: Sequence[ProducerRecord],
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
) -> bytes:
    """Build one batch holding ``records`` with offsets ``base_offset + i``."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_timestamp = records[0].timestamp
    max_timestamp = max(r.timestamp for r in records)
    body = bytearray()
    for i, rec in enumerate(records):
        write_record(body, i, rec.timestamp - base_timestamp, rec.key, rec.value, rec.headers)
    payload = compression.compress(codec, body) if codec != compression.NONE else bytes(body)
    attributes = codec & COMPRESSION_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
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
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += payload
    crc = crc32c(memoryview(out)[ATTRIBUTES_POS:])
    out[CRC_POS : CRC_POS + 4] = crc.to_bytes(4, "big")
    return bytes(out)


def decode_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    verify_crc: bool = True,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records (absolute offsets and timestamps).

    For LogAppendTime batches every record's timestamp is the batch's maxTimestamp.
    """
    header = check_batch(buf, pos) if verify_crc else _header_unchecked(buf, pos)
    view = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    data: bytes | memoryview = view
    if header.compression != compression.NONE:
        data = compression.decompress(header.compression, view, max_decompressed_bytes)
    records: list[Record] = []
    p = 0
    for _ in range(header.records_count):
        rec, p = read_record(data, p, header.base_offset, header.base_timestamp)
        records.append(rec)
    if p != len(data):
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has {len(data) - p} bytes after its "
            f"{header.records_count} records"
        )
    if header.timestamp_type == 1:
        records = [
            Record(r.offset, header.max_timestamp, r.key, r.value, r.headers) for r in records
        ]
    return header, records


def _header_unchecked(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    from pyspark_log.records.header import read_header

    header = read_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(f"truncated batch at byte {pos}")
    return header
