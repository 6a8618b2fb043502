"""Controller mutation quota (KIP-599): partition creations and deletions per second.

KIP-599 ("Throttle Create Topic, Create Partition and Delete Topic Operations") limits how fast
a quota group may create or delete partitions with ``controller_mutation_rate`` (mutations/s).
CreateTopics counts each new topic's partitions, CreatePartitions the partitions added,
DeleteTopics the partitions of each deleted topic.

Enforced with KIP-599's token bucket, not the sampled rate of the byte-rate quotas (a burst
recorded in one sample would block the group for the whole ``S × W`` window):

- ``R = Q`` tokens per second accumulate up to ``B = Q × S × W`` (``Q`` the quota, ``S`` =
  ``quota.window.num``, ``W`` = ``quota.window.size.seconds``); a fresh group starts with a full
  bucket: ``K = min(K + (now − T) × R, B)``.
- "A partition mutation with N partitions is admitted iff K >= 0, and updates K = K − N": K may go
  negative, so a topic of any size is admitted once the bucket is not in debt.
- "The throttle time is defined with: −K / R" (seconds; 0 while K >= 0).

Strict and permissive quotas (``MutationQuota``): request versions that know the error
(CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) are *strict*: a topic met with K < 0 is
rejected with THROTTLING_QUOTA_EXCEEDED and the response carries the throttle time of that
rejection. Older versions cannot be told, so they are *permissive*: every mutation is accepted and
recorded, and the response's throttle time is the debt left after the request; the channel is muted
for it either way (KIP-219).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.quota.entity import CONTROLLER_MUTATION_RATE, QuotaGroup, QuotaMatch, QuotaTable, resolve
from broker.quota.manager import INACTIVE_GROUP_EXPIRY_MS, MAX_GROUPS, QuotaConfig

STRICT_SINCE = {19: 6, 37: 3, 20: 5}  # CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+
THROTTLED_MESSAGE = "The throttling quota has been exceeded."


@dataclass(slots=True)
class TokenBucket:
    """KIP-599's bucket: ``rate`` tokens/s, at most ``burst``; ``tokens`` may be negative (debt)."""

    rate: float
    burst: float
    tokens: float
    last_ms: int

    @classmethod
    def full(cls, quota: float, config: QuotaConfig, now_ms: int) -> TokenBucket:
        """A bucket for quota ``Q``: ``R = Q``, ``B = Q × S × W``, starting full."""
        burst = quota * config.num_samples * config.window_ms / 1000
        return cls(quota, burst, burst, now_ms)

    def refill(self, now_ms: int) -> None:
        elapsed = max(0, now_ms - self.last_ms)
        self.tokens = min(self.tokens + elapsed / 1000 * self.rate, self.burst)
        self.last_ms = max(self.last_ms, now_ms)

    def reconfigure(self, quota: float, config: QuotaConfig) -> None:
        """A changed quota applies at once: as Kafka's TokenBucket, which refills with the quota
        of the moment, the time since the last update is refilled at the new rate."""
        self.rate = quota
        self.burst = quota * config.num_samples * config.window_ms / 1000

    def admits(self, now_ms: int) -> bool:
        self.refill(now_ms)
        return self.tokens >= 0

    def record(self, permits: float, now_ms: int) -> None:
        self.refill(now_ms)
        self.tokens -= permits

    def throttle_time_ms(self, now_ms: int) -> int:
        """``−K / R`` in ms, 0 while the bucket is not in debt."""
        self.refill(now_ms)
        if self.tokens >= 0:
            return 0
        return round(-self.tokens / self.rate * 1000)


@dataclass(slots=True)
class _Bucket:
    bucket: TokenBucket
    last_ms: int


@dataclass
class ControllerMutationQuotas:
    """One token bucket per quota group of ``controller_mutation_rate``."""

    config: QuotaConfig = field(default_factory=QuotaConfig)
    _buckets: dict[QuotaGroup, _Bucket] = field(default_factory=dict)

    def quota_for(self, table: QuotaTable, user: str, client_id: str, *, strict: bool, now_ms: int) -> MutationQuota:
        """The quota of one request from (``user``, ``client_id``); ``strict``: the request version
        can carry THROTTLING_QUOTA_EXCEEDED (``STRICT_SINCE``)."""
        match = resolve(table, CONTROLLER_MUTATION_RATE, user, client_id)
        if match.bound is None:
            return MutationQuota(None, strict)
        return MutationQuota(self._bucket(match, now_ms), strict)

    def _bucket(self, match: QuotaMatch, now_ms: int) -> TokenBucket:
        assert match.bound is not None
        found = self._buckets.get(match.group)
        if found is None:
            self._expire(now_ms)
            found = self._buckets[match.group] = _Bucket(TokenBucket.full(match.bound, self.config, now_ms), now_ms)
        elif found.bucket.rate != match.bound:
            found.bucket.reconfigure(match.bound, self.config)
        found.last_ms = now_ms
        return found.bucket

    def _expire(self, now_ms: int) -> None:
        stale = [g for g, b in self._buckets.items() if now_ms - b.last_ms >= INACTIVE_GROUP_EXPIRY_MS]
        if not stale and len(self._buckets) >= MAX_GROUPS:
            stale = sorted(self._buckets, key=lambda g: self._buckets[g].last_ms)[: max(1, MAX_GROUPS // 10)]
        for group in stale:
            del self._buckets[group]


@dataclass(slots=True)
class MutationQuota:
    """The mutation quota of one request. ``bucket`` None: no quota (never throttled)."""

    bucket: TokenBucket | None
    strict: bool
    _throttle_ms: int = 0

    def admits(self, now_ms: int) -> bool:
        """Whether a mutation may go ahead now: False only for a strict quota whose bucket is in
        debt (the rejection's throttle time is kept for the response)."""
        if self.bucket is None or not self.strict or self.bucket.admits(now_ms):
            return True
        self._throttle_ms = max(self._throttle_ms, self.bucket.throttle_time_ms(now_ms))
        return False

    def record(self, permits: int, now_ms: int) -> None:
        """Count ``permits`` partition mutations that were made."""
        if self.bucket is not None and permits > 0:
            self.bucket.record(permits, now_ms)

    def throttle_time_ms(self, now_ms: int) -> int:
        """The response's throttle time: strict, that of the rejections (0 if none); permissive,
        the debt after the request."""
        if self.bucket is None:
            return 0
        if self.strict:
            return self._throttle_ms
        return self.bucket.throttle_time_ms(now_ms)
