"""Placing a sealed lane chunk (``futures.LaneChunk``) on the loop, in bulk and columnar.

The chunk holds the rows of consecutive ``send()`` calls to one topic (no explicit partition,
headers or timestamp, no ``on_delivery``), all keyed or all ``sticky`` (no key, or keys that
``partitioner.ignore.keys`` ignores). A sticky chunk fills the sticky partition's open batch and
moves the sticky partition on where a row needs a new batch (KIP-480, ``_place_sticky``). A
keyed chunk's keys are partitioned as Kafka's default partitioner does
(``toPositive(murmur2(key)) % partitions``: compiled where ``records.speedups`` was built, else
vectorised over the chunk when it is long), the rows are grouped by partition with a stable sort
(so each partition keeps the order of the ``send`` calls) and each group goes to
``RecordAccumulator.append_many``. No per-record object is
touched: the chunk keeps the sort's permutation (none for a sticky chunk; its inverse is
computed when a future first asks) and, per appended run, its first sorted position and
``(batch, first index)``; a future finds its batch from those only when asked (``LaneFuture``).
Futures hooked before placement are put into their batches' ``thunks`` under ``futures._LOCK``
when the placement is published.

If the topic's metadata vanished, each record is parked as its own ``RecordFuture`` (the
chunk's ``proxies``), as the one-by-one path parks; if the producer is dead, the records fail
and their ``buffer.memory`` is given back (``fail_chunk``).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from pyspark_log.client import futures
from pyspark_log.client.futures import LaneChunk, RecordFuture
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.types import TopicPartition
from pyspark_log.records import speedups

if TYPE_CHECKING:
    from pyspark_log.client.accumulator import RecordAccumulator
    from pyspark_log.client.cluster import ClusterMetadata

_KEY = itemgetter(0)


class PlacementTarget(Protocol):
    """What placing a chunk needs of ``AsyncProducer`` (``handoff.HandoffTarget`` extends it)."""

    @property
    def accumulator(self) -> RecordAccumulator: ...
    def cluster_metadata(self) -> ClusterMetadata: ...
    def now_ms(self) -> float: ...
    def append_one(self, record: RecordFuture) -> None: ...
    def sticky_partition(self, topic: str, count: int) -> int: ...
    def sticky_next(self, topic: str, count: int, previous: int) -> int: ...
    def appended(self, tps: list[TopicPartition], wake_sender: bool) -> None: ...
    def release(self, reserved: int) -> None: ...


# Below this many records a chunk hashes its keys one by one (pure Python murmur2 is cheaper
# than the vectorised call's fixed cost for a handful of keys).
VECTORISE_FROM = 48


def place_chunk(target: PlacementTarget, chunk: LaneChunk) -> None:
    """Append the chunk's rows to their partitions' batches and publish where they went."""
    topic = chunk.topic
    count = target.cluster_metadata().partition_count(topic)
    if count is None:
        _park(target, chunk)
        return
    if chunk.sticky:
        _place_sticky(target, chunk, count)
        return
    rows, sizes = chunk.rows, chunk.sizes
    n = len(rows)
    keys = list(map(_KEY, rows))
    order: Any
    if speedups.native is not None:  # compiled: murmur2 and a counting sort in one call
        order, cuts, run_parts = speedups.native.group_by_partition(keys, count)
        positions = order
    elif n < VECTORISE_FROM:
        parts = [partition_for_key(k, count) for k in keys]
        order = sorted(range(n), key=parts.__getitem__)
        cuts = [0, *(i for i in range(1, n) if parts[order[i]] != parts[order[i - 1]]), n]
        run_parts = [parts[order[a]] for a in cuts[:-1]]
        positions = order
    else:
        import numpy as np

        from pyspark_log.records.columnar_encode import partitions_for_keys

        hashed = partitions_for_keys(keys, count)
        order = np.argsort(hashed, kind="stable")
        sorted_a = hashed[order]
        cuts = [0, *(np.flatnonzero(np.diff(sorted_a)) + 1).tolist(), n]
        run_parts = sorted_a[cuts[:-1]].tolist()
        positions = order.tolist() if len(cuts) > 2 else None
    if len(cuts) > 2:  # more than one partition: the rows in sorted order
        rows = list(itemgetter(*positions)(rows))
        sizes = list(itemgetter(*positions)(sizes))
    else:
        order = None
    placement = _Placement(target, rows, sizes)
    for p, (a, b) in zip(run_parts, itertools.pairwise(cuts), strict=True):
        placement.put(TopicPartition(topic, p), a, b)
    placement.publish(target, chunk, order)


class _Placement:
    """The appends of a chunk's rows (in sorted order) and what the chunk keeps of them: per
    appended run its first sorted position (``starts``) and ``(batch, first index)``
    (``targets``); the partitions touched and whether the sender should look."""

    def __init__(self, target: PlacementTarget, rows: list[Any], sizes: list[int]) -> None:
        self.acc = target.accumulator
        self.now = target.now_ms()
        self.rows, self.sizes = rows, sizes
        self.starts: list[int] = []
        self.targets: list[tuple[Any, int]] = []
        self.touched: list[TopicPartition] = []
        self.wake = False

    def put(self, tp: TopicPartition, a: int, b: int) -> None:
        """Append sorted rows ``a:b`` to ``tp``."""
        placed: list[tuple[Any, int, int, int]] = []
        if self.acc.append_many(tp, self.rows[a:b], self.sizes[a:b], [None] * (b - a), self.now, placed):
            self.wake = True
        for batch, position, i, _j in placed:
            self.starts.append(a + i)
            self.targets.append((batch, position))
        self.touched.append(tp)

    def publish(self, target: PlacementTarget, chunk: LaneChunk, order: Any) -> None:
        """Hand the chunk what it needs to locate its records: ``order`` (sorted position ->
        chunk position; None when the rows kept their order), the runs' starts and targets."""
        with futures._LOCK:
            chunk.order = order
            chunk.starts = self.starts
            chunk.targets = self.targets
            chunk.publish()  # nothing fails here
        target.appended(self.touched, self.wake)


