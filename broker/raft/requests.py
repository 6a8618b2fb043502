"""Outbound request bookkeeping: one request in flight per destination, timeouts, retry backoff.

Pure: it is told the time and never sleeps. A request is *in flight* from ``on_send`` until its
response is matched (``match_response``) or ``quorum.request.timeout.ms`` passes (``expire``).
After a failure (timeout or error response) the destination backs off
``min(quorum.retry.backoff.max.ms, quorum.retry.backoff.ms * 2^(failures-1))`` (KIP-580's
exponential backoff, without jitter). A response is accepted only if it carries the correlation id
of the request in flight to that destination: duplicates and stale responses are dropped here.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.raft.config import RaftConfig

_CORRELATION_MASK = 0x7FFF_FFFF


@dataclass(slots=True)
class _Connection:
    correlation_id: int = -1
    sent_ms: int = -1
    failures: int = 0
    backoff_until_ms: int = 0

    @property
    def in_flight(self) -> bool:
        return self.correlation_id >= 0


def retry_backoff_ms(config: RaftConfig, failures: int) -> int:
    """``min(retry.backoff.max.ms, retry.backoff.ms * 2^(failures-1))`` for ``failures >= 1``."""
    if failures <= 0:
        return 0
    return min(config.retry_backoff_max_ms, config.retry_backoff_ms << min(failures - 1, 30))


class RequestManager:
    """Per-destination in-flight request, failure count and backoff deadline."""

    def __init__(self, config: RaftConfig, first_correlation_id: int) -> None:
        self._config = config
        self._next_correlation_id = first_correlation_id & _CORRELATION_MASK
        self._connections: dict[int, _Connection] = {}

    def _conn(self, destination: int) -> _Connection:
        conn = self._connections.get(destination)
        if conn is None:
            conn = self._connections[destination] = _Connection()
        return conn

    def is_ready(self, destination: int, now_ms: int) -> bool:
        """No request in flight to ``destination`` and not backing off."""
        conn = self._connections.get(destination)
        return conn is None or (not conn.in_flight and now_ms >= conn.backoff_until_ms)

    def has_in_flight(self) -> bool:
        return any(conn.in_flight for conn in self._connections.values())

    def is_backing_off(self, destination: int, now_ms: int) -> bool:
        conn = self._connections.get(destination)
        return conn is not None and now_ms < conn.backoff_until_ms

    def on_send(self, destination: int, now_ms: int) -> int:
        """Record a request to ``destination``; returns its correlation id."""
        conn = self._conn(destination)
        if conn.in_flight:
            raise AssertionError(f"request to {destination} while {conn.correlation_id} is in flight")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _CORRELATION_MASK
        conn.correlation_id, conn.sent_ms = correlation_id, now_ms
        return correlation_id

    def match_response(self, source: int, correlation_id: int) -> bool:
        """True (and the request is no longer in flight) if this answers our request to ``source``."""
        conn = self._connections.get(source)
        if conn is None or not conn.in_flight or conn.correlation_id != correlation_id:
            return False
        conn.correlation_id = -1
        return True

    def on_success(self, destination: int) -> None:
        conn = self._conn(destination)
        conn.failures, conn.backoff_until_ms = 0, 0

    def on_failure(self, destination: int, now_ms: int) -> None:
        """An error response, a timeout or a send failure: back off exponentially."""
        conn = self._conn(destination)
        conn.correlation_id = -1
        conn.failures += 1
        conn.backoff_until_ms = now_ms + retry_backoff_ms(self._config, conn.failures)

    def expire(self, now_ms: int) -> list[int]:
        """Fail every request in flight for ``quorum.request.timeout.ms``; returns their destinations.

        Also clears backoffs that have ended (called at the start of every poll)."""
        expired = [
            dest
            for dest, conn in self._connections.items()
            if conn.in_flight and now_ms >= conn.sent_ms + self._config.request_timeout_ms
        ]
        for conn in self._connections.values():
            if not conn.in_flight and 0 < conn.backoff_until_ms <= now_ms:
                conn.backoff_until_ms = 0  # ended: this poll retries the destination if it wants to
        for dest in expired:
            self.on_failure(dest, now_ms)
        return expired

    def reset_all(self) -> None:
        """Forget every request in flight and every backoff (on a role change)."""
        self._connections.clear()

    def next_deadline_ms(self, now_ms: int) -> int | None:
        """The next request timeout or end of a backoff.

        A backoff that has ended but not yet been seen by ``expire`` (the poll of a ``tick``) is
        still reported, so a driver that wakes late still ticks once to retry the destination.
        """
        deadlines = []
        for conn in self._connections.values():
            if conn.in_flight:
                deadlines.append(conn.sent_ms + self._config.request_timeout_ms)
            elif conn.backoff_until_ms > 0:
                deadlines.append(conn.backoff_until_ms)
        return min(deadlines) if deadlines else None
