"""The record accumulator: per-partition queues of batches waiting to be sent (seed 003 "프로듀서의 배치").

Pure: no I/O, no asyncio; every method that depends on time takes ``now_ms`` (monotonic), so
tests drive linger, backoff and expiry with a manual clock. Owned by the producer's event loop.

A partition's queue holds batches oldest first. Records go into the newest batch while it is open
and has room (``batch.size``, counted as an upper bound of the uncompressed record sizes; a record
bigger than ``batch.size`` gets a batch of its own). The first batch of a queue is *sendable*
when any of these holds (Kafka's ``RecordAccumulator.ready``):

* it is full, or a newer batch exists behind it;
* it has waited ``linger.ms`` since it was created (or its retry backoff since its last attempt);
* a ``flush()`` is in progress or the producer is closing;
* ``buffer.memory`` is exhausted and a sender is blocked waiting for room.

``drain`` closes and hands out at most one batch per partition per node, up to
``max.request.size`` per request (at least one batch), rotating the starting partition so no
partition starves. With ``max.in.flight.requests.per.connection == 1`` a drained partition is
muted until its batch completes, which keeps retries in order. A retried batch goes back to the
head of its queue and is not sendable before its backoff (``retry.backoff.ms`` doubling up to
``retry.backoff.max.ms``, with jitter) has passed.

Memory: each record reserves its size estimate from the producer's buffer pool before it is
appended; a batch gives its reservation back (``release``) when it completes or fails.

Columnar batches (``append_columns``, the producer's batch API): batches whose records section
was encoded from Arrow columns before it reached the loop (``columnar_encode.py``). They queue,
linger, drain, take sequence numbers, retry, split and expire like any other batch; only their
bytes are made differently (header, compression and CRC at drain time, as for the others) and
their completion goes to one ``ColumnarDelivery`` per batch-API call instead of per-record thunks.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate, chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.futures import _LOCK, RecordOutcome, settle_records
from pyspark_log.client.types import RecordMetadata, TopicPartition
from pyspark_log.records import compression
from pyspark_log.records.batch import BatchParts, RecordFields, encode_batch, encode_batch_parts, encode_batch_section
from pyspark_log.records.header import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

if TYPE_CHECKING:
    from pyspark_log.records.columnar_encode import ArrowRecords

log = logging.getLogger(__name__)

Thunk = Callable[[RecordMetadata | None, BaseException | None], None]  # or a RecordFuture (also callable)

BATCH_OVERHEAD_BYTES = HEADER_SIZE
# length(5) + attributes(1) + timestampDelta(10) + offsetDelta(5) + keyLen(5) + valueLen(5) + headerCount(5)
RECORD_OVERHEAD_BYTES = 36
HEADER_OVERHEAD_BYTES = 10
# A batch of at least this many ``send()`` records without headers is encoded from columns
# (``columnar_encode.encode_rows``, byte-identical to ``encode_batch``): the fixed cost of the
# vectorised pass is below the per-record cost of the row encoder from about here.
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
                # The batch API's batches stay in two parts (header, records section): the
                # connection writes the section as it is (``BatchParts``), no joined copy.
                encode = encode_batch_parts if self.columns is not None else encode_batch_section
                self.encoded = encode(
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
    section from columns, all in one ``columnar_encode.encode_rows`` pass when together they
    hold at least ``COLUMNAR_ENCODE_FROM`` records (the sender calls this with the batches of
    one Produce request, so the pass's fixed cost is shared). Byte-identical to
    ``encode_batch``'s records; the header, compression and CRC come in ``encode``."""
    todo = [b for b in batches if b.section is None and b.encoded is None and b.records and not _has_headers(b.records)]
    counts = [len(b.records) for b in todo]
    if sum(counts) < COLUMNAR_ENCODE_FROM:
        return
    from pyspark_log.records.columnar_encode import encode_rows  # pyarrow: on first use

    rows = list(chain.from_iterable(b.records for b in todo))
    if not _all_rows(rows):
        rows = list(map(as_row, rows))
    sections = encode_rows(rows, list(accumulate(counts, initial=0)))
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


class LeaderLookup(Protocol):
    """What the accumulator needs from cluster metadata."""

    def leader_for(self, tp: TopicPartition) -> int | None: ...


