"""Rates measured over several small windows, and the throttle time that corrects a burst.

Kafka documentation §4.9 "Quotas" (Enforcement): byte rates and thread usage are measured over
several small windows so that a violation is detected and corrected quickly.

``SampledRate`` follows the semantics of Kafka's ``SampledStat`` + ``Rate`` (metrics library):

- ``num_samples`` samples of ``window_ms`` each (``quota.window.num`` × ``quota.window.size.seconds``,
  Kafka's defaults 11 × 1 s). A value goes into the current sample; once the current sample is
  ``window_ms`` old, the next sample (the oldest slot, reset) becomes current.
- A sample older than ``num_samples × window_ms`` is obsolete: reset before any measurement.
- The rate divides the sum of the samples by the *window size*: the time since the oldest sample
  began, but never less than ``num_samples - 1`` full windows (so the first bytes after a quiet
  period do not look like an enormous rate).

``throttle_time_ms`` is Kafka's ``QuotaUtils.throttleTime``: ``(rate - bound) / bound × window``,
the delay after which the measured rate falls back to the bound if nothing more is recorded.
``bounded_throttle_time_ms`` caps it (Kafka bounds only the request-time quota, at one window).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0
    count: int = 0


class SampledRate:
    """A sum (``rate``) and a mean (``avg``) over the last ``num_samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_samples", "num_samples", "window_ms")

    def __init__(self, num_samples: int, window_ms: int) -> None:
        if num_samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.num_samples = num_samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (negative values undo an earlier record, as Kafka's unrecord)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.num_samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value
        sample.count += 1

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's ``Rate.windowSize``: elapsed time since the oldest sample, at least
        ``num_samples - 1`` full windows."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.num_samples - 1:
            elapsed += (self.num_samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Units per second over the measured window."""
        return self.total(now_ms) / (self.window_size_ms(now_ms) / 1000)

    def avg(self, now_ms: int) -> float:
        """Mean of the recorded values still in the windows (0.0 if none)."""
        self._purge(now_ms)
        count = sum(s.count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else 0.0

    def last_record_ms(self) -> int | None:
        return max((s.start_ms for s in self._samples), default=None)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
            self._current = 0
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_age = self.num_samples * self.window_ms
        for i, sample in enumerate(self._samples):
            if now_ms - sample.start_ms >= expire_age:
                self._samples[i] = _Sample(now_ms)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """The delay that brings ``rate`` (measured over ``window_ms``) back to ``bound``; 0 when the
    rate is within the bound (Kafka's ``QuotaUtils.throttleTime``, rounded)."""
    if bound <= 0:
        raise ValueError("a quota bound must be positive")
    if rate <= bound:
        return 0
    return round((rate - bound) / bound * window_ms)


def bounded_throttle_time_ms(rate: float, bound: float, window_ms: int, max_throttle_ms: int) -> int:
    """``throttle_time_ms`` capped at ``max_throttle_ms`` (Kafka's ``QuotaUtils.boundedThrottleTime``)."""
    return min(throttle_time_ms(rate, bound, window_ms), max_throttle_ms)
