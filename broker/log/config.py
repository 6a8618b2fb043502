"""Per-partition log settings under Kafka's topic-config names, and the log manager's settings.

``LogConfig`` fields are Kafka's topic configs (``segment.bytes`` → ``segment_bytes``) with Kafka
4.x defaults. ``LogConfig.from_properties`` reads both the topic names and the broker-level
``log.*`` names (``log.segment.bytes``, ``log.roll.hours``, ``log.retention.hours`` …); a topic
name wins over its broker synonym, and ``base`` supplies whatever neither gives, so a topic's
config is ``LogConfig.from_properties(topic_overrides, base=broker_default)``.

Kafka documentation §5.4.1 "Writes": "M ... messages before the OS is forced to flush, S ... seconds" are
``flush.messages`` and ``flush.ms``; §5.4.3 retention by time and by size are ``retention.ms``
and ``retention.bytes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# the log's clock is wall-clock milliseconds, defined in broker.clock; re-exported for the log's importers
from broker.clock import Clock, system_clock_ms  # noqa: F401

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
HEADER_SIZE_BYTES = 61  # RecordBatch v2 header; the smallest segment that can hold a batch

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition's log; names mirror Kafka's topic configs, units last."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3_600_000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * 3_600_000  # retention.ms (-1: forever)
    retention_bytes: int = -1  # retention.bytes (-1: unlimited)
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    max_message_bytes: int = 1048588  # max.message.bytes
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms (Kafka 4.0)
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy ("compact": broker.log.cleaner)
    delete_retention_ms: int = 86_400_000  # delete.retention.ms (tombstones and txn markers)
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    compression_type: str = "producer"  # compression.type (only "producer": no recompression)
    preallocate: bool = False  # preallocate (stored; index files are never preallocated)
    min_insync_replicas: int = 1  # min.insync.replicas (acks=all needs this many in the ISR; Kafka docs §3.3 `acks`)
    # KIP-405 tiered storage (broker.log.remote): -2 takes retention.*, -1 is unlimited
    remote_storage_enable: bool = False  # remote.storage.enable
    local_retention_ms: int = -2  # local.retention.ms
    local_retention_bytes: int = -2  # local.retention.bytes

    def __post_init__(self) -> None:
        check = _check
        check(self.segment_bytes >= HEADER_SIZE_BYTES, "segment.bytes", self.segment_bytes)
        check(self.segment_ms >= 1, "segment.ms", self.segment_ms)
        check(self.segment_jitter_ms >= 0, "segment.jitter.ms", self.segment_jitter_ms)
        check(self.segment_index_bytes >= 12, "segment.index.bytes", self.segment_index_bytes)
        check(self.index_interval_bytes >= 0, "index.interval.bytes", self.index_interval_bytes)
        check(self.retention_ms >= -1, "retention.ms", self.retention_ms)
        check(self.flush_messages >= 1, "flush.messages", self.flush_messages)
        check(self.flush_ms >= 0, "flush.ms", self.flush_ms)
        check(self.max_message_bytes >= 0, "max.message.bytes", self.max_message_bytes)
        check(
            self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME),
            "message.timestamp.type",
            self.message_timestamp_type,
        )
        check(self.message_timestamp_before_max_ms >= 0, "message.timestamp.before.max.ms", 0)
        check(self.message_timestamp_after_max_ms >= 0, "message.timestamp.after.max.ms", 0)
        check(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", self.file_delete_delay_ms)
        check(self.min_insync_replicas >= 1, "min.insync.replicas", self.min_insync_replicas)
        check(self.local_retention_ms >= -2, "local.retention.ms", self.local_retention_ms)
        check(self.local_retention_bytes >= -2, "local.retention.bytes", self.local_retention_bytes)
        check(self.delete_retention_ms >= 0, "delete.retention.ms", self.delete_retention_ms)
        check(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", self.min_compaction_lag_ms)
        check(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", self.max_compaction_lag_ms)
        check(0 <= self.min_cleanable_dirty_ratio <= 1, "min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio)
        check(
            bool(self.cleanup_policy) and set(self.cleanup_policy) <= {"delete", "compact"},
            "cleanup.policy",
            ",".join(self.cleanup_policy),
        )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Time and size retention apply only with ``cleanup.policy`` containing ``delete``."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """The log cleaner keeps the latest record per key (``cleanup.policy`` has ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age at which the active segment rolls: ``segment.ms``, but on a compacted topic at
        most ``max.compaction.lag.ms`` (Kafka ``LogConfig.maxSegmentMs``: the cleaner never
        cleans the active segment, so it must roll for the lag to be honoured)."""
        if self.compact_enabled:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """This config with the topic-level (or ``log.*``) keys in ``props`` applied."""
        return LogConfig.from_properties(props, base=self)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka names; values may be strings (properties files) or Python values.

        Unknown keys are ignored (the same mapping may hold non-log settings). Raises
        ``ValueError`` naming the key for an unparsable or out-of-range value.
        """
        start = base if base is not None else cls()
        changes: dict[str, Any] = {}
        for field_name, names in _SYNONYMS.items():
            for name, scale in names:  # first listed wins: topic name, then broker names
                if name in props and props[name] is not None:
                    changes[field_name] = _parse(field_name, name, props[name], scale)
                    break
        legacy = props.get("message.timestamp.difference.max.ms")
        if legacy is None:
            legacy = props.get("log.message.timestamp.difference.max.ms")
        if legacy is not None:  # removed in Kafka 4.0; before that it bounded both directions
            value = _parse("message_timestamp_before_max_ms", "message.timestamp.difference.max.ms", legacy, 1)
            changes.setdefault("message_timestamp_before_max_ms", value)
            changes.setdefault("message_timestamp_after_max_ms", value)
        return dataclasses.replace(start, **changes)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """Broker-level settings of the log manager and its background tasks (Kafka's names)."""

    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)  # noqa: S108 - Kafka's default  # log.dirs
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    flush_scheduler_interval_ms: int = LONG_MAX  # log.flush.scheduler.interval.ms
    flush_offset_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60_000  # log.flush.start.offset.checkpoint...
    file_deletion_check_interval_ms: int = 5_000  # how often .deleted files are looked at
    dir_failure_probe_interval_ms: int = 10_000  # log.dir.failure.probe.interval.ms (pylog)
    recovery_progress_interval_ms: int = 5_000  # log.recovery.progress.interval.ms (pylog)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> LogManagerConfig:
        dirs_value = props.get("log.dirs") or props.get("log.dir")
        changes: dict[str, Any] = {}
        if dirs_value:
            if isinstance(dirs_value, str):
                dirs = tuple(d.strip() for d in dirs_value.split(",") if d.strip())
            else:
                dirs = tuple(str(d) for d in dirs_value)
            changes["log_dirs"] = dirs
        for field_name, name in (
            ("retention_check_interval_ms", "log.retention.check.interval.ms"),
            ("flush_scheduler_interval_ms", "log.flush.scheduler.interval.ms"),
            ("flush_offset_checkpoint_interval_ms", "log.flush.offset.checkpoint.interval.ms"),
            ("flush_start_offset_checkpoint_interval_ms", "log.flush.start.offset.checkpoint.interval.ms"),
            ("dir_failure_probe_interval_ms", "log.dir.failure.probe.interval.ms"),
        ):
            if props.get(name) is not None:
                changes[field_name] = _parse(field_name, name, props[name], 1)
        if props.get("log.recovery.progress.interval.ms") is not None:
            changes["recovery_progress_interval_ms"] = _parse(
                "recovery_progress_interval_ms", "log.recovery.progress.interval.ms",
                props["log.recovery.progress.interval.ms"], 0,
            )  # fmt: skip
        return dataclasses.replace(cls(), **changes)