class Sequencer(Protocol):
    """The idempotent/transactional producer's say in draining (``txn_manager.TransactionManager``)."""

    def may_drain(self, batch: ProducerBatch) -> bool: ...

    def on_drain(self, batch: ProducerBatch) -> None: ...

    def on_split(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None: ...


@dataclass(frozen=True, slots=True)
class AppendResult:
    """``appended`` false only when ``abort_on_new_batch`` stopped a new batch from being made."""

    appended: bool
    batch_is_full: bool
    new_batch_created: bool


_APPENDED = AppendResult(True, False, False)
_APPENDED_FULL = AppendResult(True, True, False)


@dataclass(frozen=True, slots=True)
class ReadyCheck:
    ready_nodes: frozenset[int]
    next_ready_check_delay_ms: float
    unknown_leader_topics: frozenset[str]


class RecordAccumulator:
    """Batches per partition. Not thread-safe: the producer's loop owns it."""

    def __init__(
        self,
        *,
        batch_size_bytes: int,
        linger_ms: float,
        retry_backoff: ExponentialBackoff,
        codec: int = compression.NONE,
        release: Callable[[int], None] = lambda n: None,
        memory_pressure: Callable[[], bool] = lambda: False,
        guarantee_order: bool = False,
        sequencer: Sequencer | None = None,
    ) -> None:
        self.batch_size_bytes = max(batch_size_bytes, BATCH_OVERHEAD_BYTES + 1)
        self.linger_ms = linger_ms
        self.codec = codec
        self._backoff = retry_backoff
        self._release = release
        self._memory_pressure = memory_pressure
        self._guarantee_order = guarantee_order
        self.sequencer = sequencer
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._drain_start: dict[int, int] = {}
        self._flushes = 0
        self.closing = False

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        record: RecordFields,
        thunk: Thunk | None,
        now_ms: float,
        *,
        reserved_bytes: int = 0,
        abort_on_new_batch: bool = False,
        size_bytes: int | None = None,
    ) -> AppendResult:
        """Append ``record`` to ``tp``'s open batch or a new one. ``size_bytes`` is the record's
        ``estimate_record_bytes`` when the caller has it already."""
        size = estimate_record_bytes(record) if size_bytes is None else size_bytes
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        if queue and queue[-1].try_append(record, size, reserved_bytes, thunk):
            return _APPENDED_FULL if len(queue) > 1 or queue[-1].is_full else _APPENDED
        if abort_on_new_batch:
            return AppendResult(False, False, False)
        batch = ProducerBatch(tp, now_ms, self.batch_size_bytes)
        batch.try_append(record, size, reserved_bytes, thunk)
        batch.add_done_callback(self._on_batch_done)
        queue.append(batch)
        self._incomplete.add(batch)
        return AppendResult(True, len(queue) > 1 or batch.is_full, True)

    def open_room(self, tp: TopicPartition) -> int:
        """Bytes a record may still take in ``tp``'s open batch (its newest, not closed), or -1
        when it has none: a record needs a new batch (what sticky partitioning watches)."""
        queue = self._queues.get(tp)
        if not queue or queue[-1].closed:
            return -1
        batch = queue[-1]
        return batch.max_bytes - batch.size_bytes

    def append_many(  # noqa: PLR0917
        self,
        tp: TopicPartition,
        records: list[Any],
        sizes: list[int],
        thunks: list[Any],
        now_ms: float,
        placed: list[tuple[ProducerBatch, int, int, int]] | None = None,
    ) -> bool:
        """Append ``records`` (in order) to ``tp`` as ``append`` would one by one, each reserving
        its ``sizes`` estimate, in a few list operations per batch. True when the sender should
        look (as ``append``'s ``batch_is_full or new_batch_created``). ``placed`` (if given) gets
        ``(batch, position, i, j)`` for each run ``records[i:j]`` appended at ``position`` of a
        batch (``futures.link_records``)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        n = len(records)
        cum = list(accumulate(sizes, initial=0))
        i = 0
        opened = False
        batch = queue[-1] if queue and not queue[-1].closed else None
        while i < n:
            if batch is None:
                batch = ProducerBatch(tp, now_ms, self.batch_size_bytes)
                batch.add_done_callback(self._on_batch_done)
                queue.append(batch)
                self._incomplete.add(batch)
                opened = True
            room = batch.max_bytes - batch.size_bytes
            # records i..j-1 fit; an empty batch takes at least one record
            j = bisect_right(cum, cum[i] + room, lo=i + 1) - 1
            if j == i:
                if batch.records:
                    batch = None  # no room for the next record: it opens a new batch
                    continue
                j = i + 1
            if placed is not None:
                placed.append((batch, len(batch.records), i, j))
            batch.records.extend(records[i:j])
            batch.thunks.extend(thunks[i:j])
            added = cum[j] - cum[i]
            batch.size_bytes += added
            batch.reserved_bytes += added
            i = j
        return opened or len(queue) > 1 or (bool(queue) and queue[-1].is_full)

    def append_columns(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None:
        """Queue columnar batches (``ProducerBatch.columnar``) of ``tp`` behind what is queued.
        Each holds its own ``reserved_bytes`` of ``buffer.memory``, released when it completes."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        for batch in batches:
            batch.add_done_callback(self._on_batch_done)
            queue.append(batch)
            self._incomplete.add(batch)

    def _on_batch_done(self, batch: ProducerBatch) -> None:
        self._incomplete.discard(batch)
        if self._guarantee_order:
            self._muted.discard(batch.tp)
        if batch.reserved_bytes:
            reserved, batch.reserved_bytes = batch.reserved_bytes, 0
            self._release(reserved)

    # -- readiness and draining --------------------------------------------------------------

    def ready(self, cluster: LeaderLookup, now_ms: float) -> ReadyCheck:
        """Which leaders have a sendable batch, and how long until the next one may become so."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = float("inf")
        urgent = self._flushes > 0 or self.closing or self._memory_pressure()
        for tp, queue in self._queues.items():
            if not queue:
                continue
            leader = cluster.leader_for(tp)
            if leader is None or leader < 0:
                unknown.add(tp.topic)
                continue
            if tp in self._muted or leader in nodes:
                continue
            first = queue[0]
            if first.attempts > 0 and now_ms < first.retry_at_ms:
                next_delay = min(next_delay, first.retry_at_ms - now_ms)
                continue
            if self.sequencer is not None and not self.sequencer.may_drain(first):
                continue  # the sender is woken when what it waits for (a response, a txn partition) arrives
            waited = now_ms - first.created_ms
            full = len(queue) > 1 or first.is_full
            if full or urgent or first.attempts > 0 or waited >= self.linger_ms:
                nodes.add(leader)
            else:
                next_delay = min(next_delay, self.linger_ms - waited)
        return ReadyCheck(frozenset(nodes), max(next_delay, 0.0), frozenset(unknown))

    def drain(
        self, cluster: LeaderLookup, nodes: Iterable[int], max_request_bytes: int, now_ms: float
    ) -> dict[int, list[ProducerBatch]]:
        """Close and remove up to ``max_request_bytes`` of head batches per node (at least one)."""
        by_node: dict[int, list[TopicPartition]] = {}
        wanted = set(nodes)
        for tp, queue in self._queues.items():
            if queue:
                leader = cluster.leader_for(tp)
                if leader is not None and leader in wanted:
                    by_node.setdefault(leader, []).append(tp)
        out: dict[int, list[ProducerBatch]] = {}
        for node, tps in by_node.items():
            tps.sort()
            start = self._drain_start.get(node, 0) % len(tps)
            ordered = tps[start:] + tps[:start]
            self._drain_start[node] = start + 1
            batches: list[ProducerBatch] = []
            size = 0
            for tp in ordered:
                queue = self._queues[tp]
                if tp in self._muted or not queue:
                    continue
                first = queue[0]
                if first.attempts > 0 and now_ms < first.retry_at_ms:
                    continue
                if self.sequencer is not None and not self.sequencer.may_drain(first):
                    continue
                if batches and size + first.size_bytes > max_request_bytes:
                    break
                queue.popleft()
                first.close()
                if self.sequencer is not None:
                    self.sequencer.on_drain(first)
                first.last_attempt_ms = now_ms
                size += first.size_bytes
                batches.append(first)
                if self._guarantee_order:
                    self._muted.add(tp)
            if batches:
                out[node] = batches
        return out

    # -- retries, expiry, flush, abort -------------------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a failed batch back at the head of its queue (in sequence order among batches that
        have one), not sendable before its backoff."""
        batch.retry_at_ms = now_ms + self._backoff.backoff_ms(batch.attempts)
        batch.attempts += 1
        queue = self._queues.setdefault(batch.tp, deque())
        if batch.base_sequence == NO_SEQUENCE:
            queue.appendleft(batch)
        else:
            i = 0
            while i < len(queue) and NO_SEQUENCE != queue[i].base_sequence < batch.base_sequence:
                i += 1
            queue.insert(i, batch)
        if self._guarantee_order:
            self._muted.discard(batch.tp)

    def split_and_reenqueue(self, batch: ProducerBatch, now_ms: float) -> int:
        """Split a batch the broker found too large into halves, queued at the head; returns how
        many batches it became (1 = could not split)."""
        if batch.record_count < 2:
            return 1
        with _LOCK:  # futures pointing at ``batch`` hook themselves on it under the lock
            parts = self._split_columnar(batch) if batch.columns is not None else self._split_records(batch)
            batch.split_parts = (parts[0], parts[1], parts[0].record_count)
            batch.thunks = [None] * len(batch.records)
        parts[0].reserved_bytes = batch.reserved_bytes
        batch.reserved_bytes = 0
        batch.delivery = None  # the parts deliver its records
        if self.sequencer is not None:
            self.sequencer.on_split(batch, parts)
        batch.fail(RuntimeError("split"))  # no callbacks left: only marks it done
        queue = self._queues.setdefault(batch.tp, deque())
        for part in reversed(parts):
            part.close()
            queue.appendleft(part)
            self._incomplete.add(part)
        if self._guarantee_order:
            self._muted.discard(batch.tp)
        return 2

    def _split_columnar(self, batch: ProducerBatch) -> list[ProducerBatch]:
        from pyspark_log.records import columnar_encode

        assert batch.columns is not None
        assert batch.delivery is not None
        parts = []
        half = batch.record_count // 2
        for lo, hi in ((0, half), (half, batch.record_count)):
            rows = batch.columns.slice(lo, hi)
            sections = columnar_encode.encode_sections(rows, [0, hi - lo])
            section = ColumnarSection(
                sections.section(0), hi - lo, int(sections.base_timestamp[0]), int(sections.max_timestamp[0])
            )
            size = int(columnar_encode.estimate_bytes(rows).sum())
            part = ProducerBatch.columnar(
                batch.tp,
                batch.created_ms,
                batch.max_bytes,
                section=section,
                columns=rows,
                size_bytes=size,
                delivery=batch.delivery,
            )
            part.reserved_bytes = 0  # the parent's reservation moves to the first part
            part.attempts = batch.attempts
            part.add_done_callback(self._on_batch_done)
            parts.append(part)
        return parts

    def _split_records(self, batch: ProducerBatch) -> list[ProducerBatch]:
        half = len(batch.records) // 2
        parts = []
        for lo, hi in ((0, half), (half, len(batch.records))):
            part = ProducerBatch(batch.tp, batch.created_ms, batch.max_bytes)
            for record, thunk in zip(batch.records[lo:hi], batch.thunks[lo:hi], strict=True):
                part.records.append(record)
                part.thunks.append(thunk)
                part.size_bytes += estimate_record_bytes(record)
            part.attempts = batch.attempts
            part.add_done_callback(self._on_batch_done)
            parts.append(part)
        return parts

    def expire(self, now_ms: float, delivery_timeout_ms: float) -> list[ProducerBatch]:
        """Remove and return queued (not in-flight) batches older than ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        for queue in self._queues.values():
            while queue and now_ms - queue[0].created_ms >= delivery_timeout_ms:
                expired.append(queue.popleft())
        return expired

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes -= 1

    def incomplete(self) -> list[ProducerBatch]:
        """Every batch not yet completed or failed (queued or in flight)."""
        return list(self._incomplete)

    def has_undrained(self) -> bool:
        return any(self._queues.values())

    def queued_topics(self) -> set[str]:
        return {tp.topic for tp, q in self._queues.items() if q}

    def abort_undrained(self, exc: BaseException) -> None:
        """Fail queued batches that were never sent (no sequence yet); retries stay queued."""
        for queue in self._queues.values():
            keep = [b for b in queue if b.base_sequence != NO_SEQUENCE]
            dropped = [b for b in queue if b.base_sequence == NO_SEQUENCE]
            if dropped:
                queue.clear()
                queue.extend(keep)
                for batch in dropped:
                    batch.fail(exc)

    def abort_all(self, exc: BaseException) -> None:
        """Fail every incomplete batch, queued or in flight (used when the sender dies or closes)."""
        for queue in self._queues.values():
            queue.clear()
        for batch in list(self._incomplete):
            batch.fail(exc)
