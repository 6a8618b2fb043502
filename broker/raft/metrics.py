"""KIP-595 "Metrics" (group ``raft-manager``), computed from the core's state as a plain dict.

Gauges are read from the core when asked. Windowed values (``election-latency-*``,
``commit-latency-*``, ``fetch-records-rate``, ``append-records-rate``) keep the samples of the last
``window_ms`` of injected time. ``poll-idle-ratio-avg`` and ``number-unknown-voter-connections``
depend on the driver's I/O loop and connection cache, so the driver reports them, not the core.
"""

from __future__ import annotations

from collections import deque


class WindowedStat:
    """Samples ``(time_ms, value)`` of the last ``window_ms``: avg, max, total and rate per second."""

    __slots__ = ("_samples", "window_ms")

    def __init__(self, window_ms: int = 30_000, max_samples: int = 4096) -> None:
        self.window_ms = window_ms
        self._samples: deque[tuple[int, float]] = deque(maxlen=max_samples)

    def record(self, value: float, now_ms: int) -> None:
        self._samples.append((now_ms, value))

    def _live(self, now_ms: int) -> list[float]:
        while self._samples and self._samples[0][0] <= now_ms - self.window_ms:
            self._samples.popleft()
        return [value for _, value in self._samples]

    def avg(self, now_ms: int) -> float:
        values = self._live(now_ms)
        return sum(values) / len(values) if values else 0.0

    def max(self, now_ms: int) -> float:
        values = self._live(now_ms)
        return max(values) if values else 0.0

    def rate_per_s(self, now_ms: int) -> float:
        return sum(self._live(now_ms)) * 1000.0 / self.window_ms


class RaftMetrics:
    """The windowed part of the KIP-595 metrics; the core adds its gauges in ``RaftCore.metrics``."""

    def __init__(self, window_ms: int = 30_000) -> None:
        self.election_latency_ms = WindowedStat(window_ms)
        self.commit_latency_ms = WindowedStat(window_ms)
        self.fetch_records = WindowedStat(window_ms)
        self.append_records = WindowedStat(window_ms)
        self._election_started_ms: int | None = None
        self._pending_commits: deque[tuple[int, int]] = deque()  # (end offset, append time)

    def on_candidate(self, now_ms: int) -> None:
        """Election latency starts when a voter becomes a candidate (first of a series)."""
        if self._election_started_ms is None:
            self._election_started_ms = now_ms

    def on_leader_known(self, now_ms: int) -> None:
        """...and ends when it learns of, or becomes, the new leader."""
        if self._election_started_ms is not None:
            self.election_latency_ms.record(now_ms - self._election_started_ms, now_ms)
            self._election_started_ms = None

    def on_leader_append(self, end_offset: int, count: int, now_ms: int) -> None:
        self.append_records.record(count, now_ms)
        self._pending_commits.append((end_offset, now_ms))

    def on_high_watermark(self, high_watermark: int, now_ms: int) -> None:
        """Commit latency: from a leader append until the high watermark passes it."""
        while self._pending_commits and self._pending_commits[0][0] <= high_watermark:
            _, appended_ms = self._pending_commits.popleft()
            self.commit_latency_ms.record(now_ms - appended_ms, now_ms)

    def on_not_leader(self) -> None:
        self._pending_commits.clear()

    def on_fetched_records(self, count: int, now_ms: int) -> None:
        self.fetch_records.record(count, now_ms)

    def windowed(self, now_ms: int) -> dict[str, float]:
        return {
            "election-latency-avg": self.election_latency_ms.avg(now_ms),
            "election-latency-max": self.election_latency_ms.max(now_ms),
            "commit-latency-avg": self.commit_latency_ms.avg(now_ms),
            "commit-latency-max": self.commit_latency_ms.max(now_ms),
            "fetch-records-rate": self.fetch_records.rate_per_s(now_ms),
            "append-records-rate": self.append_records.rate_per_s(now_ms),
        }
