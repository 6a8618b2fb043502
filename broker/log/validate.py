"""Validate the batches of one append and assign their offsets: a pure function (docs/architecture.md
("pure decisions, I/O at the edges")).

``validate_and_assign_offsets(data, next_offset, config, now_ms)`` takes the records of one
produce request for one partition (one or more whole RecordBatch v2), checks them with the
rules of Kafka's ``LogValidator`` / ``UnifiedLog.analyzeAndValidateRecords`` that need only the
61-byte batch header, and returns the bytes to write with baseOffset (and partitionLeaderEpoch)
rewritten, LogAppendTime applied when the topic asks for it, and what the log, the producer
state and the response need to know about each batch. It never decodes records (Kafka documentation §5.4 "Log":
"records are always written in batches"; Kafka documentation §4.3 "Efficiency": the broker keeps the producer's bytes)
and never copies them: the result is, per batch, a new 61-byte header and a view of the records
in the input (written together with ``pwritev``).

Errors, each with the Kafka code a client sees (``broker.log.errors``):

* CORRUPT_MESSAGE (2): fewer bytes than a header or than batchLength says, magic ≠ 2,
  batchLength below the header, CRC-32C mismatch, unknown compression codec id;
* MESSAGE_TOO_LARGE (10): a batch larger than ``max.message.bytes``;
* RECORD_LIST_TOO_LARGE (18): the whole append larger than ``segment.bytes``;
* INVALID_TIMESTAMP (32): a CreateTime batch whose baseTimestamp or maxTimestamp is older than
  ``now - message.timestamp.before.max.ms`` or newer than ``now + message.timestamp.after.max.ms``;
  a client batch flagged LogAppendTime on a LogAppendTime topic or without a timestamp;
* INVALID_RECORD (87): no batch at all; from a client: recordsCount ≤ 0, lastOffsetDelta + 1 ≠
  recordsCount, a control batch, a producer id with a negative base sequence; on a compacted
  topic (``cleanup.policy`` has ``compact``) a record without a key, with the index of every such
  record in ``record_errors`` (KIP-467; Kafka documentation §4.8 "Log Compaction": compaction keeps the last
  value *per key*,
  so Kafka's ``LogValidator.validateKey`` refuses keyless records). Only this check decodes
  records, and only on compacted topics.

Deviations from Kafka, because records are not decoded: timestamps are bounded per batch
(baseTimestamp and maxTimestamp), not per record; the offset of the max timestamp is the
*last offset of the batch* holding it (Kafka's "shallow" offset, which is what its time index
stores). Kafka's ProduceRequest accepts exactly one batch per partition; this function takes
several (replication and tests use that) and leaves the one-batch rule to ``Log.append``.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

import crc32c as _crc32c

from broker.log.config import INT_MAX, LogConfig
from broker.log.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from pyspark_log.records.batch import decode_records
from pyspark_log.records.errors import CorruptRecordError, RecordError
from pyspark_log.records.header import (
    ATTRIBUTES_POS,
    BASE_OFFSET_POS,
    BATCH_LENGTH_POS,
    CONTROL_MASK,
    CRC_POS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_POS,
    NO_PARTITION_LEADER_EPOCH,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_POS,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)

MAX_CODEC_ID = 4  # zstd
# baseOffset, batchLength, partitionLeaderEpoch: the first 16 bytes, rewritten in one pack
_PREFIX = struct.Struct(">qii")
assert (BASE_OFFSET_POS, BATCH_LENGTH_POS, PARTITION_LEADER_EPOCH_POS) == (0, 8, 12)
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview


class AppendOrigin(enum.Enum):
    """Who appends (Kafka ``AppendOrigin``): client rules apply only to ``CLIENT``."""

    CLIENT = "client"
    COORDINATOR = "coordinator"  # transaction markers, group/offset records written by the broker
    REPLICATION = "replication"  # a follower copying the leader's batches (offsets kept)


class BatchInfo(NamedTuple):
    """One validated batch: where it is in the validated bytes and what its header says.

    (A NamedTuple rather than a dataclass: one is built per batch on the produce path.)"""

    position: int  # byte position inside the validated bytes (``ValidationResult.records``)
    size_bytes: int
    base_offset: int
    last_offset: int
    max_timestamp_ms: int
    records_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool


class ValidationResult(NamedTuple):
    """The bytes to append and the facts about them (Kafka ``LogAppendInfo`` before the append)."""

    buffers: tuple[Buffer, ...]  # whole batches, offsets assigned, in pieces (see ``records``)
    size_bytes: int
    batches: tuple[BatchInfo, ...]
    first_offset: int
    last_offset: int
    max_timestamp_ms: int  # -1 when no batch carries a timestamp
    offset_of_max_timestamp: int  # last offset of the batch holding the max timestamp (shallow)
    log_append_time_ms: int  # ``now_ms`` for LogAppendTime topics, -1 for CreateTime
    records_count: int

    @property
    def records(self) -> bytes:
        """The validated bytes in one piece (tests and slow paths; appends write ``buffers``)."""
        return b"".join(self.buffers)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def validate_and_assign_offsets(
    data: bytes | bytearray | memoryview,
    next_offset: int,
    config: LogConfig,
    now_ms: int,
    *,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> ValidationResult:
    """Validate ``data`` (the leader's path) and give its batches offsets ``next_offset, …``.

    Pure: ``data`` is not modified. The result is zero-copy: per batch a rewritten 61-byte header
    and a view of the batch's records in ``data``, so ``data`` must not change until the result
    is written (``Log.append`` writes it before returning). Raises a ``LogError`` subclass (see
    the module docstring) and nothing else for any input bytes.
    """
    if len(data) > config.segment_bytes:
        raise RecordListTooLargeError(
            f"append of {len(data)} bytes is larger than segment.bytes={config.segment_bytes}"
        )
    view = memoryview(data).cast("B")
    log_append_time = config.log_append_time
    buffers: list[Buffer] = []
    infos: list[BatchInfo] = []
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    records_total = 0
    offset = next_offset
    for pos, header in _walk(view, config.max_message_bytes):
        if origin is AppendOrigin.CLIENT:
            _check_client_batch(header)
            if config.compact_enabled:
                check_keys_for_compaction(view, pos)
        if not log_append_time:
            _check_timestamps(header, config, now_ms, origin)
        elif origin is AppendOrigin.CLIENT and header.timestamp_type == 1:
            raise InvalidTimestampError(
                "producer set the LogAppendTime flag; only the broker sets it (topic uses LogAppendTime)"
            )
        end = pos + header.batch_length + LOG_OVERHEAD
        head = bytearray(view[pos : pos + HEADER_SIZE])
        body = view[pos + HEADER_SIZE : end]
        _PREFIX.pack_into(head, 0, offset, header.batch_length, partition_leader_epoch)
        batch_max_ts = header.max_timestamp
        if log_append_time:
            _set_log_append_time(head, body, header, now_ms)
            batch_max_ts = now_ms
        buffers.append(head)
        if body:
            buffers.append(body)
        last = offset + header.last_offset_delta
        if batch_max_ts > max_timestamp:
            max_timestamp, offset_of_max = batch_max_ts, last
        infos.append(_info(pos, header, offset, last, batch_max_ts))
        records_total += header.records_count
        offset = last + 1
    if not infos:
        raise InvalidRecordError("append holds no record batch")
    if log_append_time:
        offset_of_max = offset - 1
    return ValidationResult(
        buffers=tuple(buffers),
        size_bytes=len(view),
        batches=tuple(infos),
        first_offset=next_offset,
        last_offset=offset - 1,
        max_timestamp_ms=max_timestamp,
        offset_of_max_timestamp=offset_of_max if max_timestamp != NO_TIMESTAMP else -1,
        log_append_time_ms=now_ms if log_append_time else -1,
        records_count=records_total,
    )


def _set_log_append_time(head: bytearray, body: memoryview, header: BatchHeader, now_ms: int) -> None:
    """Set the LogAppendTime bit and maxTimestamp in ``head`` and recompute the CRC, which
    covers the header from ``attributes`` on and the records."""
    _INT16.pack_into(head, ATTRIBUTES_POS, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(head, MAX_TIMESTAMP_POS, now_ms)
    crc = _crc32c.crc32c(body, _crc32c.crc32c(memoryview(head)[ATTRIBUTES_POS:]))
    _UINT32.pack_into(head, CRC_POS, crc)


def validate_as_follower(data: bytes | bytearray | memoryview, log_end_offset: int) -> ValidationResult:
    """Check batches that keep their offsets (replication, Raft): whole, CRC-valid, offsets
    increasing and starting at or after ``log_end_offset``. Pure; ``data`` is copied as is.

    Raises CorruptMessageError for malformed bytes and InvalidRecordError for offsets that go
    backwards or start below ``log_end_offset`` (Kafka's "out of order offsets"). The result is a
    view of ``data``, which must not change until it is written.
    """
    view = memoryview(data).cast("B")
    infos: list[BatchInfo] = []
    expected = log_end_offset
    max_timestamp, offset_of_max, records_total = NO_TIMESTAMP, -1, 0
    for pos, header in _walk(view, INT_MAX):
        if header.base_offset < expected or header.last_offset_delta < 0:
            raise InvalidRecordError(
                f"out of order offsets: batch at byte {pos} covers [{header.base_offset}, "
                f"{header.last_offset}] but the next offset is {expected}"
            )
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        infos.append(_info(pos, header, header.base_offset, header.last_offset, header.max_timestamp))
        records_total += header.records_count
        expected = header.last_offset + 1
    if not infos:
        raise InvalidRecordError("append holds no record batch")
    return ValidationResult(
        buffers=(view,),
        size_bytes=len(view),
        batches=tuple(infos),
        first_offset=infos[0].base_offset,
        last_offset=infos[-1].last_offset,
        max_timestamp_ms=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time_ms=-1,
        records_count=records_total,
    )


def _walk(buf: memoryview, max_batch_bytes: int) -> list[tuple[int, BatchHeader]]:
    """Split ``buf`` into whole batches, checking framing, size limit, codec and CRC."""
    result: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptMessageError(f"{end - pos} trailing bytes at byte {pos} are not a whole batch")
        try:
            header = read_header(buf, pos)
        except CorruptRecordError as exc:
            raise CorruptMessageError(str(exc)) from exc
        size = header.batch_length + LOG_OVERHEAD
        if size > end - pos:
            raise CorruptMessageError(f"batch at byte {pos} says {size} bytes but only {end - pos} are left")
        if size > max_batch_bytes:
            raise MessageTooLargeError(
                f"batch at byte {pos} is {size} bytes, larger than max.message.bytes={max_batch_bytes}"
            )
        if header.compression > MAX_CODEC_ID:
            raise CorruptMessageError(f"batch at byte {pos} names unknown codec {header.compression}")
        if compute_crc(buf, pos, header) != header.crc:
            raise CorruptMessageError(f"CRC-32C mismatch in batch at byte {pos}")
        result.append((pos, header))
        pos += size
    return result


def _check_client_batch(header: BatchHeader) -> None:
    """Kafka ``LogValidator.validateBatch`` for ``AppendOrigin.CLIENT``."""
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(f"batch has an invalid offset range (lastOffsetDelta={header.last_offset_delta})")
    if header.records_count <= 0:
        raise InvalidRecordError(f"invalid reported record count {header.records_count}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordError(
            f"inconsistent batch: lastOffsetDelta + 1 = {count_from_offsets} but recordsCount = {header.records_count}"
        )
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"invalid sequence number {header.base_sequence} for producer id {header.producer_id}")


NULL_KEY_MESSAGE = "Compacted topic cannot accept message without key"


def check_keys_for_compaction(buf: Buffer, pos: int) -> None:
    """Raise InvalidRecordError, naming every record without a key in ``record_errors``, when
    the batch at ``pos`` holds one (Kafka ``LogValidator.validateKey``); CorruptMessageError when
    its records do not decode."""
    try:
        _, records = decode_records(buf, pos, verify_crc=False)
    except RecordError as exc:
        raise CorruptMessageError(f"batch at byte {pos}: {exc}") from exc
    missing = tuple((i, NULL_KEY_MESSAGE) for i, record in enumerate(records) if record.key is None)
    if missing:
        raise InvalidRecordError(
            f"{NULL_KEY_MESSAGE} ({len(missing)} of {len(records)} records have a null key)", record_errors=missing
        )


def _check_timestamps(header: BatchHeader, config: LogConfig, now_ms: int, origin: AppendOrigin) -> None:
    """CreateTime topic: the batch's timestamps lie in [now - before.max, now + after.max]."""
    stamps: tuple[int, ...] = (header.base_timestamp, header.max_timestamp)
    if header.timestamp_type == 1:  # every record's timestamp is the batch's maxTimestamp
        if origin is AppendOrigin.CLIENT and header.max_timestamp == NO_TIMESTAMP:
            raise InvalidTimestampError("producer set the LogAppendTime flag on a batch without timestamps")
        stamps = (header.max_timestamp,)
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for ts in stamps:
        if ts == NO_TIMESTAMP:
            continue
        if now_ms - ts > before or ts - now_ms > after:
            raise InvalidTimestampError(
                f"timestamp {ts} of batch at base offset {header.base_offset} is out of range "
                f"[now - {before}, now + {after}] (now = {now_ms})"
            )


def batch_info(position: int, header: BatchHeader) -> BatchInfo:
    """What the header of a stored batch says (the producer state is rebuilt from these)."""
    return _info(position, header, header.base_offset, header.last_offset, header.max_timestamp)


def _info(pos: int, header: BatchHeader, base: int, last: int, max_ts: int) -> BatchInfo:
    attributes = header.attributes
    return BatchInfo(
        pos,
        header.batch_length + LOG_OVERHEAD,
        base,
        last,
        max_ts,
        header.records_count,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.last_sequence,
        bool(attributes & TRANSACTIONAL_MASK),
        bool(attributes & CONTROL_MASK),
    )
