"""Value types users meet in the client API: partitions, record metadata, consumed records, offsets.

All are frozen (hashable where it makes sense) and picklable, so Spark can ship them between
driver and executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic name and a partition number (Kafka's ``TopicPartition``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """What a producer learns once a record is acknowledged.

    ``offset`` is -1 with ``acks=0`` (the broker does not answer). ``timestamp`` is the broker's
    LogAppendTime when the topic uses it, otherwise the record's CreateTime.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class TimestampType(IntEnum):
    """Record timestamp semantics (batch attribute bit 3)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class IsolationLevel(IntEnum):
    """Fetch and ListOffsets isolation level as sent on the wire."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def parse(cls, value: str | int | IsolationLevel) -> IsolationLevel:
        """``read_uncommitted`` / ``read_committed`` (Kafka's config values) or the wire int."""
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"isolation.level must be read_uncommitted or read_committed, not {value!r}") from None
        return cls(int(value))


class ConsumerRecord(NamedTuple):
    """One record as a consumer returns it (a named tuple: cheap to build on the hot path)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    leader_epoch: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """A ListOffsets answer: the offset, the timestamp it was found for, the leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class OffsetSpec:
    """The special timestamps of ListOffsets (a non-negative int asks for that timestamp)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """An aborted transaction in a Fetch response: the producer and its first offset."""

    producer_id: int
    first_offset: int
