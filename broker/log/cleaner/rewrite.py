"""Re-encode a stored batch with some of its records: the header's meaning unchanged.

Kafka documentation §4.8 "Log Compaction": messages left in the tail keep the offsets they got when first
written; offsets never change. A rewritten batch (layout in ``pyspark_log.records.header``) keeps baseOffset,
lastOffsetDelta (so the producer's sequence range ``baseSequence … baseSequence +
lastOffsetDelta`` and the batch's next offset stay), partitionLeaderEpoch, magic, the attributes
(codec, timestamp type, isTransactional, isControl), baseTimestamp, producerId, producerEpoch and
baseSequence. recordsCount becomes the number of records kept (fewer than lastOffsetDelta + 1
— Kafka's compacted batches look the same), maxTimestamp the largest kept timestamp (CreateTime;
a LogAppendTime batch keeps its own), and the CRC-32C is computed again over attributes … end.
Each kept record keeps its offset delta and timestamp. A batch that keeps no record is a bare
header (``recordsCount`` 0, no compression: Kafka's ``writeEmptyHeader``). Pure.

KIP-534: ``delete_horizon_ms`` stamps a delete horizon — the ``hasDeleteHorizonMs`` attribute
(0x40) set and baseTimestamp holding the horizon, the records' timestamp deltas relative to it
(so every record keeps its absolute timestamp), as Kafka's ``MemoryRecordsBuilder`` writes it. A
batch that already has a horizon keeps it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from pyspark_log.records import compression
from pyspark_log.records.header import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CRC_POS,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    crc32c,
)
from pyspark_log.records.record import Record, write_record

_UINT32 = struct.Struct(">I")


def rewrite_batch(
    header: BatchHeader,
    kept: Sequence[Record],
    *,
    compression_level: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch of ``header`` holding only ``kept`` (records decoded from it, in offset order),
    stamped with ``delete_horizon_ms`` when given (the header must not have one yet)."""
    attributes = header.attributes
    base_ts = header.base_timestamp
    if delete_horizon_ms is not None:
        assert not header.has_delete_horizon, "a batch's delete horizon is set once"
        attributes |= DELETE_HORIZON_MASK
        base_ts = delete_horizon_ms
    body = bytearray()
    max_ts = header.max_timestamp if header.timestamp_type == 1 else -1
    for record in kept:
        delta = record.offset - header.base_offset
        assert 0 <= delta <= header.last_offset_delta, f"record {record.offset} is not in the batch"
        if header.timestamp_type == 0:
            max_ts = max(max_ts, record.timestamp)
            ts_delta = record.timestamp - base_ts
        else:
            ts_delta = 0
        write_record(body, delta, ts_delta, record.key, record.value, record.headers)
    codec = attributes & COMPRESSION_MASK
    if not kept:
        attributes &= ~COMPRESSION_MASK
        payload: bytes | bytearray = b""
        stamped = header.timestamp_type == 1 or attributes & DELETE_HORIZON_MASK  # base is not a record's
        max_ts = header.max_timestamp if stamped else header.base_timestamp
    elif codec != compression.NONE:
        payload = compression.compress(codec, body, compression_level)
    else:
        payload = body
    out = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        header.last_offset_delta,
        base_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    out += payload
    _UINT32.pack_into(out, CRC_POS, crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)