def sticky_runs(
    target: PlacementTarget, topic: str, count: int, sizes: list[int]
) -> Iterator[tuple[TopicPartition, int, int]]:
    """Where records of ``sizes`` (in order, without keys) go by sticky partitioning (KIP-480):
    ``(partition, i, j)`` for records ``i:j``, to be appended before the next run is asked for.
    A run fills the open batch of the sticky partition while it has room; the record that would
    need a new batch moves the sticky partition on and goes alone to the next one, exactly as
    one-by-one appends with ``abort_on_new_batch`` do."""
    acc = target.accumulator
    cum = list(itertools.accumulate(sizes, initial=0))
    i, n = 0, len(sizes)
    while i < n:
        p = target.sticky_partition(topic, count)
        tp = TopicPartition(topic, p)
        room = acc.open_room(tp)
        j = bisect.bisect_right(cum, cum[i] + room, lo=i + 1) - 1 if room >= 0 else i
        if j > i:  # these fit in the open batch
            yield tp, i, j
            i = j
            if i == n:
                return
        yield TopicPartition(topic, target.sticky_next(topic, count, p)), i, i + 1
        i += 1


def _place_sticky(target: PlacementTarget, chunk: LaneChunk, count: int) -> None:
    """A chunk of records without keys (or with keys ``partitioner.ignore.keys`` ignores),
    appended in the runs ``sticky_runs`` gives, as ``Handoff._flush_sticky`` appends queued
    records. The rows keep their order, so the chunk's sorted positions are its positions (no
    ``order``)."""
    placement = _Placement(target, chunk.rows, chunk.sizes)
    for tp, a, b in sticky_runs(target, chunk.topic, count, chunk.sizes):
        placement.put(tp, a, b)
    placement.publish(target, chunk, None)


def _park(target: PlacementTarget, chunk: LaneChunk) -> None:
    """The topic's metadata vanished: park each record, in order, as a ``RecordFuture``."""
    topic = chunk.topic
    proxies = [
        RecordFuture(topic, None, key, value, ts, headers, size, None)
        for (key, value, ts, headers), size in zip(chunk.rows, chunk.sizes, strict=True)
    ]
    with futures._LOCK:
        chunk.proxies = proxies
        chunk.publish()
    for proxy in proxies:
        target.append_one(proxy)


def fail_chunk(target: PlacementTarget, chunk: LaneChunk, exc: BaseException) -> None:
    """Fail the chunk's records before placement and give their ``buffer.memory`` back."""
    target.release(sum(chunk.sizes))
    with futures._LOCK:
        chunk.error = exc
        failed = chunk.publish()
    futures.notify(failed)
