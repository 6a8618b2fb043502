"""Replication throttles: a bound on the bytes that move a replica that is not in sync (KIP-73;
Kafka's ``ReplicationQuotaManager``, documentation §6 "Limiting Bandwidth Usage during Data
Migration").

Two quotas per broker, each a rate in bytes/s set by a dynamic broker config (KIP-226, dynamic
only: the broker's own value, else the cluster default ``""``, read from the metadata image;
unlimited by default), measured as client quotas are (``broker.quota.rate.SampledRate`` over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``):

* ``leader.replication.throttled.rate``: what this broker, as leader, sends to followers of
  throttled partitions. A partition is throttled on the leader side when its topic's
  ``leader.replication.throttled.replicas`` lists ``<partition>:<this broker>`` or is ``*``.
  While the rate is over the bound, a follower fetch of a throttled partition from a follower
  that is **not in the ISR** is answered with no records (its position still counts); the bytes
  of every throttled partition's answer are recorded.
* ``follower.replication.throttled.rate``: what this broker, as follower, fetches for throttled
  partitions (``follower.replication.throttled.replicas`` lists ``<partition>:<this broker>`` or
  ``*``). While the rate is over the bound, a throttled partition this broker is not in the ISR
  of is left out of the fetches until the rate is back at the bound (``delay_ms``; Kafka leaves
  it out for ``replica.fetch.backoff.ms``); the bytes appended for throttled partitions are
  recorded.

Replicas in the ISR are never held back, so a throttle slows a reassignment or a catching-up
replica, not the produce path's acks=all. ``pylog reassign-partitions --throttle`` sets both
lists and rates (as kafka-reassign-partitions does) and ``--verify`` removes them.

Everything here is pure: the clock and the topic configs are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.quota.rate import SampledRate, throttle_time_ms

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
# AlterReplicaLogDirs copies between this broker's own log dirs (Kafka's alterLogDirs quota)
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
UNLIMITED = 2**63 - 1  # Kafka's default for both rates (Long.MAX_VALUE)

ALL_PARTITIONS = None  # "*"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas list names for ``broker_id`` (Kafka's
    ``parseThrottledPartitions``): ``*`` is every partition (None); ``p:b,...`` the ``p`` whose
    ``b`` is this broker. The value was checked when it was stored; bad entries are skipped."""
    value = value.strip()
    if value == "*":
        return ALL_PARTITIONS
    found: set[int] = set()
    for entry in value.split(","):
        partition, sep, broker = entry.strip().partition(":")
        valid = sep and partition.strip().isdigit() and broker.strip().lstrip("-").isdigit()
        if valid and int(broker) == broker_id:
            found.add(int(partition))
    return frozenset(found)


def dynamic_rate(broker_configs: Mapping[str, Mapping[str, str]], broker_id: int, key: str) -> int:
    """A bound in bytes/s from the dynamic broker configs by level (the broker's id over the
    cluster default ``""``). The values were checked when they were stored; anything unreadable
    counts as unlimited."""
    levels = (broker_configs.get(str(broker_id), {}), broker_configs.get("", {}))
    value = next((level[key] for level in levels if key in level), None)
    try:
        return UNLIMITED if value is None else max(0, int(value.strip()))
    except ValueError:
        return UNLIMITED


def throttle_rates(broker_configs: Mapping[str, Mapping[str, str]], broker_id: int) -> tuple[int, int]:
    """The leader and follower bounds in bytes/s (``dynamic_rate``)."""
    return dynamic_rate(broker_configs, broker_id, LEADER_RATE), dynamic_rate(broker_configs, broker_id, FOLLOWER_RATE)


class ReplicationQuota:
    """One side's bound and measured rate (bytes/s)."""

    def __init__(self, num_samples: int, window_ms: int, clock_ms: Callable[[], int]) -> None:
        self._rate = SampledRate(num_samples, window_ms)
        self._clock_ms = clock_ms
        self.bound: int = UNLIMITED

    def exceeded(self) -> bool:
        """Kafka's ``isQuotaExceeded``: the measured rate is above the bound."""
        return self.bound < UNLIMITED and self._rate.rate(self._clock_ms()) > self.bound

    def record(self, nbytes: int) -> None:
        if nbytes > 0:
            self._rate.record(nbytes, self._clock_ms())

    def rate(self) -> float:
        """Bytes/s measured now (the ``byte-rate`` metric)."""
        return self._rate.rate(self._clock_ms())

    def delay_ms(self) -> int:
        """How long until the measured rate is back at the bound if nothing more is recorded
        (Kafka's ``QuotaUtils.throttleTime``); 0 when it is within the bound."""
        if self.bound >= UNLIMITED or self.bound <= 0:
            return 0 if self.bound >= UNLIMITED else self._rate.window_size_ms(self._clock_ms())
        now = self._clock_ms()
        return throttle_time_ms(self._rate.rate(now), self.bound, self._rate.window_size_ms(now))


