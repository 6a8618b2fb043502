"""An in-memory ``BrokerAccess`` test double: topics of partitions holding encoded RecordBatch v2 bytes.

It follows the protocol's contract (missing partitions omitted, ``OffsetOutOfRangeError`` and
``UnknownPartitionError`` from ``fetch``, whole batches per chunk, aborted transactions per chunk)
and lets tests break the broker on purpose: delete records or topics, add partitions, compact,
reset a partition, or make ``latest_offsets`` report a lagging value.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.spark.access import (
    AbortedTransaction,
    FetchedChunk,
    IsolationLevel,
    OffsetOutOfRangeError,
    TopicPartition,
    UnknownPartitionError,
)

CONTROL_KEY = struct.Struct(">hh")


@dataclass
class StoredBatch:
    base_offset: int
    last_offset: int
    timestamps: list[int]
    data: bytes
    producer_id: int = -1


@dataclass
class PartitionLog:
    batches: list[StoredBatch] = field(default_factory=list)
    next_offset: int = 0
    log_start: int = 0
    open_txns: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first offset, marker offset)

    @property
    def lso(self) -> int:
        return min(self.open_txns.values(), default=self.next_offset)


class FakeBroker:
    """``BrokerAccess`` over in-memory logs. ``calls`` records method names for assertions."""

    def __init__(self) -> None:
        self.logs: dict[str, list[PartitionLog]] = {}
        self.lagging_latest: dict[TopicPartition, list[int]] = {}  # answers to give before the truth
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []
        self.commit_error: Exception | None = None
        self.calls: list[str] = []
        self.closed = 0

    # -- building and breaking -----------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self.logs[topic] = [PartitionLog() for _ in range(partitions)]

    def add_partitions(self, topic: str, count: int) -> None:
        self.logs[topic].extend(PartitionLog() for _ in range(count))

    def delete_topic(self, topic: str) -> None:
        del self.logs[topic]

    def part(self, topic: str, partition: int) -> PartitionLog:
        return self.logs[topic][partition]

    def produce(
        self,
        topic: str,
        partition: int,
        values: list[bytes | None],
        *,
        key: bytes | None = None,
        timestamp: int = 1_000,
        headers: tuple[tuple[str, bytes | None], ...] = (),
        producer_id: int = -1,
        transactional: bool = False,
        log_append_time: bool = False,
    ) -> tuple[int, int]:
        """Append one batch; returns its (first, last) offsets. Record i gets ``timestamp + i``."""
        log = self.part(topic, partition)
        records = [ProducerRecord(key, v, timestamp + i, headers) for i, v in enumerate(values)]
        base = log.next_offset
        data = encode_batch(
            records,
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=0 if producer_id >= 0 else -1,
            transactional=transactional,
            log_append_time=log_append_time,
        )
        last = base + len(values) - 1
        log.batches.append(StoredBatch(base, last, [r.timestamp for r in records], data, producer_id))
        log.next_offset = last + 1
        if transactional:
            log.open_txns.setdefault(producer_id, base)
        return base, last

    def end_transaction(self, topic: str, partition: int, producer_id: int, *, commit: bool) -> int:
        """Write a COMMIT or ABORT marker; returns its offset."""
        log = self.part(topic, partition)
        offset = log.next_offset
        marker = ProducerRecord(CONTROL_KEY.pack(0, 1 if commit else 0), b"\x00\x00\x00\x00\x00\x00", 0)
        data = encode_batch(
            [marker], base_offset=offset, producer_id=producer_id, producer_epoch=0, transactional=True, control=True
        )
        log.batches.append(StoredBatch(offset, offset, [0], data, producer_id))
        log.next_offset = offset + 1
        first = log.open_txns.pop(producer_id)
        if not commit:
            log.aborted.append((producer_id, first, offset))
        return offset

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Retention: drop whole batches below ``before`` and move the log start there."""
        log = self.part(topic, partition)
        log.batches = [b for b in log.batches if b.last_offset >= before]
        log.log_start = max(log.log_start, before)

    def compact(self, topic: str, partition: int, drop_offsets: set[int]) -> None:
        """Remove whole batches whose base offset is in ``drop_offsets`` (offsets become non-consecutive)."""
        log = self.part(topic, partition)
        log.batches = [b for b in log.batches if b.base_offset not in drop_offsets]

    def reset_partition(self, topic: str, partition: int) -> None:
        """The broker lost the partition's data: an empty log starting at 0."""
        self.logs[topic][partition] = PartitionLog()

    # -- BrokerAccess --------------------------------------------------------------------------

    def _get(self, tp: TopicPartition) -> PartitionLog | None:
        parts = self.logs.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return None
        return parts[tp.partition]

    def list_topics(self) -> dict[str, int]:
        self.calls.append("list_topics")
        return {t: len(p) for t, p in self.logs.items()}

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("earliest_offsets")
        return {tp: log.log_start for tp in tps if (log := self._get(tp)) is not None}

    def latest_offsets(
        self, tps: Collection[TopicPartition], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int]:
        self.calls.append("latest_offsets")
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            log = self._get(tp)
            if log is None:
                continue
            lagging = self.lagging_latest.get(tp)
            if lagging:
                out[tp] = lagging.pop(0)
            else:
                out[tp] = log.lso if isolation_level == "read_committed" else log.next_offset
        return out

    def offsets_for_timestamps(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int | None]:
        self.calls.append("offsets_for_timestamps")
        out: dict[TopicPartition, int | None] = {}
        for tp, ts in timestamps.items():
            log = self._get(tp)
            if log is None:
                continue
            out[tp] = next(
                (
                    b.base_offset + i
                    for b in log.batches
                    for i, t in enumerate(b.timestamps)
                    if t >= ts and b.base_offset + i >= log.log_start
                ),
                None,
            )
        return out

    def fetch(
        self,
        tp: TopicPartition,
        start_offset: int,
        end_offset: int,
        *,
        isolation_level: IsolationLevel,
        max_bytes: int,
    ) -> Iterator[FetchedChunk]:
        self.calls.append("fetch")
        position = start_offset
        while position < end_offset:
            log = self._get(tp)
            if log is None:
                raise UnknownPartitionError(tp)
            limit = log.lso if isolation_level == "read_committed" else log.next_offset
            if position < log.log_start or position > log.next_offset or (position >= limit and limit < end_offset):
                raise OffsetOutOfRangeError(tp, position, log.log_start, log.next_offset)
            chosen: list[StoredBatch] = []
            size = 0
            for b in log.batches:
                if b.last_offset < position or b.base_offset >= limit:
                    continue
                if chosen and size + len(b.data) > max_bytes:
                    break
                chosen.append(b)
                size += len(b.data)
            if not chosen:
                raise OffsetOutOfRangeError(tp, position, log.log_start, log.next_offset)
            first, last = chosen[0].base_offset, chosen[-1].last_offset
            aborted = (
                tuple(AbortedTransaction(pid, f) for pid, f, marker in log.aborted if f <= last and marker >= first)
                if isolation_level == "read_committed"
                else ()
            )
            position = last + 1
            yield FetchedChunk(
                b"".join(b.data for b in chosen), aborted, position, log.next_offset, log.lso, log.log_start
            )

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.calls.append("commit_offsets")
        if self.commit_error is not None:
            raise self.commit_error
        self.commits.append((group_id, dict(offsets)))

    def close(self) -> None:
        self.closed += 1
