"""What the ``pylog`` Spark source needs from a broker: the ``BrokerAccess`` protocol.

The source never talks to sockets itself. The driver asks a ``BrokerAccess`` for topics and
offsets; executors ask one for raw record-batch bytes of an offset range. The client-backed
implementation, and ``open_access`` that opens it, live in ``pyspark_log.spark.client_access``
(built on ``pyspark_log.client``, which imports this module); this module names no
implementation, so tests substitute an in-memory double.

Shared rules for every method:

* A topic or partition that does not exist (never created, or deleted) is **omitted** from the
  returned mapping; offset methods never raise for it. The caller decides whether a missing
  partition is data loss.
* Offsets are Kafka offsets: ``earliest`` is the log start offset, ``latest`` the offset the
  next record would get (high watermark for ``read_uncommitted``, last stable offset for
  ``read_committed``). A range ``[start, end)`` may hold fewer than ``end - start`` records:
  compaction removes records and transaction markers take offsets.
* Transient broker errors (leader moves, timeouts) are retried inside the implementation; what
  escapes is a ``BrokerAccessError`` (or a subclass) whose message says what was attempted.
* Implementations are not required to be thread-safe; each Spark task opens its own.
* ``TopicPartition`` is the client's value type (``pyspark_log.client.types``), re-exported here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from pyspark_log.client.types import TopicPartition

__all__ = [
    "AbortedTransaction",
    "AccessOptions",
    "BrokerAccess",
    "BrokerAccessError",
    "FetchedChunk",
    "IsolationLevel",
    "OffsetOutOfRangeError",
    "TopicPartition",
    "UnknownPartitionError",
]

IsolationLevel = Literal["read_committed", "read_uncommitted"]


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One entry of a Fetch response's ``AbortedTransactions`` list (read_committed only)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchedChunk:
    """The data of one Fetch response for one partition.

    ``records`` holds zero or more *whole* RecordBatch v2 batches, back to back (the
    implementation drops a trailing partial batch and fetches it again next time). The first
    batch may start before the requested offset (a fetch that lands mid-batch returns the whole
    batch) and the last may end after ``end_offset``: the reader filters records by offset.
    ``next_offset`` is where the next fetch starts: the last batch's last offset + 1.
    """

    records: bytes | memoryview
    aborted_transactions: tuple[AbortedTransaction, ...]
    next_offset: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


class BrokerAccessError(Exception):
    """A broker operation failed after the implementation's own retries."""


class OffsetOutOfRangeError(BrokerAccessError):
    """``fetch`` asked for an offset the partition's log does not hold.

    Either below the log start offset (retention or deletion removed it) or beyond the log end
    (the log was truncated or the broker was reset) and the log did not grow to it within the
    implementation's wait. The attributes say which; the reader turns this into data loss.
    """

    def __init__(self, tp: TopicPartition, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} of {tp} is out of range: the broker holds [{log_start_offset}, {log_end_offset})"
        )
        self.tp = tp
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnknownPartitionError(BrokerAccessError):
    """``fetch`` named a topic-partition the broker does not have (never created or deleted)."""

    def __init__(self, tp: TopicPartition) -> None:
        super().__init__(f"{tp} does not exist on the broker (deleted, or never created)")
        self.tp = tp


class BrokerAccess(Protocol):
    """The narrow broker interface of the Spark source (driver and executors)."""

    def list_topics(self) -> dict[str, int]:
        """All non-internal topics and their partition counts (``__consumer_offsets`` and
        ``__transaction_state`` are excluded). A deleted topic is simply absent."""
        ...

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each existing partition in ``tps``; missing partitions omitted."""
        ...

    def latest_offsets(
        self, tps: Collection[TopicPartition], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int]:
        """The offset the next record will get: the high watermark for ``read_uncommitted``,
        the last stable offset for ``read_committed``. Missing partitions omitted.

        A broker may briefly report a value lower than an earlier answer (a new leader whose
        high watermark lags); callers must not treat that as truncation on its own."""
        ...

    def offsets_for_timestamps(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int | None]:
        """For each partition, the first offset whose record timestamp is >= the given
        timestamp (ms since the epoch, ListOffsets semantics), or ``None`` when no record is
        that late. Missing partitions omitted."""
        ...

    def fetch(
        self,
        tp: TopicPartition,
        start_offset: int,
        end_offset: int,
        *,
        isolation_level: IsolationLevel,
        max_bytes: int,
    ) -> Iterator[FetchedChunk]:
        """Fetch ``[start_offset, end_offset)`` of one partition as raw batches, in offset order.

        Each chunk is one Fetch response of at most about ``max_bytes`` (a single larger batch
        is still returned whole). Iteration stops once ``next_offset >= end_offset``. With
        ``read_committed`` only offsets below the last stable offset are returned and each chunk
        carries the aborted transactions the broker reported for it.

        Raises ``UnknownPartitionError`` if the partition does not exist and
        ``OffsetOutOfRangeError`` if ``start_offset`` (or a later fetch position) is below the
        log start offset, or if the log ends before ``end_offset`` and does not grow to it within
        the implementation's fetch timeout. The iterator may be closed early by the caller."""
        ...

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Store ``offsets`` (next offset to read) for ``group_id`` with OffsetCommit, as a
        standalone (generation -1) commit, so lag tools see the query's progress. The source
        never reads them back. Raises ``BrokerAccessError`` on failure."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


class AccessOptions(Protocol):
    """What ``client_access.open_access`` reads of the source's options (``specs.SourceOptions`` has both; the
    options modules import this one, so it names no type of theirs)."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def client_config(self) -> Mapping[str, str]: ...
