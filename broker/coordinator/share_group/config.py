"""The broker settings of KIP-932 share groups, with Kafka 4.1.1's names, defaults and bounds
(``ShareGroupConfig`` and ``GroupCoordinatorConfig``'s ``CONFIG_DEF``, read from the 4.1.1 jars):

=========================================== ======= =================
key                                         default bounds
=========================================== ======= =================
group.share.delivery.count.limit            5       [2, 10]
group.share.record.lock.duration.ms         30000   [1000, 3600000], within min/max below
group.share.min.record.lock.duration.ms     15000   [1000, 30000]
group.share.max.record.lock.duration.ms     60000   [30000, 3600000]
group.share.partition.max.record.locks      2000    [100, 10000]
group.share.max.share.sessions              2000    >= 1
group.share.session.timeout.ms              45000   >= 1, within min/max
group.share.{min,max}.session.timeout.ms    45000/60000  >= 1
group.share.heartbeat.interval.ms           5000    >= 1, within min/max, < session timeout
group.share.{min,max}.heartbeat.interval.ms 5000/15000   >= 1
group.share.max.size                        200     [1, 1000]
group.share.assignors                       simple
=========================================== ======= =================

and ``ShareCoordinatorConfig``'s: ``share.coordinator.state.topic.num.partitions`` 50,
``.replication.factor`` 3, ``.min.isr`` 2, ``.segment.bytes`` 104857600 (each >= 1),
``share.coordinator.snapshot.update.records.per.snapshot`` 500 (>= 0),
``share.coordinator.write.timeout.ms`` 5000 (>= 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class ShareGroupConfigError(ValueError):
    """A group.share.* setting Kafka would refuse at start-up; the message names the key."""


@dataclass(frozen=True)
class ShareGroupConfig:
    delivery_count_limit: int = 5
    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000
    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = 200
    state_topic_partitions: int = 50
    state_topic_replication_factor: int = 3
    state_topic_min_isr: int = 2
    state_topic_segment_bytes: int = 104_857_600
    snapshot_update_records_per_snapshot: int = 500
    write_timeout_ms: int = 5000

    @classmethod
    def from_properties(cls, get: Callable[[str, object], object]) -> ShareGroupConfig:
        def num(key: str, default: int) -> int:
            return int(str(get(key, default)))

        config = cls(
            delivery_count_limit=num("group.share.delivery.count.limit", 5),
            record_lock_duration_ms=num("group.share.record.lock.duration.ms", 30_000),
            min_record_lock_duration_ms=num("group.share.min.record.lock.duration.ms", 15_000),
            max_record_lock_duration_ms=num("group.share.max.record.lock.duration.ms", 60_000),
            partition_max_record_locks=num("group.share.partition.max.record.locks", 2000),
            max_share_sessions=num("group.share.max.share.sessions", 2000),
            session_timeout_ms=num("group.share.session.timeout.ms", 45_000),
            min_session_timeout_ms=num("group.share.min.session.timeout.ms", 45_000),
            max_session_timeout_ms=num("group.share.max.session.timeout.ms", 60_000),
            heartbeat_interval_ms=num("group.share.heartbeat.interval.ms", 5_000),
            min_heartbeat_interval_ms=num("group.share.min.heartbeat.interval.ms", 5_000),
            max_heartbeat_interval_ms=num("group.share.max.heartbeat.interval.ms", 15_000),
            max_size=num("group.share.max.size", 200),
            state_topic_partitions=num("share.coordinator.state.topic.num.partitions", 50),
            state_topic_replication_factor=num("share.coordinator.state.topic.replication.factor", 3),
            state_topic_min_isr=num("share.coordinator.state.topic.min.isr", 2),
            state_topic_segment_bytes=num("share.coordinator.state.topic.segment.bytes", 104_857_600),
            snapshot_update_records_per_snapshot=num("share.coordinator.snapshot.update.records.per.snapshot", 500),
            write_timeout_ms=num("share.coordinator.write.timeout.ms", 5000),
        )
        config.check()
        return config

    def check(self) -> None:
        def between(key: str, value: int, low: int, high: int | None = None) -> None:
            if value < low or (high is not None and value > high):
                bound = f"[{low},...,{high}]" if high is not None else f"[{low},...]"
                raise ShareGroupConfigError(f"Invalid value {value} for configuration {key}: Value must be in {bound}")

        between("group.share.delivery.count.limit", self.delivery_count_limit, 2, 10)
        between("group.share.record.lock.duration.ms", self.record_lock_duration_ms, 1000, 3_600_000)
        between("group.share.min.record.lock.duration.ms", self.min_record_lock_duration_ms, 1000, 30_000)
        between("group.share.max.record.lock.duration.ms", self.max_record_lock_duration_ms, 30_000, 3_600_000)
        between("group.share.partition.max.record.locks", self.partition_max_record_locks, 100, 10_000)
        between("group.share.max.share.sessions", self.max_share_sessions, 1)
        between("group.share.max.size", self.max_size, 1, 1000)
        between("share.coordinator.snapshot.update.records.per.snapshot", self.snapshot_update_records_per_snapshot, 0)
        between("share.coordinator.write.timeout.ms", self.write_timeout_ms, 1)
        between("share.coordinator.state.topic.min.isr", self.state_topic_min_isr, 1)
        between("share.coordinator.state.topic.segment.bytes", self.state_topic_segment_bytes, 1)
        for key, value in (
            ("group.share.session.timeout.ms", self.session_timeout_ms),
            ("group.share.min.session.timeout.ms", self.min_session_timeout_ms),
            ("group.share.max.session.timeout.ms", self.max_session_timeout_ms),
            ("group.share.heartbeat.interval.ms", self.heartbeat_interval_ms),
            ("group.share.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms),
            ("group.share.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms),
            ("share.coordinator.state.topic.num.partitions", self.state_topic_partitions),
            ("share.coordinator.state.topic.replication.factor", self.state_topic_replication_factor),
        ):
            between(key, value, 1)

        def within(key: str, value: int, low_key: str, low: int, high_key: str, high: int) -> None:  # noqa: PLR0917
            if value < low:
                raise ShareGroupConfigError(f"{key} must be greater than or equal to {low_key}")
            if value > high:
                raise ShareGroupConfigError(f"{key} must be less than or equal to {high_key}")

        within(
            "group.share.record.lock.duration.ms", self.record_lock_duration_ms,
            "group.share.min.record.lock.duration.ms", self.min_record_lock_duration_ms,
            "group.share.max.record.lock.duration.ms", self.max_record_lock_duration_ms,
        )  # fmt: skip
        within(
            "group.share.session.timeout.ms", self.session_timeout_ms,
            "group.share.min.session.timeout.ms", self.min_session_timeout_ms,
            "group.share.max.session.timeout.ms", self.max_session_timeout_ms,
        )  # fmt: skip
        within(
            "group.share.heartbeat.interval.ms", self.heartbeat_interval_ms,
            "group.share.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms,
            "group.share.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms,
        )  # fmt: skip
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ShareGroupConfigError(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
            )


# -- group configs (KIP-848/932's GROUP config resource, type 32) ----------------------------------

GROUP_RESOURCE = 32
SHARE_GROUP_CONFIG_KEYS = (
    "share.auto.offset.reset",
    "share.isolation.level",
    "share.record.lock.duration.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
)


def group_config_defaults(config: ShareGroupConfig) -> dict[str, str]:
    """A share group's configs when none is set: Kafka 4.1's ``GroupConfig`` defaults, the
    durations from the broker's ``group.share.*`` keys."""
    return {
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
        "share.record.lock.duration.ms": str(config.record_lock_duration_ms),
        "share.session.timeout.ms": str(config.session_timeout_ms),
        "share.heartbeat.interval.ms": str(config.heartbeat_interval_ms),
    }


