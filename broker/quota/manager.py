"""Client quota managers: one per quota type, recording usage per quota group and deciding the
throttle time (pure: the caller passes the clock and the quota table of the current metadata).

Kafka documentation §4.9 "Quotas" (Enforcement): the broker computes the delay that brings
the violating client back under its quota and returns a response carrying it at once. The caller
(``broker.api.quota_enforcement``) then mutes the channel for that delay.

=============  =======================  ==============================  ==========================
quota type     key                      recorded value                  throttle bound
=============  =======================  ==============================  ==========================
``Produce``    ``producer_byte_rate``   request size, bytes             unbounded (Kafka)
``Fetch``      ``consumer_byte_rate``   response size, bytes            unbounded (Kafka)
``Request``    ``request_percentage``   event-loop time, % of 1 second  one window (Kafka bounds it)
=============  =======================  ==============================  ==========================

Usage is recorded even without a quota (for the ``byte-rate`` / ``request-time`` metrics); a
group idle for ``inactive_group_expiry_ms`` is forgotten, as Kafka expires quota sensors after an
hour, so a stream of one-off client ids cannot grow the broker's memory without bound.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaGroup,
    QuotaMatch,
    QuotaTable,
    resolve,
)
from broker.quota.rate import SampledRate, bounded_throttle_time_ms, throttle_time_ms

INACTIVE_GROUP_EXPIRY_MS = 3_600_000
MAX_GROUPS = 100_000  # beyond this, the least recently active groups are forgotten first


class QuotaType(enum.Enum):
    PRODUCE = "Produce"
    FETCH = "Fetch"
    REQUEST = "Request"

    @property
    def key(self) -> str:
        return {
            QuotaType.PRODUCE: PRODUCER_BYTE_RATE,
            QuotaType.FETCH: CONSUMER_BYTE_RATE,
            QuotaType.REQUEST: REQUEST_PERCENTAGE,
        }[self]

    @property
    def usage_metric(self) -> str:
        """Kafka's per-group metric of the recorded usage."""
        return "request-time" if self is QuotaType.REQUEST else "byte-rate"


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka's defaults 11 × 1 s)."""

    num_samples: int = 11
    window_ms: int = 1000

    @property
    def max_request_throttle_ms(self) -> int:
        return self.window_ms  # Kafka's ClientRequestQuotaManager: one quota window


@dataclass(slots=True)
class _GroupStats:
    usage: SampledRate
    throttle: SampledRate
    last_ms: int
    bound: float | None = None


@dataclass(frozen=True, slots=True)
class GroupMetrics:
    """One group's metrics: ``byte-rate`` or ``request-time`` (per second) and ``throttle-time``
    (mean of the throttle times given to its requests, ms)."""

    quota_type: QuotaType
    group: QuotaGroup
    usage_rate: float
    throttle_time_avg_ms: float
    bound: float | None


@dataclass
class ClientQuotaManager:
    """Usage and throttle decisions for one quota type across all groups."""

    quota_type: QuotaType
    config: QuotaConfig = field(default_factory=QuotaConfig)
    _groups: dict[QuotaGroup, _GroupStats] = field(default_factory=dict)
    # resolve() per (user, client id), valid while the quota table is the same object (a metadata
    # image's table is replaced, never changed in place)
    _matches: dict[tuple[str, str], QuotaMatch] = field(default_factory=dict)
    _matches_of: object = None

    def match(self, table: QuotaTable, user: str, client_id: str) -> QuotaMatch:
        if table is not self._matches_of or len(self._matches) >= MAX_GROUPS:
            self._matches = {}
            self._matches_of = table
        found = self._matches.get((user, client_id))
        if found is None:
            found = self._matches[(user, client_id)] = resolve(table, self.quota_type.key, user, client_id)
        return found

    def record(self, match: QuotaMatch, value: float, now_ms: int) -> int:
        """Record ``value`` for the matched group; the throttle time if its rate now exceeds its
        quota (0 otherwise or without a quota). The throttle time itself goes into the group's
        ``throttle-time`` metric (0s included, as Kafka records every request's)."""
        stats = self._stats(match, now_ms)
        stats.usage.record(value, now_ms)
        delay = self._throttle(stats, now_ms)
        stats.throttle.record(delay, now_ms)
        return delay

    def unrecord(self, match: QuotaMatch, value: float, now_ms: int) -> None:
        """Take back ``value`` (a throttled Fetch returns no data, so its bytes do not count)."""
        self._stats(match, now_ms).usage.record(-value, now_ms)

    def throttle_time_ms(self, match: QuotaMatch, now_ms: int) -> int:
        """The delay owed now without recording anything."""
        return self._throttle(self._stats(match, now_ms), now_ms)

    def max_value_in_window(self, match: QuotaMatch) -> float | None:
        """The most one response may carry under this quota (Kafka's ``getMaxValueInQuotaWindow``:
        the quota times ``num_samples - 1`` windows, the least window a rate is divided by); None
        without a quota. Anything larger is throttled even after a quiet period, and as a throttled
        Fetch returns no data, a consumer asking for more would stall."""
        if match.bound is None:
            return None
        return match.bound * (self.config.num_samples - 1) * self.config.window_ms / 1000

    def metrics(self, now_ms: int) -> list[GroupMetrics]:
        self._expire(now_ms)
        return [
            GroupMetrics(self.quota_type, group, s.usage.rate(now_ms), s.throttle.avg(now_ms), s.bound)
            for group, s in sorted(self._groups.items(), key=lambda kv: (kv[0].user, kv[0].client_id))
        ]

    def _throttle(self, stats: _GroupStats, now_ms: int) -> int:
        bound = stats.bound
        if bound is None:
            return 0
        rate = stats.usage.rate(now_ms)
        window = stats.usage.window_size_ms(now_ms)
        if self.quota_type is QuotaType.REQUEST:
            return bounded_throttle_time_ms(rate, bound, window, self.config.max_request_throttle_ms)
        return throttle_time_ms(rate, bound, window)

    def _stats(self, match: QuotaMatch, now_ms: int) -> _GroupStats:
        stats = self._groups.get(match.group)
        if stats is None:
            if len(self._groups) >= MAX_GROUPS:
                self._expire(now_ms, force=True)
            cfg = self.config
            usage = SampledRate(cfg.num_samples, cfg.window_ms)
            stats = _GroupStats(usage, SampledRate(cfg.num_samples, cfg.window_ms), now_ms)
            self._groups[match.group] = stats
        stats.last_ms = now_ms
        stats.bound = match.bound  # a changed quota applies at once (no restart)
        return stats

    def _expire(self, now_ms: int, *, force: bool = False) -> None:
        stale = [g for g, s in self._groups.items() if now_ms - s.last_ms >= INACTIVE_GROUP_EXPIRY_MS]
        if force and not stale:
            oldest = sorted(self._groups.items(), key=lambda kv: kv[1].last_ms)
            stale = [g for g, _ in oldest[: max(1, len(oldest) // 10)]]
        for group in stale:
            del self._groups[group]


@dataclass
class ClientQuotas:
    """The three managers a broker keeps, and the quota table source (the metadata image)."""

    table: Callable[[], QuotaTable]
    config: QuotaConfig = field(default_factory=QuotaConfig)
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientQuotaManager = field(init=False)

    def __post_init__(self) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, self.config)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, self.config)
        self.request = ClientQuotaManager(QuotaType.REQUEST, self.config)

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request)

    def metrics(self, now_ms: int) -> list[GroupMetrics]:
        return [m for manager in self.managers() for m in manager.metrics(now_ms)]
