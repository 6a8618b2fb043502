"""The broker settings of KIP-848 consumer groups, with Kafka 4.1's names, defaults and checks
(``GroupCoordinatorConfig``): ``group.consumer.{session.timeout,heartbeat.interval}.ms`` must lie
within their ``min``/``max`` bounds, the heartbeat interval must be below the session timeout,
``group.consumer.assignors`` names ``uniform`` and/or ``range`` (or Kafka's assignor class
names), the first being the default, and ``group.coordinator.rebalance.protocols`` lists
``classic`` and optionally ``consumer`` (and ``share``, accepted, not served).
``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``, case-insensitive,
default ``bidirectional``) says whether a classic group may become a consumer group when a member
joins with ConsumerGroupHeartbeat (``upgrade``), a consumer group a classic one when its last
consumer-protocol member leaves (``downgrade``), both, or neither (``disabled``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.coordinator.consumer_group.assignors import ASSIGNORS, CLASS_NAMES

PROTOCOLS = ("classic", "consumer", "share", "streams")
MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")


class ConsumerGroupConfigError(ValueError):
    """A group.consumer.* setting Kafka would refuse at start-up; the message names the keys."""


def _list(value: object) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    protocols: tuple[str, ...] = ("classic", "consumer")
    migration_policy: str = "bidirectional"
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgraded group must fit

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @property
    def enabled(self) -> bool:
        """Whether ConsumerGroupHeartbeat is served (``consumer`` in the rebalance protocols)."""
        return "consumer" in self.protocols

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]

    @classmethod
    def from_properties(cls, get: Callable[[str, object], object]) -> ConsumerGroupConfig:
        """Read and check the settings; raises ``ConsumerGroupConfigError`` as Kafka refuses them."""

        def num(key: str, default: int) -> int:
            return int(str(get(key, default)))

        assignors = []
        for name in _list(get("group.consumer.assignors", "uniform,range")):
            short = CLASS_NAMES.get(name, name)
            if short not in ASSIGNORS:
                raise ConsumerGroupConfigError(
                    f"group.consumer.assignors: unknown assignor {name!r} (pylog serves uniform and range)"
                )
            assignors.append(short)
        protocols = [p.lower() for p in _list(get("group.coordinator.rebalance.protocols", "classic,consumer"))]
        for protocol in protocols:
            if protocol not in PROTOCOLS:
                raise ConsumerGroupConfigError(f"group.coordinator.rebalance.protocols: unknown protocol {protocol!r}")
        if "classic" not in protocols:
            raise ConsumerGroupConfigError("group.coordinator.rebalance.protocols must contain the classic protocol")
        policy = str(get("group.consumer.migration.policy", "bidirectional")).strip().lower()
        if policy not in MIGRATION_POLICIES:
            raise ConsumerGroupConfigError(
                f"Invalid value {policy} for configuration group.consumer.migration.policy: String must be one of "
                "(case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"
            )
        config = cls(
            session_timeout_ms=num("group.consumer.session.timeout.ms", 45_000),
            min_session_timeout_ms=num("group.consumer.min.session.timeout.ms", 45_000),
            max_session_timeout_ms=num("group.consumer.max.session.timeout.ms", 60_000),
            heartbeat_interval_ms=num("group.consumer.heartbeat.interval.ms", 5_000),
            min_heartbeat_interval_ms=num("group.consumer.min.heartbeat.interval.ms", 5_000),
            max_heartbeat_interval_ms=num("group.consumer.max.heartbeat.interval.ms", 15_000),
            max_size=num("group.consumer.max.size", 2**31 - 1),
            assignors=tuple(dict.fromkeys(assignors)) or ("uniform",),
            protocols=tuple(protocols),
            migration_policy=policy,
            classic_max_size=num("group.max.size", 2**31 - 1),
        )
        config.check()
        return config

    def check(self) -> None:
        def at_least(key: str, value: int, low_key: str, low: int) -> None:
            if value < low:
                raise ConsumerGroupConfigError(f"{key} must be greater than or equal to {low_key}")

        def at_most(key: str, value: int, high_key: str, high: int) -> None:
            if value > high:
                raise ConsumerGroupConfigError(f"{key} must be less than or equal to {high_key}")

        hb, sess = "group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms"
        at_least(
            "group.consumer.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms,
        )  # fmt: skip
        at_least(hb, self.heartbeat_interval_ms, "group.consumer.min.heartbeat.interval.ms",
                 self.min_heartbeat_interval_ms)  # fmt: skip
        at_most(hb, self.heartbeat_interval_ms, "group.consumer.max.heartbeat.interval.ms",
                self.max_heartbeat_interval_ms)  # fmt: skip
        at_least(
            "group.consumer.max.session.timeout.ms", self.max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms", self.min_session_timeout_ms,
        )  # fmt: skip
        at_least(sess, self.session_timeout_ms, "group.consumer.min.session.timeout.ms", self.min_session_timeout_ms)
        at_most(sess, self.session_timeout_ms, "group.consumer.max.session.timeout.ms", self.max_session_timeout_ms)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConsumerGroupConfigError(f"{hb} must be less than {sess}")
        if self.min_heartbeat_interval_ms < 1 or self.min_session_timeout_ms < 1:
            raise ConsumerGroupConfigError("group.consumer.min.* settings must be at least 1")
        if self.max_size < 1:
            raise ConsumerGroupConfigError("group.consumer.max.size must be at least 1")
