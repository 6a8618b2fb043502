"""Records from other threads to the producer's loop, a chunk at a time (the sync ``send`` path).

Caller threads (``Producer.send`` / ``send_batch`` in ``sync.py``) append entries to a deque
(``deque.append`` is atomic: no lock per record) and schedule a drain on the loop only when none
is pending, so a burst of records costs one loop wake-up. The drain takes every queued entry at
once and appends them in bulk (``Handoff.drain``):

* runs of records whose partition needs no accumulator state (an explicit ``partition``, or a
  key, partitioned ``toPositive(murmur2(key)) % partitions``: vectorised over the run when it is
  long, ``columnar_encode.partitions_for_keys``) are grouped by partition, order kept, and each
  group goes to ``RecordAccumulator.append_many`` (a few list operations per batch);
* a record with neither (sticky partitioning, which depends on the open batches) and records of a
  topic whose metadata vanished go through the producer's per-record ``append`` one at a time;
* the batch API's encoded batches (``send_batch``) are queued as they are.

Entries are processed in the order they were queued, runs one after the other, so records of a
partition keep the order of the ``send`` calls (Kafka's per-partition ordering), whatever mix of
keyed, explicit, null-key and batch-API records the chunk holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pyspark_log.client.accumulator import ProducerBatch, RecordAccumulator, Thunk
from pyspark_log.client.errors import ClientClosedError
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.batch import ProducerRecord

if TYPE_CHECKING:
    from pyspark_log.client.cluster import ClusterMetadata

log = logging.getLogger(__name__)

# (topic, partition, record, reserved bytes, thunk); a batch-API entry is
# (topic, partition, None, 0, list of encoded ProducerBatch).
Entry = tuple[str, int | None, ProducerRecord | None, int, Any]

# Below this many keyed records a run hashes its keys one by one (pure Python murmur2 is cheaper
# than building an Arrow array for a handful of keys).
VECTORISE_KEYS_FROM = 48


class HandoffTarget(Protocol):
    """What the drain needs of ``AsyncProducer`` (a protocol: no import cycle)."""

    @property
    def accumulator(self) -> RecordAccumulator: ...
    def cluster_metadata(self) -> ClusterMetadata: ...
    def ignore_keys(self) -> bool: ...
    def now_ms(self) -> float: ...
    def append_one(self, entry: tuple[str, int | None, ProducerRecord, int, Thunk]) -> None: ...
    def append_columns(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None: ...
    def appended(self, tps: list[TopicPartition], wake_sender: bool) -> None: ...
    def release(self, reserved: int) -> None: ...
    def is_dead(self) -> bool: ...


class Handoff:
    """The ordered queue of entries from caller threads; drained on the producer's loop."""

    def __init__(self, target: HandoffTarget) -> None:
        self._target = target
        self._queue: deque[Entry] = deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def put(self, entry: Entry) -> None:
        """Queue ``entry`` (any thread) and make sure a drain will see it. Lock-free: the drain
        clears ``_scheduled`` *before* it empties the queue, so an entry queued by a caller that
        saw ``_scheduled`` set is always taken by that drain or a later one."""
        self._queue.append(entry)
        if self._scheduled:
            return
        self._scheduled = True
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop is closed
            self.abort(ClientClosedError())
            raise ClientClosedError() from None

    def __len__(self) -> int:
        return len(self._queue)

    def _take(self) -> list[Entry]:
        queue = self._queue
        return [queue.popleft() for _ in range(len(queue))]

    def drain(self) -> None:
        """Append everything queued (on the loop), in order."""
        self._scheduled = False
        target = self._target
        if target.is_dead():
            self.abort(ClientClosedError("the producer closed before the record was queued"))
            return
        while self._queue:
            entries = self._take()
            run: list[Entry] = []
            for entry in entries:
                if entry[2] is None:  # the batch API's encoded batches
                    self._flush_run(run)
                    partition = entry[1]
                    assert partition is not None
                    target.append_columns(TopicPartition(entry[0], partition), entry[4])
                elif entry[1] is not None or (entry[2].key is not None and not target.ignore_keys()):
                    run.append(entry)
                else:  # sticky: depends on the open batches, one at a time
                    self._flush_run(run)
                    target.append_one(entry)  # type: ignore[arg-type]
            self._flush_run(run)

    def _flush_run(self, run: list[Entry]) -> None:
        """Append a run of keyed / explicit-partition records in bulk and empty ``run``."""
        if not run:
            return
        target = self._target
        meta = target.cluster_metadata()
        by_topic: dict[str, list[Entry]] = {}
        for entry in run:
            by_topic.setdefault(entry[0], []).append(entry)
        run.clear()
        acc = target.accumulator
        now = target.now_ms()
        touched: list[TopicPartition] = []
        wake = False
        for topic, entries in by_topic.items():
            count = meta.partition_count(topic)
            if count is None:  # metadata vanished: park them one by one, in order
                for entry in entries:
                    target.append_one(entry)  # type: ignore[arg-type]
                continue
            groups: dict[int, tuple[list[ProducerRecord], list[int], list[Thunk]]] = {}
            for entry, p in zip(entries, _partitions(entries, count), strict=True):
                group = groups.get(p)
                if group is None:
                    group = groups[p] = ([], [], [])
                group[0].append(entry[2])  # type: ignore[arg-type]
                group[1].append(entry[3])
                group[2].append(entry[4])
            for p, (records, sizes, thunks) in groups.items():
                tp = TopicPartition(topic, p)
                wake = acc.append_many(tp, records, sizes, thunks, now) or wake
                touched.append(tp)
        if touched:
            target.appended(touched, wake)

    def abort(self, exc: BaseException) -> None:
        """Fail every queued entry and give its ``buffer.memory`` back."""
        release = self._target.release
        while self._queue:
            for _topic, _partition, record, reserved, thunk in self._take():
                if record is None:
                    for batch in thunk:
                        release(batch.reserved_bytes)
                        batch.reserved_bytes = 0
                        batch.fail(exc)
                    continue
                release(reserved)
                _fail(thunk, exc)


def _fail(thunk: Callable[[Any, BaseException | None], None], exc: BaseException) -> None:
    try:
        thunk(None, exc)
    except Exception:
        log.exception("producer delivery callback raised")


def _partitions(entries: list[Entry], count: int) -> list[int]:
    """The partition of each entry: its explicit one, else murmur2 of its key."""
    keyed = [i for i, e in enumerate(entries) if e[1] is None]
    if not keyed:
        return [e[1] for e in entries]  # type: ignore[misc]
    out: list[int] = [-1 if e[1] is None else e[1] for e in entries]
    if len(keyed) < VECTORISE_KEYS_FROM:
        for i in keyed:
            out[i] = partition_for_key(entries[i][2].key, count)  # type: ignore[union-attr, arg-type]
        return out
    import pyarrow as pa

    from pyspark_log.records.columnar_encode import partitions_for_keys

    keys = pa.array([entries[i][2].key for i in keyed], pa.large_binary())  # type: ignore[union-attr]
    parts = partitions_for_keys(keys, count).tolist()
    if len(keyed) == len(entries):
        return parts
    for i, p in zip(keyed, parts, strict=True):
        out[i] = p
    return out
