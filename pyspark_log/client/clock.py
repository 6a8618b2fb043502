"""Time and randomness, injected (docs/architecture.md ("inject the clock and randomness; units last in
names")): cores take a ``Clock`` and a
``random.Random``; tests pass a ``ManualClock`` and a seeded ``Random`` and never sleep.

``monotonic_ms`` measures durations (timeouts, linger, backoff); ``wall_ms`` stamps records.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic_ms(self) -> float: ...

    def wall_ms(self) -> int: ...


class SystemClock:
    """The real clocks."""

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, monotonic_ms: float = 0.0, wall_ms: int = 1_700_000_000_000) -> None:
        self._mono_ms = monotonic_ms
        self._wall_ms = wall_ms

    def monotonic_ms(self) -> float:
        return self._mono_ms

    def wall_ms(self) -> int:
        return self._wall_ms

    def advance(self, ms: float) -> None:
        self._mono_ms += ms
        self._wall_ms += int(ms)


SYSTEM_CLOCK = SystemClock()