class ReplicationThrottles:
    """Both quotas of one broker, and which partitions they apply to. The rates and the topics'
    throttled-replica lists are read from the metadata image at each use (``broker_configs``:
    the image's dynamic broker configs; ``topic_configs``: a topic's configs), the rates
    re-parsed when the image's broker configs change, the lists once per distinct value."""

    def __init__(
        self,
        broker_id: int,
        topic_configs: Callable[[str], Mapping[str, str] | None],
        broker_configs: Callable[[], Mapping[str, Mapping[str, str]]],
        *,
        num_samples: int,
        window_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self._topic_configs = topic_configs
        self._broker_configs = broker_configs
        self._rates_from: Mapping[str, Mapping[str, str]] | None = None
        self.leader = ReplicationQuota(num_samples, window_ms, clock_ms)
        self.follower = ReplicationQuota(num_samples, window_ms, clock_ms)
        self.log_dir_move = ReplicationQuota(num_samples, window_ms, clock_ms)  # every AlterReplicaLogDirs copy
        self._parsed: dict[str, frozenset[int] | None] = {}

    @classmethod
    def from_config(
        cls, broker_id: int, get: Callable[[str], Any], topic_configs: Callable[[str], Mapping[str, str] | None],
        broker_configs: Callable[[], Mapping[str, Mapping[str, str]]], clock_ms: Callable[[], int],
    ) -> ReplicationThrottles:  # fmt: skip
        """A broker's throttles; ``get`` reads ``replication.quota.window.*``."""
        return cls(
            broker_id, topic_configs, broker_configs, num_samples=int(get("replication.quota.window.num")),
            window_ms=int(get("replication.quota.window.size.seconds")) * 1000, clock_ms=clock_ms,
        )  # fmt: skip

    def _refresh_rates(self) -> None:
        current = self._broker_configs()
        if current is not self._rates_from:
            self._rates_from = current
            self.leader.bound, self.follower.bound = throttle_rates(current, self.broker_id)
            self.log_dir_move.bound = dynamic_rate(current, self.broker_id, LOG_DIR_RATE)

    def _listed(self, key: str, topic: str, partition: int) -> bool:
        configs = self._topic_configs(topic)
        value = configs.get(key, "") if configs else ""
        if not value:
            return False
        parsed = self._parsed.get(value, frozenset())
        if value not in self._parsed:
            parsed = self._parsed[value] = throttled_partitions(value, self.broker_id)
            if len(self._parsed) > 1024:  # values only accumulate as topics change; keep it small
                self._parsed = {value: parsed}
        return parsed is ALL_PARTITIONS or partition in parsed

    def log_dir_move_delay_ms(self) -> int:
        """How long an AlterReplicaLogDirs copy waits before its next chunk (0: go on), by
        ``replica.alter.log.dirs.io.max.bytes.per.second``; the copier records its bytes in
        ``log_dir_move``."""
        self._refresh_rates()
        return self.log_dir_move.delay_ms() if self.log_dir_move.exceeded() else 0

    def leader_throttled(self, topic: str, partition: int) -> bool:
        self._refresh_rates()
        return self.leader.bound < UNLIMITED and self._listed(LEADER_REPLICAS, topic, partition)

    def follower_throttled(self, topic: str, partition: int) -> bool:
        self._refresh_rates()
        return self.follower.bound < UNLIMITED and self._listed(FOLLOWER_REPLICAS, topic, partition)

    def leader_holds_back(self, topic: str, partition: int, follower_in_sync: bool) -> bool:
        """Kafka's ``shouldLeaderThrottle``: answer this follower fetch without records."""
        return not follower_in_sync and self.leader_throttled(topic, partition) and self.leader.exceeded()

    def follower_holds_back(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Kafka's ``shouldFollowerThrottle``: leave this partition out of the next fetch."""
        return not in_sync and self.follower_throttled(topic, partition) and self.follower.exceeded()
