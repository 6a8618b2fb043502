"""``gc.freeze.enable``: the start-up heap moved out of the collector's reach once the broker is ready.

A full (generation-2) collection traverses every container object the process tracks. Most of a
long-running broker's heap is made at start-up and lives until shutdown: modules, classes and
functions, the configuration, every partition's ``Log`` with its segments and indexes, the
producer states, the metadata image. ``freeze_start_up_heap`` first collects everything (so no
start-up garbage is kept), then ``gc.freeze()`` moves the survivors to CPython's permanent
generation: later collections of every generation skip them, and they no longer count towards
the "long-lived total" that spaces full collections out, so objects made while serving are
still collected as before. The collector is never disabled.

The price, bounded: a frozen object that later becomes part of a garbage cycle (a deleted
topic's log loaded at start-up) is freed only at shutdown (``thaw``) instead of by the next full
collection; objects freed by reference counting (most) go at once as before. At most the
start-up heap can be kept this way, and only once: nothing made after start-up is frozen.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

CONFIG_KEY = "gc.freeze.enable"


@dataclass(frozen=True)
class FreezeResult:
    collected: int  # unreachable objects found by the full collection before the freeze
    frozen: int  # objects in the permanent generation afterwards
    seconds: float  # the collection and the freeze, together


def freeze_start_up_heap() -> FreezeResult:
    """Collect all generations, then freeze the survivors (call once, when start-up is over)."""
    t0 = time.perf_counter()
    collected = gc.collect()
    gc.freeze()
    result = FreezeResult(collected, gc.get_freeze_count(), time.perf_counter() - t0)
    log.info(
        "gc.freeze.enable: %d start-up objects frozen out of garbage collection (%d collected first, %.1f ms)",
        result.frozen, result.collected, result.seconds * 1000,
    )  # fmt: skip
    return result


def thaw() -> None:
    """Return the frozen objects to the oldest generation (at shutdown: cycles among them can go)."""
    gc.unfreeze()
