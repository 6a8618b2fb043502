"""Records from other threads to the producer's loop, a chunk at a time (the sync ``send`` path).

Caller threads (``Producer.send`` / ``send_batch`` in ``sync.py``) append entries to a deque
and schedule a drain on the loop only when none is pending, so a burst of records costs one loop
wake-up. The common ``send`` (no partition, headers, timestamp or ``on_delivery``) does not
queue an entry: under the buffer pool's lock, which it takes anyway to reserve memory, it
appends the record's row to the open *lane* of its topic (``futures.LaneChunk``; keyed rows and
rows for the sticky partitioner have lanes of their own), and its future is the chunk and a
position. The lane and whether a drain is pending belong to the hand-off's ``LaneWriter``
(``lane_writer.py``), the one thing both fast paths of ``send`` (Python and compiled)
touch. Any other entry, a record of another topic or of the other kind, first seals the open
lane into the deque (under the same lock), so the deque's order stays the order of the calls.
The drain seals the open lane and takes every queued entry at once and appends them in bulk
(``Handoff.drain``); a lane chunk columnar, with no per-record object (``lane.py``):

* runs of records whose partition needs no accumulator state (an explicit ``partition``, or a
  key, partitioned ``toPositive(murmur2(key)) % partitions``: vectorised over the run when it is
  long, ``columnar_encode.partitions_for_keys`` of the list of keys, no Arrow array; keys of one
  length hashed as the rows of a matrix) are grouped by partition, order kept, and each
  group goes to ``RecordAccumulator.append_many`` (a few list operations per batch);
* runs of records with neither (sticky partitioning, KIP-480) fill the open batch of the sticky
  partition while it has room, and move the sticky partition on where a record would need a new
  batch, as one-by-one appends do (``_flush_sticky``);
* records of a topic whose metadata vanished are parked one by one (the producer's ``append``);
* the batch API's encoded batches (``send_batch``) are queued as they are.

Entries are processed in the order they were queued, runs one after the other, so records of a
partition keep the order of the ``send`` calls (Kafka's per-partition ordering), whatever mix of
keyed, explicit, null-key and batch-API records the chunk holds. A batch gets each record's row
tuple, and the record's future is pointed at the batch (``futures.link_records``).

A caller that finds ``HANDOFF_CHUNK`` entries queued and a drain pending lets the loop run it
before it goes on (``_wait_drained``, bounded): without that, a caller thread holding the GIL
starves the loop, the queue grows to every record sent, and each queued future lives long enough
to reach the garbage collector's oldest generation, whose collections then scan all of them.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any, Protocol

from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.errors import ClientClosedError
from pyspark_log.client.futures import LaneChunk, RecordFuture, link_records
from pyspark_log.client.lane import PlacementTarget, fail_chunk, place_chunk, sticky_runs
from pyspark_log.client.lane_writer import LaneWriter
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.producer_batch import ProducerBatch
from pyspark_log.client.types import TopicPartition

# A record (the sync send()'s ``RecordFuture``), a sealed lane chunk of send()s, or the
# batch API's encoded batches of a partition.
Entry = RecordFuture | LaneChunk | tuple[TopicPartition, list[ProducerBatch]]

_SIZE = attrgetter("_size")
_PARTITION = attrgetter("_partition")
_ROW = attrgetter("_row")
_TOPIC = attrgetter("_topic")
_RECORDS_ONLY = {RecordFuture}
_KEY = itemgetter(0)

# A caller waits for the loop to take its queued entries when this many are queued
# (``Handoff._wait_drained``), for at most ``_DRAIN_WAIT_S``.
HANDOFF_CHUNK = 256
# The same for records in the open lane (``Producer.send``'s common case): they hold no
# per-record object the collector tracks, so they may wait in larger chunks, which amortise the
# drain's vectorised calls.
LANE_CHUNK = 1024
_DRAIN_WAIT_S = 0.05

# Below this many keyed records a run hashes its keys one by one (pure Python murmur2 is cheaper
# than building an Arrow array for a handful of keys).
VECTORISE_KEYS_FROM = 48


class HandoffTarget(PlacementTarget, Protocol):
    """What the drain needs of ``AsyncProducer`` (a protocol: no import cycle)."""

    def ignore_keys(self) -> bool: ...
    def append_columns(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None: ...
    def is_dead(self) -> bool: ...


class Handoff:
    """The ordered queue of entries from caller threads; drained on the producer's loop."""

    def __init__(self, target: HandoffTarget, lock: threading.Lock | None = None) -> None:
        self._target = target
        self._queue: deque[Entry] = deque()
        self._lock = lock if lock is not None else threading.Lock()
        # the open lane and whether a drain is pending (``Producer.send`` appends to the lane
        # under ``lock``, the buffer pool's)
        self.lanes = LaneWriter(self._queue, self.after_put, self._lock, LANE_CHUNK, HANDOFF_CHUNK)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drained = threading.Event()
        self._warm = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def put(self, entry: Entry) -> None:
        """Queue ``entry`` (any thread) behind the open lane and make sure a drain will see it.
        The lock only orders the entry after the lane's records; scheduling is lock-free: the
        drain clears ``lanes.scheduled`` *before* it empties the queue, so an entry queued by a
        caller that saw it set is always taken by that drain or a later one."""
        with self._lock:
            self.lanes.seal_locked()  # records sent before this one go first
            self._queue.append(entry)
        self.after_put()

    def new_lane(self, topic: str, sticky: bool = False) -> LaneChunk:
        """Under ``_lock``: ``LaneWriter.open_lane``."""
        return self.lanes.open_lane(topic, sticky)

    def _seal(self) -> None:
        with self._lock:
            self.lanes.seal_locked()

    def backlog(self) -> int:
        """Entries queued plus records in the open lane in ``HANDOFF_CHUNK`` units (see
        ``LANE_CHUNK``), not yet taken by a drain."""
        lane = self.lanes.lane
        return len(self._queue) + (len(lane.rows) * HANDOFF_CHUNK // LANE_CHUNK if lane is not None else 0)

    def after_put(self) -> None:
        """What ``put`` does after queueing (``Producer.send`` queues inline, then calls this
        when no drain is scheduled or ``HANDOFF_CHUNK`` entries are queued)."""
        lanes = self.lanes
        if lanes.scheduled:
            if self.backlog() >= HANDOFF_CHUNK:
                self._wait_drained()
            return
        lanes.scheduled = True
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop is closed
            self.abort(ClientClosedError())
            raise ClientClosedError() from None

    def _wait_drained(self) -> None:
        """A caller thread that has queued ``HANDOFF_CHUNK`` entries the loop has not taken yet
        lets the loop take them (up to ``_DRAIN_WAIT_S``) before it queues more. Not a limit on
        what is buffered (that is ``buffer.memory``): the drain needs no broker, only the loop,
        which a caller spinning on the GIL starves (each time the loop blocks it waits a switch
        interval for the GIL). Handing over keeps the queue short, so a record's future is freed
        young (see ``RecordFuture``) instead of surviving into the collector's old generation.
        Never on the loop itself (a delivery callback that sends): nothing would drain.

        The first time, it imports ``columnar_encode`` (pyarrow, numpy) on the caller's thread,
        where it would otherwise hold up the loop's first drains while the caller queues on."""
        if asyncio._get_running_loop() is not None:
            return
        if not self._warm:  # a bulk sender: import the vectorised code here, not on the loop
            self._warm = True
            import pyspark_log.records.columnar_encode  # noqa: F401 - pyarrow, numpy: ~0.3 s once
        drained = self._drained
        drained.clear()
        if self.backlog() >= HANDOFF_CHUNK and self.lanes.scheduled:  # the drain has not run since
            drained.wait(_DRAIN_WAIT_S)

    def __len__(self) -> int:
        return self.backlog()

    def _take(self) -> list[Entry]:
        queue = self._queue
        return [queue.popleft() for _ in range(len(queue))]

    def drain(self) -> None:
        """Append everything queued (on the loop), in order."""
        self.lanes.scheduled = False
        self._seal()  # before a waiting caller goes on: it then fills a new lane, not this one
        self._drained.set()
        target = self._target
        if target.is_dead():
            self.abort(ClientClosedError("the producer closed before the record was queued"))
            return
        ignore_keys = target.ignore_keys()
        while self._queue:
            entries = self._take()
            if len(entries) == 1 and entries[0].__class__ is LaneChunk:  # the common case
                place_chunk(target, entries[0])
                continue
            keyed = _all_keyed(entries, ignore_keys)
            if keyed is not None:  # the common case: no per-entry loop
                self._flush_run(entries, *keyed)  # type: ignore[arg-type]
                continue
            run: list[RecordFuture] = []  # consecutive records of one kind, keyed or sticky
            sticky = False
            for entry in entries:
                if entry.__class__ is LaneChunk:
                    self._flush(run, sticky)
                    place_chunk(target, entry)
                    continue
                if entry.__class__ is not RecordFuture:  # the batch API's encoded batches
                    self._flush(run, sticky)
                    tp, batches = entry  # type: ignore[misc]
                    target.append_columns(tp, batches)
                    continue
                kind = entry._partition is None and (entry._row[0] is None or ignore_keys)
                if kind is not sticky:
                    self._flush(run, sticky)
                    sticky = kind
                run.append(entry)
            self._flush(run, sticky)

    def _flush(self, run: list[RecordFuture], sticky: bool) -> None:
        if sticky:
            self._flush_sticky(run)
        else:
            self._flush_run(run)

    def _flush_sticky(self, run: list[RecordFuture]) -> None:
        """Append a run of records without key or partition (sticky partitioning, KIP-480) in
        bulk, in the runs ``lane.sticky_runs`` gives, and empty ``run``."""
        if not run:
            return
        target = self._target
        meta = target.cluster_metadata()
        acc = target.accumulator
        now = target.now_ms()
        touched: list[TopicPartition] = []
        wake = False
        for topic, records in _by_topic(run).items():
            count = meta.partition_count(topic)
            if count is None:  # metadata vanished: park them one by one, in order
                for record in records:
                    target.append_one(record)
                continue
            sizes = list(map(_SIZE, records))
            for tp, i, j in sticky_runs(target, topic, count, sizes):
                wake = _append(acc, tp, records[i:j], sizes[i:j], now) or wake
                touched.append(tp)
        run.clear()
        if touched:
            target.appended(touched, wake)

    def _flush_run(
        self, run: list[RecordFuture], explicit: list[Any] | None = None, keys: list[Any] | None = None
    ) -> None:
        """Append a run of keyed / explicit-partition records in bulk and empty ``run``.
        ``explicit`` and ``keys`` (from ``_all_keyed``) are the records' partitions and keys
        when the caller has them already."""
        if not run:
            return
        target = self._target
        meta = target.cluster_metadata()
        topics = set(map(_TOPIC, run))
        if len(topics) == 1:
            by_topic = {topics.pop(): run}
        else:
            by_topic, explicit, keys = _by_topic(run), None, None
        acc = target.accumulator
        now = target.now_ms()
        touched: list[TopicPartition] = []
        wake = False
        for topic, records in by_topic.items():
            count = meta.partition_count(topic)
            if count is None:  # metadata vanished: park them one by one, in order
                for record in records:
                    target.append_one(record)
                continue
            for p, group in _by_partition(records, count, explicit, keys):
                tp = TopicPartition(topic, p)
                wake = _append(acc, tp, group, list(map(_SIZE, group)), now) or wake
                touched.append(tp)
        run.clear()
        if touched:
            target.appended(touched, wake)

    def abort(self, exc: BaseException) -> None:
        """Fail every queued entry and give its ``buffer.memory`` back."""
        release = self._target.release
        self._seal()
        while self._queue:
            for entry in self._take():
                if entry.__class__ is LaneChunk:
                    fail_chunk(self._target, entry, exc)
                    continue
                if entry.__class__ is RecordFuture:
                    release(entry._size)
                    entry(None, exc)
                    continue
                for batch in entry[1]:  # type: ignore[index]
                    release(batch.reserved_bytes)
                    batch.reserved_bytes = 0
                    batch.fail(exc)


def _all_keyed(entries: list[Entry], ignore_keys: bool) -> tuple[list[Any], list[Any] | None] | None:
    """When all ``entries`` are records with an explicit partition or a key (none sticky, none
    from the batch API): their explicit partitions and (when some have none) their keys, for
    ``_by_partition``; else None. A few C-level passes instead of a Python loop per entry."""
    if set(map(type, entries)) != _RECORDS_ONLY:  # (a LaneChunk is no record)
        return None
    parts = list(map(_PARTITION, entries))
    if None not in parts:
        return parts, None
    if ignore_keys:
        return None
    keys = list(map(_KEY, map(_ROW, entries)))
    return None if None in keys else (parts, keys)


def _append(
    acc: RecordAccumulator, tp: TopicPartition, records: list[RecordFuture], sizes: list[int], now: float
) -> bool:
    """Append the records' rows to ``tp`` (``append_many``) and point each future at its batch."""
    placed: list[tuple[ProducerBatch, int, int, int]] = []
    wake = acc.append_many(tp, list(map(_ROW, records)), sizes, [None] * len(records), now, placed)
    link_records(records, placed)
    return wake


def _by_topic(run: list[RecordFuture]) -> dict[str, list[RecordFuture]]:
    out: dict[str, list[RecordFuture]] = {}
    for record in run:
        out.setdefault(record._topic, []).append(record)
    return out


def _by_partition(
    records: list[RecordFuture],
    count: int,
    explicit: list[Any] | None = None,
    all_keys: list[Any] | None = None,
) -> list[tuple[int, list[RecordFuture]]]:
    """The records grouped by partition (their explicit one, else murmur2 of the key), each
    group in the order of ``records``. ``explicit`` (the records' ``partition`` s, consumed) and
    ``all_keys`` (their keys) when the caller has them."""
    if explicit is None:
        explicit = list(map(_PARTITION, records))
    nones = explicit.count(None)
    keyed: Sequence[int] = (
        range(len(explicit))
        if nones == len(explicit)
        else [i for i, p in enumerate(explicit) if p is None]
        if nones
        else []
    )
    if len(keyed) < VECTORISE_KEYS_FROM:
        for i in keyed:
            explicit[i] = partition_for_key(records[i]._row[0], count)  # type: ignore[arg-type]
        groups: dict[int, list[RecordFuture]] = {}
        for record, p in zip(records, explicit, strict=True):
            group = groups.get(p)
            if group is None:
                groups[p] = [record]
            else:
                group.append(record)
        return list(groups.items())
    import numpy as np

    from pyspark_log.records.columnar_encode import partitions_for_keys

    if len(keyed) == len(records):
        keys = all_keys if all_keys is not None else list(map(_KEY, map(_ROW, records)))
    else:
        keys = [records[i]._row[0] for i in keyed]
    hashed = partitions_for_keys(keys, count)
    if len(keyed) == len(records):
        parts = hashed
    else:
        parts = np.array([-1 if p is None else p for p in explicit], np.int64)
        parts[np.array(keyed, np.int64)] = hashed
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    cuts = [0, *(np.flatnonzero(np.diff(sorted_parts)) + 1).tolist(), len(records)]
    ordered = list(itemgetter(*order.tolist())(records)) if len(cuts) > 2 else records
    return [(int(sorted_parts[a]), ordered[a:b]) for a, b in itertools.pairwise(cuts)]
