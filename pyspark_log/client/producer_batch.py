"""One partition's batch of records on the producer side, and how it is encoded and delivered.

``ProducerBatch`` holds records (``send()`` row tuples or ``RecordFields``) or, for the batch API,
an already encoded records section (``ColumnarSection``) until it is drained, encoded (RecordBatch
v2, Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs", `batch.size` and `linger.ms`; header,
compression and CRC at drain time) and completed or failed
exactly once. ``encode_sections`` gives many ``send()`` batches their records sections in one
vectorised pass (``records/row_encode.py``); every encoded batch is a ``BatchParts`` (header and
records section unjoined, so the connection can write a big section without copying it);
``ColumnarDelivery`` reports one batch-API call's completion. Queuing, readiness,
draining, retries and expiry of batches are the ``RecordAccumulator``'s (``accumulator.py``).
Pure: no I/O, no asyncio.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate, chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pyspark_log.client.futures import RecordOutcome, settle_records
from pyspark_log.client.types import RecordMetadata, TopicPartition
from pyspark_log.records.batch import BatchParts, RecordFields, encode_batch, encode_batch_parts
from pyspark_log.records.header import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

if TYPE_CHECKING:
    from pyspark_log.records.columnar_encode import ArrowRecords

log = logging.getLogger(__name__)

Thunk = Callable[[RecordMetadata | None, BaseException | None], None]  # or a RecordFuture (also callable)

BATCH_OVERHEAD_BYTES = HEADER_SIZE
# length(5) + attributes(1) + timestampDelta(10) + offsetDelta(5) + keyLen(5) + valueLen(5) + headerCount(5)
RECORD_OVERHEAD_BYTES = 36
HEADER_OVERHEAD_BYTES = 10
# A batch of at least this many ``send()`` records without headers is encoded in one vectorised
# pass (``row_encode.encode_rows``, byte-identical to ``encode_batch``): the fixed cost of the
# pass is below the per-record cost of the row encoder from about here.
COLUMNAR_ENCODE_FROM = 256
_ROW_HEADERS = itemgetter(3)


# A batch holds records as ``RecordFields`` objects (``ProducerRecord``, a parked ``RecordFuture``)
# or, from the sync ``send()``, as row tuples ``(key, value, timestamp, headers)``: a tuple of
# bytes and ints is not tracked by the garbage collector once it has seen it, and it does not keep
# the record's future alive (``futures.RecordFuture``).
Row = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def as_row(record: RecordFields | Row) -> Row:
    """A record as a row tuple."""
    if isinstance(record, tuple):  # exactly a tuple here: RecordFields are never tuples
        return record
    return (record.key, record.value, record.timestamp, record.headers)


class _Fields:
    """A row tuple as ``RecordFields`` (for ``encode_batch``)."""

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(self, row: Row) -> None:
        self.key, self.value, self.timestamp, self.headers = row


def as_fields(record: RecordFields | Row) -> RecordFields:
    return _Fields(record) if isinstance(record, tuple) else record


def estimate_record_bytes(record: RecordFields | Row) -> int:
    """An upper bound of the record's encoded size inside a batch (uncompressed)."""
    key, value, _, headers = as_row(record)
    size = RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
    for hkey, hvalue in headers:
        size += HEADER_OVERHEAD_BYTES + len(hkey.encode()) + len(hvalue or b"")
    return size


