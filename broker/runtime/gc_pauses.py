"""Times every CPython garbage collection of the broker process, per generation.

Project rule: "Nothing that can take more than a millisecond runs on the broker's event loop
between requests: measure the loop's stalls." A collection runs with the GIL held, so whatever
thread triggers it (the event loop, a flush thread, the cleaner) the loop is stalled for as long
as it lasts: each pause recorded here is a pause of the event loop.

``GcPauses.install()`` appends ``on_gc`` to ``gc.callbacks``; CPython calls it with
``"start"`` before and ``"stop"`` after each collection (``info["generation"]``; on stop also
``collected`` and ``uncollectable``). Collections do not nest, so one start time suffices.
Per generation it keeps, since ``install``: the count, the summed and the largest pause, objects
collected and uncollectable; and the last ``window`` pauses, from which ``snapshot`` gives
quantiles (nearest rank). The recent pauses live in a preallocated ring of ints, written in place,
so a reader on another thread never sees a container change size under it; the callback
allocates no tracked object (it cannot trigger a collection itself).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

GENERATIONS = (0, 1, 2)
WINDOW_DEFAULT = 1024
QUANTILES = (0.5, 0.99)


@dataclass(frozen=True)
class GenerationPauses:
    """The figures of one generation (seconds) at the time of ``snapshot``."""

    count: int
    total_s: float
    max_s: float
    collected: int
    uncollectable: int
    quantiles_s: Mapping[float, float]  # over the last ``window`` pauses; 0.0 when none yet


def quantile_ns(sorted_ns: list[int], q: float) -> int:
    """Nearest-rank ``q`` quantile of ascending values (0 for none)."""
    if not sorted_ns:
        return 0
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return sorted_ns[min(rank, len(sorted_ns)) - 1]


class _Generation:
    __slots__ = ("collected", "count", "max_ns", "ring", "total_ns", "uncollectable")

    def __init__(self, window: int) -> None:
        self.count = 0
        self.total_ns = 0
        self.max_ns = 0
        self.collected = 0
        self.uncollectable = 0
        self.ring = [0] * window


class GcPauses:
    """Records each collection's pause; ``clock_ns`` is injectable for tests."""

    def __init__(self, window: int = WINDOW_DEFAULT, clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        if window < 1:
            raise ValueError(f"window={window} must be at least 1")
        self.window = window
        self._clock_ns = clock_ns
        self._gens = [_Generation(window) for _ in GENERATIONS]
        self._started_ns = -1
        self.installed = False

    def install(self) -> GcPauses:
        """Start recording (idempotent)."""
        if not self.installed:
            gc.callbacks.append(self.on_gc)
            self.installed = True
        return self

    def uninstall(self) -> None:
        """Stop recording (idempotent); the figures stay readable."""
        if self.installed:
            gc.callbacks.remove(self.on_gc)
            self.installed = False

    def on_gc(self, phase: str, info: Mapping[str, Any]) -> None:
        """The ``gc.callbacks`` hook. A "stop" without its "start" (installed mid-collection) is ignored."""
        if phase == "start":
            self._started_ns = self._clock_ns()
            return
        if self._started_ns < 0:
            return
        pause_ns = self._clock_ns() - self._started_ns
        self._started_ns = -1
        generation = info.get("generation", 2)
        gen = self._gens[generation if 0 <= generation <= 2 else 2]
        gen.ring[gen.count % self.window] = pause_ns
        gen.count += 1
        gen.total_ns += pause_ns
        gen.max_ns = max(gen.max_ns, pause_ns)
        gen.collected += info.get("collected", 0)
        gen.uncollectable += info.get("uncollectable", 0)

    def snapshot(self) -> dict[int, GenerationPauses]:
        """The figures of every generation now."""
        out = {}
        for number, gen in zip(GENERATIONS, self._gens, strict=True):
            count = gen.count
            recent = sorted(gen.ring[:] if count >= self.window else gen.ring[:count])
            out[number] = GenerationPauses(
                count=count,
                total_s=gen.total_ns / 1e9,
                max_s=gen.max_ns / 1e9,
                collected=gen.collected,
                uncollectable=gen.uncollectable,
                quantiles_s={q: quantile_ns(recent, q) / 1e9 for q in QUANTILES},
            )
        return out
