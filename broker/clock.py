"""The broker's clocks, defined once. Everything that reads time takes one of these as an
argument (``clock_ms=``), so tests and the simulations drive time instead of sleeping for it
(docs/architecture.md, "The house style": I/O at the edges).

* ``system_clock_ms``: wall-clock milliseconds since the epoch (record timestamps, retention,
  segment rolling: what Kafka takes from ``Time.milliseconds()``).
* ``monotonic_ms``: milliseconds of a clock that never goes back, for intervals and deadlines
  (ISR lag, SASL re-authentication, controller timers: Kafka's ``Time.hiResClockMs()``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A clock in milliseconds; injected everywhere so tests drive time."""


def system_clock_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds (only differences mean anything)."""
    return time.monotonic_ns() // 1_000_000
