"""Decode a fetch response's records straight into columns: the Spark source's hot path.

Input: the ``records`` bytes of one partition in a Fetch response, i.e. consecutive RecordBatch
v2 batches (Kafka documentation §5.3.1 "Record Batch"), of which the last may be cut short by the fetch size limit; that
partial batch is ignored, as Kafka's consumer does. Output columns, one row per record, named as
in Spark's Kafka source::

    offset         int64
    timestamp      int64 ms (a LogAppendTime batch's records all carry its maxTimestamp)
    timestampType  int32    0 CreateTime, 1 LogAppendTime
    key, value     binary, nullable
    headers        (key: str, value: bytes | None) pairs (only with include_headers); null for
                   a record without headers, as Spark's Kafka connector gives it
                   (``KafkaRecordToRowConverter``)

``decode_arrow`` gives them as a batch of ``fetched.arrow_schema``, the Spark source's schema: in
its column order, with ``topic`` and ``partition`` (the caller names the partition the bytes are
from) and the timestamp in microseconds.

Which records appear:

* control batches never do (seed: "control records should not be delivered to applications");
* offsets below ``start_offset`` are skipped (a fetch returns whole batches, so the first one
  may start earlier), and decoding stops at the first batch whose baseOffset is at or past
  ``end_offset`` (exclusive); records of a batch straddling it are cut at ``end_offset``;
* read_committed: pass ``aborted_transactions`` (the Fetch response's ``(producer_id,
  first_offset)`` pairs) and records of aborted transactions are dropped exactly as Kafka's
  consumer drops them: before each batch of a producer (producerId >= 0), the aborted
  transactions whose first offset is <= the batch's last offset mark their producer as aborted;
  a control batch whose first record is an ABORT marker ends its producer's aborted
  transaction; a transactional data batch of a producer marked aborted is skipped.
  ``None`` means read_uncommitted (everything is delivered, aborted or not).

``decode_columns`` returns Python lists; ``decode_arrow`` returns a ``pyarrow.RecordBatch`` and,
for more than a handful of records, decodes them with vectorised numpy kernels
(``columnar_numpy.py``) instead of a per-record Python loop. Both return ``next_offset`` (the
offset after the last whole batch read, where the next fetch should start; None if none was)
and ``consumed_bytes`` (where reading stopped: the partial tail, the first batch past
``end_offset``, or the end). Errors: CorruptRecordError (bad CRC, magic, lengths or records),
RecordTooLargeError (a batch inflating past ``max_decompressed_bytes``),
UnsupportedCompressionError.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark_log.records import compression
from pyspark_log.records.batch import DEFAULT_MAX_DECOMPRESSED_BYTES
from pyspark_log.records.control import is_abort_key
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.fetched import Plan, Segment, arrow_schema, record_batch
from pyspark_log.records.header import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    crc32c,
)
from pyspark_log.records.record import Header, read_record, read_records

if TYPE_CHECKING:
    import pyarrow as pa

# Below this many records the per-record Python loop beats numpy's fixed per-call costs.
VECTORIZE_MIN_RECORDS = 192


def plan_batches(
    buf: bytes | bytearray | memoryview,
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Plan:
    """Walk the batches of ``buf``, apply the batch-level rules above, decompress what is kept."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    view = memoryview(data)
    read_committed = aborted_transactions is not None
    pending_aborts = sorted(((first, pid) for pid, first in aborted_transactions or ()), reverse=True)
    aborted_pids: set[int] = set()
    segments: list[Segment] = []
    next_offset: int | None = None
    unpack = HEADER_STRUCT.unpack_from
    pos = 0
    n = len(data)
    while n - pos >= HEADER_SIZE:
        (base_offset, batch_length, _, magic, crc, attributes, last_delta, base_ts, max_ts, pid, _, _, count) = unpack(
            data, pos
        )
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {magic} at byte {pos} (only v2 batches)")
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} at byte {pos} is below the minimum")
        size = batch_length + LOG_OVERHEAD
        if n - pos < size:
            break  # partial trailing batch
        if end_offset is not None and base_offset >= end_offset:
            break
        batch_pos = pos
        pos += size
        if verify_crc and crc32c(view[batch_pos + ATTRIBUTES_POS : pos]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at byte {batch_pos} (offset {base_offset})")
        if count < 0:
            raise CorruptRecordError(f"batch at offset {base_offset} has record count {count}")
        last_offset = base_offset + last_delta
        next_offset = last_offset + 1
        is_control = attributes & CONTROL_MASK
        if read_committed and pid >= 0:
            while pending_aborts and pending_aborts[-1][0] <= last_offset:
                aborted_pids.add(pending_aborts.pop()[1])
            if is_control:
                if count and _first_key_is_abort(view[batch_pos:pos], attributes, base_offset, base_ts):
                    aborted_pids.discard(pid)
                continue
            if attributes & TRANSACTIONAL_MASK and pid in aborted_pids:
                continue
        if is_control or count == 0 or last_offset < start_offset:
            continue
        codec = attributes & COMPRESSION_MASK
        if codec:
            payload = compression.decompress(codec, view[batch_pos + HEADER_SIZE : pos], max_decompressed_bytes)
            seg_data, seg_start, seg_end = payload, 0, len(payload)
        else:
            seg_data, seg_start, seg_end = data, batch_pos + HEADER_SIZE, pos
        segments.append(
            Segment(
                seg_data,
                seg_start,
                seg_end,
                count,
                base_offset,
                base_ts,
                1 if attributes & TIMESTAMP_TYPE_MASK else 0,
                max_ts,
            )
        )
    return Plan(segments, next_offset, pos)


def _first_key_is_abort(batch: memoryview, attributes: int, base_offset: int, base_ts: int) -> bool:
    """Kafka's ``containsAbortMarker``: is the first record of this control batch an ABORT?"""
    body: bytes | memoryview = batch[HEADER_SIZE:]
    if attributes & COMPRESSION_MASK:
        body = compression.decompress(attributes & COMPRESSION_MASK, body, 1 << 20)
    record, _ = read_record(body, 0, base_offset, base_ts)
    return is_abort_key(record.key)


@dataclass(slots=True)
class Columns:
    """Decoded records as parallel Python lists (see the module docstring for the columns)."""

    offset: list[int]
    timestamp: list[int]
    timestamp_type: list[int]
    key: list[bytes | None]
    value: list[bytes | None]
    headers: list[tuple[Header, ...]] | None
    next_offset: int | None
    consumed_bytes: int

    def __len__(self) -> int:
        return len(self.offset)

    def to_arrow(self, *, topic: str, partition: int) -> pa.RecordBatch:
        """These records of ``topic``-``partition`` as a batch of ``fetched.arrow_schema``."""
        import pyarrow as pa

        schema = arrow_schema(self.headers is not None)
        headers = None
        if self.headers is not None:
            # a record without headers: null, not an empty list (Spark's Kafka connector)
            headers = pa.array([list(h) if h else None for h in self.headers], schema.field("headers").type)
        return record_batch(
            schema,
            topic=topic,
            partition=partition,
            key=pa.array(self.key, pa.binary()),
            value=pa.array(self.value, pa.binary()),
            offset=pa.array(self.offset, pa.int64()),
            timestamp_ms=pa.array(self.timestamp, pa.int64()),
            timestamp_type=pa.array(self.timestamp_type, pa.int32()),
            headers=headers,
        )


@dataclass(slots=True)
class ArrowColumns:
    """``decode_arrow``'s result: the records as one Arrow record batch, and where reading stopped."""

    batch: pa.RecordBatch
    next_offset: int | None
    consumed_bytes: int

    def __len__(self) -> int:
        return int(self.batch.num_rows)


def decode_columns(
    buf: bytes | bytearray | memoryview,
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    include_headers: bool = False,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Columns:
    """Decode ``buf`` into Python lists, one per column (rules in the module docstring)."""
    plan = plan_batches(
        buf,
        start_offset=start_offset,
        end_offset=end_offset,
        aborted_transactions=aborted_transactions,
        verify_crc=verify_crc,
        max_decompressed_bytes=max_decompressed_bytes,
    )
    return columns_from_plan(plan, start_offset, end_offset, include_headers)


def columns_from_plan(plan: Plan, start_offset: int, end_offset: int | None, include_headers: bool) -> Columns:
    """The per-record Python decoder over planned segments."""
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[Header, ...]] | None = [] if include_headers else None
    upper = end_offset if end_offset is not None else 2**63
    for seg in plan.segments:
        override = seg.max_timestamp if seg.timestamp_type else None
        recs = read_records(
            seg.data,
            seg.start,
            seg.end,
            seg.count,
            base_offset=seg.base_offset,
            base_timestamp=seg.base_timestamp,
            timestamp_override=override,
        )
        o, t, k, v, h = zip(*recs, strict=True)
        # Records are filtered by their own offsets: besides the batches straddling the range,
        # a batch whose offset deltas disagree with its header must not leak records either.
        if min(o) < start_offset or max(o) >= upper:
            recs = [r for r in recs if start_offset <= r.offset < upper]
            if not recs:
                continue
            o, t, k, v, h = zip(*recs, strict=True)
        offsets += o
        timestamps += t
        keys += k
        values += v
        types += [seg.timestamp_type] * len(recs)
        if headers is not None:
            headers += h
    return Columns(offsets, timestamps, types, keys, values, headers, plan.next_offset, plan.consumed_bytes)


def decode_arrow(
    buf: bytes | bytearray | memoryview,
    *,
    topic: str,
    partition: int,
    start_offset: int = 0,
    end_offset: int | None = None,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    include_headers: bool = False,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    vectorize: bool | None = None,
) -> ArrowColumns:
    """Decode ``buf`` into one ``pyarrow.RecordBatch`` with ``arrow_schema(include_headers)``.

    ``vectorize`` forces (True) or forbids (False) the numpy kernels; by default they are used
    when numpy and Arrow binary views are available and there are at least
    ``VECTORIZE_MIN_RECORDS`` records. Both paths give identical results.
    """
    plan = plan_batches(
        buf,
        start_offset=start_offset,
        end_offset=end_offset,
        aborted_transactions=aborted_transactions,
        verify_crc=verify_crc,
        max_decompressed_bytes=max_decompressed_bytes,
    )
    if vectorize is None:
        vectorize = sum(seg.count for seg in plan.segments) >= VECTORIZE_MIN_RECORDS and _kernels_available()
    batch = None
    if vectorize:
        from pyspark_log.records import columnar_numpy

        batch = columnar_numpy.decode_plan(plan, start_offset, end_offset, include_headers, topic, partition)
    if batch is None:  # not vectorised, or the kernels cannot take this plan
        columns = columns_from_plan(plan, start_offset, end_offset, include_headers)
        batch = columns.to_arrow(topic=topic, partition=partition)
    return ArrowColumns(batch, plan.next_offset, plan.consumed_bytes)


def _kernels_available() -> bool:
    try:
        from pyspark_log.records import columnar_numpy
    except ImportError:  # numpy is not installed: the Python path does the work
        return False
    return columnar_numpy.available()
