"""The event loop's lag and busy fraction (pylog's analogues of Kafka's
``NetworkProcessorAvgIdlePercent`` and ``RequestHandlerAvgIdlePercent``).

* **Lag**: a task asks to wake every ``interval_s`` (100 ms) and observes how late it woke, into
  a histogram (seconds): what any request arriving then waited before the loop looked at it.
* **Busy**: the time the loop spent outside its selector's ``select`` (running callbacks, that is
  serving requests, replication and background work) over the last ``window_s`` (10 s, sampled
  every second), as a fraction 0..1. ``select`` is timed by wrapping the loop's selector
  (two ``perf_counter`` calls per loop iteration). Kafka's two idle percents are ``1 - busy``: pylog
  runs network processing and request handling on this one loop.

Works with asyncio's selector event loop (the broker's); on another loop the busy figure stays
0 (the lag is measured anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

from broker.metrics.instruments import LAG_S_BUCKETS, Histogram


class LoopMonitor:
    """Owns one task (``start``/``stop``); read ``lag``, ``busy_ratio()`` and ``idle_s`` on the loop."""

    def __init__(self, interval_s: float = 0.1, window_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self.lag = Histogram(LAG_S_BUCKETS)
        self.idle_s = 0.0  # time spent inside select since install
        self.installed_at = time.perf_counter()
        self._samples: deque[tuple[float, float]] = deque(maxlen=max(2, int(window_s) + 1))  # (when, idle_s)
        self._task: asyncio.Task[None] | None = None
        self._selector: Any = None
        self._original_select: Any = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        selector = getattr(loop, "_selector", None)
        if selector is not None and hasattr(selector, "select"):
            original = selector.select
            monitor = self
            perf = time.perf_counter

            def select(timeout: float | None = None) -> Any:
                t0 = perf()
                try:
                    return original(timeout)
                finally:
                    monitor.idle_s += perf() - t0

            selector.select = select
            self._selector, self._original_select = selector, original
        self.installed_at = time.perf_counter()
        self._samples.append((self.installed_at, self.idle_s))
        self._task = asyncio.create_task(self._run(), name="event-loop-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._selector is not None:
            with contextlib.suppress(AttributeError):
                del self._selector.select  # the class's own method again
            self._selector = None

    async def _run(self) -> None:
        interval = self.interval_s
        ticks_per_sample = max(1, round(1.0 / interval))
        tick = 0
        perf = time.perf_counter
        while True:
            t0 = perf()
            await asyncio.sleep(interval)
            now = perf()
            self.lag.observe(max(0.0, now - t0 - interval))
            tick += 1
            if tick % ticks_per_sample == 0:
                self._samples.append((now, self.idle_s))

    def busy_ratio(self) -> float:
        """The loop's busy fraction over the sampled window (0 before a second has passed)."""
        if self._selector is None or len(self._samples) < 2:
            return 0.0
        (t0, idle0), (t1, idle1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - (idle1 - idle0) / (t1 - t0)))