# field -> [(property name, multiplier)], topic name first, then broker-level synonyms by priority.
_SYNONYMS: dict[str, list[tuple[str, int]]] = {
    "segment_bytes": [("segment.bytes", 1), ("log.segment.bytes", 1)],
    "segment_ms": [("segment.ms", 1), ("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
    "segment_jitter_ms": [
        ("segment.jitter.ms", 1),
        ("log.roll.jitter.ms", 1),
        ("log.roll.jitter.hours", 3_600_000),
    ],
    "segment_index_bytes": [("segment.index.bytes", 1), ("log.index.size.max.bytes", 1)],
    "index_interval_bytes": [("index.interval.bytes", 1), ("log.index.interval.bytes", 1)],
    "retention_ms": [
        ("retention.ms", 1),
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ],
    "retention_bytes": [("retention.bytes", 1), ("log.retention.bytes", 1)],
    "flush_messages": [("flush.messages", 1), ("log.flush.interval.messages", 1)],
    "flush_ms": [("flush.ms", 1), ("log.flush.interval.ms", 1)],
    "max_message_bytes": [("max.message.bytes", 1), ("message.max.bytes", 1)],
    "message_timestamp_type": [("message.timestamp.type", 0), ("log.message.timestamp.type", 0)],
    "message_timestamp_before_max_ms": [
        ("message.timestamp.before.max.ms", 1),
        ("log.message.timestamp.before.max.ms", 1),
    ],
    "message_timestamp_after_max_ms": [
        ("message.timestamp.after.max.ms", 1),
        ("log.message.timestamp.after.max.ms", 1),
    ],
    "file_delete_delay_ms": [("file.delete.delay.ms", 1), ("log.segment.delete.delay.ms", 1)],
    "cleanup_policy": [("cleanup.policy", 0), ("log.cleanup.policy", 0)],
    "delete_retention_ms": [("delete.retention.ms", 1), ("log.cleaner.delete.retention.ms", 1)],
    "min_compaction_lag_ms": [("min.compaction.lag.ms", 1), ("log.cleaner.min.compaction.lag.ms", 1)],
    "max_compaction_lag_ms": [("max.compaction.lag.ms", 1), ("log.cleaner.max.compaction.lag.ms", 1)],
    "min_cleanable_dirty_ratio": [("min.cleanable.dirty.ratio", 0), ("log.cleaner.min.cleanable.ratio", 0)],
    "compression_type": [("compression.type", 0)],
    "preallocate": [("preallocate", 0), ("log.preallocate", 0)],
    "min_insync_replicas": [("min.insync.replicas", 1)],
    "remote_storage_enable": [("remote.storage.enable", 0)],
    "local_retention_ms": [("local.retention.ms", 1), ("log.local.retention.ms", 1)],
    "local_retention_bytes": [("local.retention.bytes", 1), ("log.local.retention.bytes", 1)],
}


CONFIG_SYNONYMS = _SYNONYMS
"""Public view of the name table: ``LogConfig`` field → [(Kafka name, ms multiplier)], the topic
name first, then broker-level synonyms by priority (DescribeConfigs reports sources from it)."""


def _parse(field_name: str, name: str, value: Any, scale: int) -> Any:
    """Convert one property value to the field's type; ``scale`` turns hours/minutes into ms."""
    try:
        if field_name == "cleanup_policy":
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(item).strip() for item in items if str(item).strip())
        if field_name == "min_cleanable_dirty_ratio":
            return float(value)
        if field_name in ("message_timestamp_type", "compression_type"):
            return str(value).strip()
        if field_name in ("preallocate", "remote_storage_enable"):
            if isinstance(value, bool):
                return value
            return _parse_bool(str(value))
        number = int(str(value).strip()) if not isinstance(value, int) else value
        if number > 0 and scale > 1:
            return min(number * scale, LONG_MAX)
        return number
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config {name}={value!r} is invalid: {exc}") from exc


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _check(ok: bool, name: str, value: object) -> None:
    if not ok:
        raise ValueError(f"config {name}={value!r} is out of range")
