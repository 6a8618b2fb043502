"""What validated options describe: subscriptions, offset specs and ``SourceOptions`` (pure, picklable).

Built by ``options.parse_options``; read by offsets resolution, planning and the readers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark_log.spark.access import IsolationLevel, TopicPartition

NoMatchStrategy = Literal["error", "latest"]
ReadPath = Literal["auto", "broker", "files"]  # readPath: see direct_read.py

EARLIEST = -2  # in offset JSON: the partition's earliest offset
LATEST = -1  # in offset JSON: the partition's latest offset
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_MAX_PARTITION_FETCH_BYTES = 16 * 1024 * 1024  # Kafka: 1 MiB; a task reads one partition in few, large fetches


class PylogOptionError(ValueError):
    """A wrong, missing or conflicting option of the ``pylog`` source; the message says the fix."""


# ---------------------------------------------------------------------------------------------
# What options describe


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]

    def select(self, topics: Mapping[str, int]) -> frozenset[TopicPartition]:
        """The assigned partitions that exist in ``topics`` (topic -> partition count)."""
        return frozenset(tp for tp in self.partitions if tp.partition < topics.get(tp.topic, 0))


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: every partition of these topics, including partitions added later."""

    topics: tuple[str, ...]

    def select(self, topics: Mapping[str, int]) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t, p) for t in self.topics for p in range(topics.get(t, 0)))


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches the regex (Python ``re``)."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None

    def select(self, topics: Mapping[str, int]) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t, p) for t, n in topics.items() if self.matches(t) for p in range(n))


Subscription = Assign | Subscribe | SubscribePattern


@dataclass(frozen=True, slots=True)
class EarliestOffsets:
    option: str = "startingOffsets"


@dataclass(frozen=True, slots=True)
class LatestOffsets:
    option: str = "startingOffsets"


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Per-partition offsets; ``EARLIEST`` (-2) and ``LATEST`` (-1) are resolved at start."""

    offsets: Mapping[TopicPartition, int]
    option: str = "startingOffsets"


@dataclass(frozen=True, slots=True)
class SpecificTimestamps:
    timestamps: Mapping[TopicPartition, int]
    strategy: NoMatchStrategy = "error"
    option: str = "startingOffsetsByTimestamp"


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    timestamp: int
    strategy: NoMatchStrategy = "error"
    option: str = "startingTimestamp"


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | SpecificTimestamps | GlobalTimestamp


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Every option of one query, validated. Picklable: it travels to executors."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only; None for streams
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: IsolationLevel = "read_committed"
    group_id: str | None = None
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    max_partition_fetch_bytes: int = DEFAULT_MAX_PARTITION_FETCH_BYTES
    client_config: Mapping[str, str] = field(default_factory=dict)
    read_path: ReadPath = "broker"
    log_dirs: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # logDirs.<brokerId>
