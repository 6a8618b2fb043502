"""Connection limits (KIP-306, KIP-402, KIP-612): how many connections, from where, how fast.

Pure accounting; ``broker.network.listener`` asks before and after each accept and reports closes.

- ``max.connections``: connections across all listeners. At the limit the listener stops
  accepting until a connection closes (Kafka's acceptor waits for a slot); new clients wait in the
  kernel's backlog rather than being refused.
- ``max.connections.per.ip`` / ``max.connections.per.ip.overrides`` (``host:count,...``): one
  address's connections. A connection beyond its address's limit is closed at once, so a flood
  from one address cannot use up the broker's descriptors and lock every other client out.
- ``max.connection.creation.rate``: new connections per second, broker-wide. When the measured
  rate exceeds it, the listener delays its next accept by the throttle time (bounded at one quota
  window), as Kafka's acceptor does.
- IP quotas (``connection_creation_rate`` on an ``ip`` entity, KIP-612): a connection from an
  address over its rate is closed at once and not counted.

``descriptor_caps``: when ``max.connections`` / ``max.connections.per.ip`` are not configured
(Kafka: unlimited), pylog derives them from the open-file limit, so that connections run out
before descriptors do and no single address can take them all (issue 16: 1,500 half-open
connections from one address exhausted a broker with 1,024 descriptors).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.quota.manager import QuotaConfig
from broker.quota.rate import SampledRate, bounded_throttle_time_ms

INT_MAX = 2**31 - 1


class ConnectionConfigError(ValueError):
    """A connection-limit setting that cannot be used; the message names the key and the fix."""


def descriptor_caps(open_file_limit: int) -> tuple[int, int]:
    """``(max.connections, max.connections.per.ip)`` for a process allowed ``open_file_limit``
    descriptors: a quarter (at least 128) is kept for log segments, indexes and the rest, and one
    address may hold half of the connections. ``open_file_limit`` < 0 (unknown): no caps."""
    if open_file_limit < 0:
        return INT_MAX, INT_MAX
    reserve = max(128, open_file_limit // 4)
    total = max(1, min(INT_MAX, open_file_limit - reserve))
    return total, max(1, total // 2)


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma separated. Hosts must be IP
    addresses (pylog does not resolve names on the accept path)."""
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, _, count = item.rpartition(":")
        host = host.strip("[]")
        try:
            overrides[str(ipaddress.ip_address(host))] = int(count)
        except ValueError as exc:
            raise ConnectionConfigError(
                f"max.connections.per.ip.overrides entry {item!r} is not ip:count ({exc}); "
                "e.g. max.connections.per.ip.overrides=127.0.0.1:200,10.0.0.5:50"
            ) from None
        if overrides[str(ipaddress.ip_address(host))] < 0:
            raise ConnectionConfigError(f"max.connections.per.ip.overrides entry {item!r}: count must be >= 0")
    return overrides


@dataclass(frozen=True, slots=True)
class ConnectionLimitsConfig:
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = INT_MAX

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)


@dataclass(frozen=True, slots=True)
class Admission:
    accepted: bool
    reason: str = ""


class ConnectionQuotas:
    """Counts of open connections (total and per address) and the creation rates."""

    def __init__(
        self,
        config: ConnectionLimitsConfig,
        quota_config: QuotaConfig | None = None,
        ip_rate: Callable[[str], float | None] = lambda _ip: None,
    ) -> None:
        """``ip_rate(ip)``: the ``connection_creation_rate`` quota of that address (the ``ip``
        entity of that name, else the default ``ip`` entity), None for none."""
        self.config = config
        self._quota = quota_config or QuotaConfig()
        self._ip_rate = ip_rate
        self._per_ip: dict[str, int] = {}
        self._ip_rates: dict[str, SampledRate] = {}
        self._creation = SampledRate(self._quota.num_samples, self._quota.window_ms)
        self.total = 0
        self.rejected = 0

    def count(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def slot_available(self) -> bool:
        """Whether another connection may be accepted at all (``max.connections``)."""
        return self.total < self.config.max_connections

    def accept_delay_ms(self, now_ms: int) -> int:
        """Record one new connection broker-wide; the delay before the next accept when the
        creation rate exceeds ``max.connection.creation.rate`` (0 otherwise)."""
        bound = self.config.max_connection_creation_rate
        if bound >= INT_MAX:
            return 0
        self._creation.record(1, now_ms)
        rate = self._creation.rate(now_ms)
        window = self._creation.window_size_ms(now_ms)
        return bounded_throttle_time_ms(rate, bound, window, self._quota.window_ms)

    def admit(self, ip: str, now_ms: int) -> Admission:
        """Count a just-accepted connection from ``ip``, or refuse it (the caller closes it)."""
        ip = _canonical(ip)
        limit = self.config.limit_for(ip)
        if self._per_ip.get(ip, 0) >= limit:
            self.rejected += 1
            return Admission(False, f"{ip} has {limit} connections (max.connections.per.ip)")
        bound = self._ip_rate(ip)
        if bound is not None:
            rate = self._ip_rates.get(ip)
            if rate is None:
                rate = self._ip_rates[ip] = SampledRate(self._quota.num_samples, self._quota.window_ms)
            rate.record(1, now_ms)
            if rate.rate(now_ms) > bound:
                rate.record(-1, now_ms)
                self.rejected += 1
                return Admission(False, f"{ip} exceeds its connection_creation_rate of {bound}/s")
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self.total += 1
        return Admission(True)

    def release(self, ip: str) -> None:
        """A counted connection from ``ip`` closed."""
        ip = _canonical(ip)
        left = self._per_ip.get(ip, 0) - 1
        assert left >= 0, f"released a connection of {ip} that was never admitted"
        if left:
            self._per_ip[ip] = left
        else:
            del self._per_ip[ip]
        self.total -= 1


def _canonical(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip
