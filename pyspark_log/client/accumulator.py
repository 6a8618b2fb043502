"""The record accumulator: per-partition queues of batches waiting to be sent (Kafka documentation §4.4 "The
Producer" and §3.3 "Producer Configs", `batch.size` and `linger.ms`).

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

The batches themselves (``ProducerBatch``: records, encoding, completion) are ``producer_batch.py``'s.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.futures import _LOCK
from pyspark_log.client.producer_batch import (
    BATCH_OVERHEAD_BYTES,
    ColumnarSection,
    ProducerBatch,
    Thunk,
    estimate_record_bytes,
)
from pyspark_log.client.types import TopicPartition
from pyspark_log.records import compression
from pyspark_log.records.batch import RecordFields
from pyspark_log.records.header import NO_SEQUENCE


class LeaderLookup(Protocol):
    """What the accumulator needs from cluster metadata."""

    def leader_for(self, tp: TopicPartition) -> int | None: ...


class Sequencer(Protocol):
    """The idempotent/transactional producer's say in draining (``txn_manager.TransactionManager``)."""

    def may_drain(self, batch: ProducerBatch, leader: int) -> bool: ...

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
            if self.sequencer is not None and not self.sequencer.may_drain(first, leader):
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
                if self.sequencer is not None and not self.sequencer.may_drain(first, node):
                    continue
                if batches and size + first.size_bytes > max_request_bytes:
                    break
                queue.popleft()
                first.close()
                if self.sequencer is not None:
                    self.sequencer.on_drain(first)
                first.last_attempt_ms = now_ms
                first.sent_to = node
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
