"""RecordBatch v2 header: the fixed 61-byte prefix of every batch, read without decoding records.

Layout (seed ``002_d43d99105647aa13.txt`` §5.3.1; all integers big-endian)::

    offset size field
    0      8    baseOffset            int64
    8      4    batchLength           int32   bytes that follow this field
    12     4    partitionLeaderEpoch  int32   (not covered by the CRC: the leader sets it)
    16     1    magic                 int8    always 2
    17     4    crc                   uint32  CRC-32C of bytes [21, end of batch)
    21     2    attributes            int16   bits 0-2 codec, 3 timestampType, 4 isTransactional,
                                              5 isControlBatch, 6 hasDeleteHorizonMs
    23     4    lastOffsetDelta       int32
    27     8    baseTimestamp         int64
    35     8    maxTimestamp          int64
    43     8    producerId            int64
    51     2    producerEpoch         int16
    53     4    baseSequence          int32
    57     4    recordsCount          int32
    61     ...  records (possibly compressed)

This module is the fast path used by the broker on produce and fetch: it walks batch
boundaries, checks CRCs and rewrites the fields the broker owns (baseOffset,
partitionLeaderEpoch, and maxTimestamp for LogAppendTime) without touching the records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c as _crc32c

from pyspark_log.records.errors import CorruptRecordError

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_STRUCT.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of the header outside batchLength
MAGIC_V2 = 2

BASE_OFFSET_POS = 0
BATCH_LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21  # first byte the CRC covers
MAX_TIMESTAMP_POS = 35

# The smallest batchLength a v2 batch can have: the header after LOG_OVERHEAD, no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C (Castagnoli), the checksum of RecordBatch v2; ``value`` is the CRC of the bytes
    before ``data`` (``crc32c(a + b) == crc32c(b, crc32c(a))``)."""
    return _crc32c.crc32c(data, value)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of one batch; ``size`` is the whole batch on disk or wire."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MAX_VALUE (Kafka DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``. Raises CorruptRecordError on short input, bad length or magic.

    It does not check that the whole batch is present or verify the CRC: see ``check_batch``.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at byte {pos}: {len(buf) - pos} bytes left")
    header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported magic {header.magic} at byte {pos} (only v2 batches)")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} at byte {pos} is below the minimum")
    return header


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    """The CRC-32C the batch at ``pos`` should carry."""
    view = memoryview(buf)
    return crc32c(view[pos + ATTRIBUTES_POS : pos + header.size])


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the header at ``pos`` and verify the batch is whole and its CRC matches."""
    header = read_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptRecordError(f"truncated batch at byte {pos}: needs {header.size} bytes, {len(buf) - pos} left")
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch in batch at byte {pos} (offset {header.base_offset}): "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, stop_at_partial: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each consecutive batch in ``buf``.

    By default the batches must fill ``buf`` exactly and trailing partial data raises
    CorruptRecordError. With ``stop_at_partial`` the iteration ends quietly at a trailing batch
    that is cut short (fewer bytes left than a header, or than its batchLength says), as in a
    fetch response whose size limit fell inside a batch; a bad magic, length or CRC still raises.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        if stop_at_partial:
            if end - pos < HEADER_SIZE:
                return
            header = read_header(buf, pos)
            if end - pos < header.size:
                return
            if verify_crc and compute_crc(buf, pos, header) != header.crc:
                raise CorruptRecordError(f"CRC mismatch in batch at byte {pos} (offset {header.base_offset})")
        else:
            header = check_batch(buf, pos) if verify_crc else read_header(buf, pos)
            if not verify_crc and end - pos < header.size:
                raise CorruptRecordError(f"truncated batch at byte {pos}")
        yield pos, header
        pos += header.size


def complete_prefix_size(buf: bytes | bytearray | memoryview) -> int:
    """Bytes of ``buf`` taken by whole batches before any partial trailing batch.

    Only lengths are read (no magic or CRC checks): a fetch path can cut a records buffer to
    whole batches with it before handing the bytes on. A batchLength below the minimum also
    ends the prefix; decoding the bytes from there reports the corruption.
    """
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_POS)
        if length < MIN_BATCH_LENGTH or end - pos < length + LOG_OVERHEAD:
            break
        pos += length + LOG_OVERHEAD
    return pos


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC, so nothing else changes)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp_ms: int) -> None:
    """Set maxTimestamp and the LogAppendTime bit, then recompute the CRC (both are covered by it)."""
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp_ms)
    new_crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + header.size])
    _UINT32.pack_into(buf, pos + CRC_POS, new_crc)