class ProducerBatch:
    """Records for one partition: open for appends, then closed, encoded and sent (maybe again).

    ``done`` becomes true exactly once, in ``complete`` or ``fail``; later calls are ignored, so a
    late response for a batch that already expired cannot deliver twice.
    """

    __slots__ = (
        "_done_callbacks",
        "attempts",
        "base_sequence",
        "closed",
        "columns",
        "created_ms",
        "delivery",
        "done",
        "encoded",
        "error",
        "last_attempt_ms",
        "max_bytes",
        "outcome",
        "producer_epoch",
        "producer_id",
        "records",
        "reserved_bytes",
        "retry_at_ms",
        "section",
        "sent_to",
        "sequence_reset",
        "size_bytes",
        "split_parts",
        "thunks",
        "tp",
        "transactional",
    )

    def __init__(self, tp: TopicPartition, created_ms: float, max_bytes: int) -> None:
        self.tp = tp
        self.created_ms = created_ms
        self.max_bytes = max_bytes
        self.records: list[Any] = []  # RecordFields or Row
        self.thunks: list[Thunk | None] = []
        self.size_bytes = BATCH_OVERHEAD_BYTES
        self.reserved_bytes = 0
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.retry_at_ms = 0.0
        self.closed = False
        self.done = False
        self.encoded: bytes | BatchParts | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.transactional = False
        self.sequence_reset = False
        self.sent_to = -1  # the node its last attempt went to (-1: not sent yet)
        self._done_callbacks: list[Callable[[ProducerBatch], None]] = []
        # How it ended (set before ``done``; read by ``RecordFuture`` s from any thread), and the
        # halves it was split into, with the first half's record count.
        self.outcome: RecordOutcome | None = None
        self.error: BaseException | None = None
        self.split_parts: tuple[ProducerBatch, ProducerBatch, int] | None = None
        # Columnar batches only: the encoded records section, its rows (kept for a split) and
        # where its completion goes.
        self.section: ColumnarSection | None = None
        self.columns: ArrowRecords | None = None
        self.delivery: ColumnarDelivery | None = None

    @classmethod
    def columnar(
        cls,
        tp: TopicPartition,
        created_ms: float,
        max_bytes: int,
        *,
        section: ColumnarSection,
        columns: ArrowRecords,
        size_bytes: int,
        delivery: ColumnarDelivery,
    ) -> ProducerBatch:
        """A closed batch of already encoded records (``send()`` records never join it). It
        holds ``size_bytes`` (the records' estimates) of ``buffer.memory``, reserved by the caller."""
        batch = cls(tp, created_ms, max_bytes)
        batch.section = section
        batch.columns = columns
        batch.delivery = delivery
        batch.size_bytes = BATCH_OVERHEAD_BYTES + size_bytes
        batch.reserved_bytes = size_bytes
        batch.closed = True
        return batch

    def __repr__(self) -> str:
        return f"ProducerBatch({self.tp}, records={self.record_count}, attempts={self.attempts})"

    @property
    def record_count(self) -> int:
        return self.section.count if self.section is not None else len(self.records)

    @property
    def is_full(self) -> bool:
        return self.size_bytes >= self.max_bytes

    def try_append(self, record: RecordFields, size_bytes: int, reserved_bytes: int, thunk: Thunk | None) -> bool:
        """Append unless closed or (for a non-empty batch) out of room."""
        if self.closed or (self.records and self.size_bytes + size_bytes > self.max_bytes):
            return False
        self.records.append(record)
        self.thunks.append(thunk)
        self.size_bytes += size_bytes
        self.reserved_bytes += reserved_bytes
        return True

    def close(self) -> None:
        self.closed = True

    def encode(self, codec: int) -> bytes | BatchParts:
        """The RecordBatch v2 bytes (base offset 0; the broker assigns offsets). Cached across
        retries; done at drain time. A batch of ``send()`` records gets its records section
        from columns (``encode_sections``) when it is big enough, else from ``encode_batch``."""
        if self.encoded is None:
            if self.section is None and len(self.records) >= COLUMNAR_ENCODE_FROM:
                encode_sections([self])
            sec = self.section
            if sec is not None:
                # Two parts (header, records section), for the batch API's batches and send()'s
                # alike: the connection writes a big section as it is (``BatchParts``), never
                # copied into a joined batch, and a small one once, into the request's bytes.
                self.encoded = encode_batch_parts(
                    sec.data,
                    sec.count,
                    base_timestamp=sec.base_timestamp,
                    max_timestamp=sec.max_timestamp,
                    codec=codec,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=self.base_sequence,
                    transactional=self.transactional,
                )
            else:
                self.encoded = encode_batch(
                    list(map(as_fields, self.records)),
                    codec=codec,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=self.base_sequence,
                    transactional=self.transactional,
                )
        return self.encoded

    def add_done_callback(self, fn: Callable[[ProducerBatch], None]) -> None:
        if self.done:
            fn(self)
        else:
            self._done_callbacks.append(fn)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Deliver every record: offset ``base_offset + i`` (-1 for acks=0)."""
        if self.done:
            return
        tp = self.tp
        outcome = self.outcome = RecordOutcome(tp.topic, tp.partition, base_offset, log_append_time_ms)
        self.done = True  # after the outcome: futures read it without a lock
        thunks = self.thunks
        for i in settle_records(thunks, outcome, None):
            _call(thunks[i], outcome.metadata(i, as_row(self.records[i])[2]), None)  # type: ignore[arg-type]
        self._finish()

    def fail(self, exc: BaseException) -> None:
        if self.done:
            return
        self.error = exc
        self.done = True
        thunks = self.thunks
        for i in settle_records(thunks, None, exc):
            _call(thunks[i], None, exc)  # type: ignore[arg-type]
        self._finish(exc)

    def _finish(self, exc: BaseException | None = None) -> None:
        callbacks, self._done_callbacks = self._done_callbacks, []
        for fn in callbacks:
            fn(self)
        if self.delivery is not None:  # after the callbacks: buffer.memory is released first
            self.delivery.batch_done(self, exc)
        elif self.records:  # a send() batch: its futures may keep it, but need only its outcome
            self.encoded = None
            self.section = None


def _all_rows(records: list[Any]) -> bool:
    """Are all of ``records`` row tuples (the sync ``send()``'s)?"""
    return set(map(type, records)) == {tuple}


def _has_headers(records: list[Any]) -> bool:
    if _all_rows(records):
        return any(map(_ROW_HEADERS, records))
    return any(row[3] for row in map(as_row, records))


@dataclass(frozen=True, slots=True)
class ColumnarSection:
    """An encoded records section (offset deltas from 0) and what its batch header needs."""

    data: bytes | memoryview
    count: int
    base_timestamp: int
    max_timestamp: int


def encode_sections(batches: Iterable[ProducerBatch]) -> None:
    """Give the ``send()`` batches among ``batches`` (not encoded yet, no headers) their records
    section, all in one ``row_encode`` pass when together they hold at least
    ``COLUMNAR_ENCODE_FROM`` records (the sender calls this with the batches of one Produce
    request, so the pass's fixed cost is shared). Byte-identical to ``encode_batch``'s records;
    the header, compression and CRC come in ``encode``."""
    todo = [b for b in batches if b.section is None and b.encoded is None and b.records]
    counts = [len(b.records) for b in todo]
    if sum(counts) < COLUMNAR_ENCODE_FROM:
        return
    from pyspark_log.records import row_encode  # numpy, pyarrow: on first use

    rows = list(chain.from_iterable(b.records for b in todo))
    # The common case (bytes keys and values, no headers) is checked by the encoder itself,
    # in the same passes that read the rows.
    sections = row_encode.encode_plain_rows(rows, list(accumulate(counts, initial=0)))
    if sections is None:
        todo = [b for b in todo if not _has_headers(b.records)]
        counts = [len(b.records) for b in todo]
        if sum(counts) < COLUMNAR_ENCODE_FROM:
            return
        rows = list(map(as_row, chain.from_iterable(b.records for b in todo)))
        sections = row_encode.encode_rows(rows, list(accumulate(counts, initial=0)))
    for i, batch in enumerate(todo):
        batch.section = ColumnarSection(
            sections.section(i), counts[i], int(sections.base_timestamp[i]), int(sections.max_timestamp[i])
        )


class ColumnarDelivery:
    """The completion of one batch-API call: ``callback(records, None)`` once every record it
    queued is acknowledged, or ``callback(None, exc)`` at the first failed batch. Runs on the
    producer's loop; a split batch's halves count their own records."""

    __slots__ = ("_callback", "_done", "_pending", "records")

    def __init__(self, records: int, callback: Callable[[int | None, BaseException | None], None]) -> None:
        self.records = records
        self._pending = records
        self._callback = callback
        self._done = False

    def batch_done(self, batch: ProducerBatch, exc: BaseException | None) -> None:
        if self._done:
            return
        if exc is not None:
            self._done = True
            _call(self._callback, None, exc)
            return
        self._pending -= batch.record_count
        if self._pending <= 0:
            self._done = True
            _call(self._callback, self.records, None)

    def fail(self, exc: BaseException) -> None:
        """Fail before any batch was queued (or for records that never were)."""
        if not self._done:
            self._done = True
            _call(self._callback, None, exc)


def _call(thunk: Callable[[Any, BaseException | None], None], metadata: Any, exc: BaseException | None) -> None:
    try:
        thunk(metadata, exc)
    except Exception:
        log.exception("producer delivery callback raised")
