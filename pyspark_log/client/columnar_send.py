"""The producer's batch API, the part that needs no loop: Arrow columns in, encoded batches out.

``Producer.send_batch`` (``sync.py``) runs these on the caller's thread, so the CPU work of many
records (partitioning, encoding) never blocks the producer's I/O loop:

1. ``records_of`` takes the columns by name from a ``pyarrow.Table`` / ``RecordBatch`` or a
   mapping of columns: ``value`` (required; binary or string, null = tombstone), ``key``,
   ``headers`` (``list<struct<key: string, value: binary>>``), ``partition`` (int, null = the
   partitioner's choice), ``timestamp`` (int ms or an Arrow timestamp; absent = now).
2. ``assign_partitions`` is Kafka's default partitioner over the whole column: an explicit
   partition wins; a non-null key goes to ``toPositive(murmur2(key)) % partitions`` (vectorised,
   ``columnar_encode.murmur2``); null keys are sticky (KIP-480): a run of null-key rows fills
   one partition up to ``batch.size`` and then the sticky partition moves on.
3. ``encode_partitions`` groups rows by partition (stable: order within a partition is kept),
   cuts batches with the accumulator's ``batch.size`` rule and encodes the records sections of
   a partition in runs of whole batches (``ENCODE_RUN_BYTES``), one pass per run
   (``columnar_encode.encode_sections``); each run is queued before the next is encoded.

The batches are then queued on the loop (``AsyncProducer.enqueue_columns_threadsafe``) where
they take sequence numbers, join transactions, linger and retry like ``send()``'s batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_log.client.errors import UnknownTopicOrPartitionError
from pyspark_log.client.producer_batch import BATCH_OVERHEAD_BYTES, ColumnarDelivery, ColumnarSection, ProducerBatch
from pyspark_log.client.types import TopicPartition
from pyspark_log.records import columnar_encode
from pyspark_log.records.columnar_encode import ArrowRecords

if TYPE_CHECKING:
    from pyspark_log.client.bufferpool import BufferPool
    from pyspark_log.client.clock import Clock
    from pyspark_log.client.cluster import Cluster


class ProducerCore(Protocol):
    """What the batch API needs of ``AsyncProducer`` (a protocol: no import cycle)."""

    @property
    def config(self) -> Mapping[str, Any]: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def pool(self) -> BufferPool: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def batch_size_bytes(self) -> int: ...
    def check_record_size(self, size: int) -> None: ...
    def batch_sticky(self, topic: str, count: int, previous: int | None) -> int: ...


COLUMNS = ("value", "key", "headers", "partition", "timestamp")
_Ints = Any


def _column(data: Any, name: str) -> Any:
    if isinstance(data, pa.Table | pa.RecordBatch):
        return data.column(name) if name in data.column_names else None
    if isinstance(data, Mapping):
        column = data.get(name)
        if column is None or isinstance(column, pa.Array | pa.ChunkedArray | np.ndarray):
            return column
        if name == "headers":
            return pa.array(
                [None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in column],
                columnar_encode.HEADERS_TYPE,
            )
        return pa.array(column)
    raise TypeError(f"send_batch takes a pyarrow Table, RecordBatch or a mapping of columns, not {type(data).__name__}")


def records_of(
    data: Any, *, partition: int | None, timestamp_ms: int | None, now_ms: int
) -> tuple[ArrowRecords, _Ints | None]:
    """The records of ``data`` and its explicit partitions (-1 = none; None when no row has one)."""
    value = _column(data, "value")
    if value is None:
        raise ValueError("send_batch needs a value column (binary or string; null values are tombstones)")
    n = len(value)
    ts_column = _column(data, "timestamp")
    if ts_column is not None and timestamp_ms is not None:
        raise ValueError("give timestamps either as a timestamp column or as timestamp_ms, not both")
    timestamps: Any = ts_column if ts_column is not None else (now_ms if timestamp_ms is None else int(timestamp_ms))
    records = ArrowRecords.build(
        value=value, key=_column(data, "key"), headers=_column(data, "headers"), timestamp_ms=timestamps, num_rows=n
    )
    if partition is not None:
        if not isinstance(partition, int) or partition < 0:
            raise ValueError(f"partition must be a non-negative int, not {partition!r}")
        return records, np.full(n, partition, np.int64)
    column = _column(data, "partition")
    if column is None:
        return records, None
    if isinstance(column, np.ndarray):
        explicit = column.astype(np.int64)
    else:
        if not pa.types.is_integer(column.type):
            raise TypeError(f"the partition column must be integers, not {column.type}")
        explicit = pc.fill_null(column.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    if len(explicit) != n:
        raise ValueError(f"the partition column has {len(explicit)} values, expected {n}")
    if (explicit < -1).any():
        raise ValueError(f"partition must be non-negative (found {int(explicit.min())})")
    return records, (explicit if (explicit >= 0).any() else None)


StickyChoice = Callable[[int | None], int]  # previous sticky partition (None: the current one) -> partition


def assign_partitions(
    records: ArrowRecords,
    explicit: _Ints | None,
    num_partitions: int,
    *,
    ignore_keys: bool,
    estimates: _Ints,
    batch_size_bytes: int,
    sticky: StickyChoice,
) -> _Ints:
    """The partition of every row (Kafka's default partitioner; see the module docstring)."""
    n = len(records)
    parts = np.full(n, -1, np.int64) if explicit is None else explicit.copy()
    free = parts < 0
    if not free.any():
        return parts
    keyed = free & ~np.asarray(records.key.is_null().to_numpy(zero_copy_only=False), bool)
    if ignore_keys:
        keyed[:] = False
    if keyed.any():
        rows = np.flatnonzero(keyed)
        parts[rows] = columnar_encode.partitions_for_keys(records.key.take(pa.array(rows)), num_partitions)
    loose = np.flatnonzero(free & ~keyed)
    if loose.size:
        bounds = columnar_encode.batch_bounds(estimates[loose], batch_size_bytes, BATCH_OVERHEAD_BYTES)
        p = sticky(None)
        for i in range(len(bounds) - 1):
            if i:
                p = sticky(p)
            parts[loose[bounds[i] : bounds[i + 1]]] = p
    return parts


@dataclass(frozen=True, slots=True)
class PartitionBatches:
    """The encoded batches of one partition, oldest first, and the bytes they reserve."""

    tp: TopicPartition
    batches: list[ProducerBatch]

    @property
    def reserved_bytes(self) -> int:
        return sum(b.reserved_bytes for b in self.batches)


ENCODE_RUN_BYTES = 8 << 20  # records (by estimate) encoded per pass: batches leave while the rest encodes


def encode_partitions(
    topic: str,
    records: ArrowRecords,
    parts: _Ints,
    estimates: _Ints,
    *,
    batch_size_bytes: int,
    created_ms: float,
    delivery: ColumnarDelivery,
    run_bytes: int | None = None,
) -> Iterator[PartitionBatches]:
    """Group rows by partition (order kept within each), cut batches, encode them. Lazily, in
    runs of whole batches of about ``run_bytes`` each (default ``ENCODE_RUN_BYTES``; at least
    one batch), oldest first within a partition: the caller queues a run while the next is
    encoded, so the first requests go out early, and each run's reordered copy of the rows
    (``take``) is small and short-lived."""
    run_bytes = ENCODE_RUN_BYTES if run_bytes is None else run_bytes
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    bounds = [0, *(np.flatnonzero(np.diff(sorted_parts)) + 1).tolist(), len(parts)]
    for g in range(len(bounds) - 1):
        rows_of_partition = order[bounds[g] : bounds[g + 1]]
        est = estimates[rows_of_partition]
        starts = columnar_encode.batch_bounds(est, batch_size_bytes, BATCH_OVERHEAD_BYTES)
        est_cum = np.zeros(len(est) + 1, np.int64)
        np.cumsum(est, out=est_cum[1:])
        tp = TopicPartition(topic, int(sorted_parts[bounds[g]]))
        first = 0
        while first < len(starts) - 1:
            last = int(np.searchsorted(est_cum[starts], est_cum[starts[first]] + run_bytes, side="right")) - 1
            last = min(max(last, first + 1), len(starts) - 1)
            lo, hi = int(starts[first]), int(starts[last])
            idx = rows_of_partition[lo:hi]
            if hi - lo == idx[-1] - idx[0] + 1:  # consecutive input rows: no reordered copy
                rows = records.slice(int(idx[0]), int(idx[-1]) + 1)
            else:
                rows = records.take(idx)
            sections = columnar_encode.encode_sections(rows, starts[first : last + 1] - lo)
            batches = []
            for b in range(last - first):
                a, z = int(starts[first + b]), int(starts[first + b + 1])
                section = ColumnarSection(
                    sections.section(b), z - a, int(sections.base_timestamp[b]), int(sections.max_timestamp[b])
                )
                batches.append(
                    ProducerBatch.columnar(
                        tp,
                        created_ms,
                        batch_size_bytes,
                        section=section,
                        columns=rows.slice(a - lo, z - lo),
                        size_bytes=int(est_cum[z] - est_cum[a]),
                        delivery=delivery,
                    )
                )
            yield PartitionBatches(tp, batches)
            first = last


def reservation_groups(batches: Sequence[ProducerBatch], limit_bytes: int) -> list[list[ProducerBatch]]:
    """Consecutive runs of batches reserving at most ``limit_bytes`` each (at least one batch):
    ``buffer.memory`` is taken a run at a time, so back-pressure works for inputs larger than it."""
    groups: list[list[ProducerBatch]] = []
    size = 0
    for batch in batches:
        if groups and size + batch.reserved_bytes <= limit_bytes:
            groups[-1].append(batch)
            size += batch.reserved_bytes
        else:
            groups.append([batch])
            size = batch.reserved_bytes
    return groups


def prepare(
    core: ProducerCore, topic: str, data: Any, partition: int | None, timestamp_ms: int | None
) -> tuple[ArrowRecords, _Ints | None, _Ints]:
    """The records of ``data``, their explicit partitions and size estimates; raises for bad
    columns and for records above ``max.request.size`` / ``buffer.memory``. Thread-safe."""
    if not isinstance(topic, str) or not topic:
        raise TypeError("topic must be a non-empty str")
    records, explicit = records_of(data, partition=partition, timestamp_ms=timestamp_ms, now_ms=core.clock.wall_ms())
    estimates = columnar_encode.estimate_bytes(records)
    if len(records):
        core.check_record_size(int(estimates.max()))
    return records, explicit, estimates


def groups(
    core: ProducerCore,
    topic: str,
    records: ArrowRecords,
    explicit: _Ints | None,
    estimates: _Ints,
    *,
    delivery: ColumnarDelivery,
) -> Iterator[tuple[TopicPartition, list[ProducerBatch]]]:
    """Partition and encode the records (the topic's metadata must be known) and yield them as
    runs of batches per partition, each run reserving at most a quarter of ``buffer.memory``.
    CPU-heavy: run it off the producer's loop. Thread-safe."""
    count = core.cluster.metadata.partition_count(topic)
    if count is None:
        raise UnknownTopicOrPartitionError(f"the metadata of topic {topic!r} is gone")
    batch_size = core.batch_size_bytes
    parts = assign_partitions(
        records,
        explicit,
        count,
        ignore_keys=core.config["partitioner.ignore.keys"],
        estimates=estimates,
        batch_size_bytes=batch_size,
        sticky=lambda previous: core.batch_sticky(topic, count, previous),
    )
    chunks = encode_partitions(
        topic,
        records,
        parts,
        estimates,
        batch_size_bytes=batch_size,
        created_ms=core.clock.monotonic_ms(),
        delivery=delivery,
    )
    limit = max(core.pool.total_bytes // 4, 1)
    for chunk in chunks:
        for group in reservation_groups(chunk.batches, limit):
            yield chunk.tp, group