def check_group_config(config: ShareGroupConfig, key: str, value: str) -> str | None:
    """Kafka's ``GroupConfig.validate`` for the share keys: None, or why ``value`` is refused."""
    if key not in SHARE_GROUP_CONFIG_KEYS:
        return f"Unknown group config name: {key}"
    if key == "share.auto.offset.reset":
        if value in ("latest", "earliest"):
            return None
        return f"Invalid value {value} for configuration {key}: must be latest or earliest (by_duration: not served)"
    if key == "share.isolation.level":
        if value in ("read_committed", "read_uncommitted"):
            return None
        return f"Invalid value {value} for configuration {key}: String must be one of: read_committed, read_uncommitted"
    try:
        number = int(value)
    except ValueError:
        return f"Invalid value {value} for configuration {key}: Not a number of type INT"
    bounds = {
        "share.record.lock.duration.ms": (
            "group.share.min.record.lock.duration.ms", config.min_record_lock_duration_ms,
            "group.share.max.record.lock.duration.ms", config.max_record_lock_duration_ms,
        ),
        "share.session.timeout.ms": (
            "group.share.min.session.timeout.ms", config.min_session_timeout_ms,
            "group.share.max.session.timeout.ms", config.max_session_timeout_ms,
        ),
        "share.heartbeat.interval.ms": (
            "group.share.min.heartbeat.interval.ms", config.min_heartbeat_interval_ms,
            "group.share.max.heartbeat.interval.ms", config.max_heartbeat_interval_ms,
        ),
    }  # fmt: skip
    low_key, low, high_key, high = bounds[key]
    if number < low:
        return f"{key} must be greater than or equal to {low_key}"
    if number > high:
        return f"{key} must be less than or equal to {high_key}"
    return None
