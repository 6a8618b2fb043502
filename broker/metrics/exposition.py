"""The Prometheus text format (0.0.4) of a prometheus-client registry, rendered on the event loop in
bounded steps.

Why on the loop, in steps, and not prometheus-client's ``start_http_server``: that server runs
the collectors in its own thread, and the collectors read state the event loop owns and changes
(dicts of partitions, groups, connections): a thread reading them races with the loop ("dictionary
changed size during iteration", torn values). Copying a snapshot on the loop first and rendering
it in a thread avoids the race, but the copy itself is the expensive part (thousands of
partitions), and a rendering thread holds the GIL for up to the switch interval (5 ms) every
time the loop wants it back. So the collectors run on the loop, lazily: each is a generator that
reads the live state a family (or a slice of at most ``CHUNK_SAMPLES`` samples of a per-partition
family) at a time, never keeping a dict iterator open across a yield, and the renderer gives the
loop back (``await asyncio.sleep(0)``) whenever a step has used ``STEP_BUDGET_S``. A collector
with long work before a family (a pass over every partition) yields ``None`` every
``CHECKPOINT_ITEMS`` items: a point where the renderer may give the loop back. Collectors that
read no loop-owned state and may block (prometheus-client's ``ProcessCollector`` lists
``/proc/self/fd``: thousands of log files) run in the default executor before the page is
rendered (``broker.metrics.http``). A scrape so
stalls the loop for about one step at a time, whatever the number of partitions, and costs only
the rendering. prometheus-client formats each family (``generate_latest``); consecutive slices of one
family are joined under one HELP/TYPE header.

The garbage collector is off during each step (and back to its previous state between steps): a
step's samples (label dicts, sample tuples) are all freed by reference counting when its slice is
formatted, but a collection in the middle of a step would promote the live ones to older
generations, and a scrape of thousands of samples would so bring on full collections of the
broker's whole heap (a 2,000-partition broker: pauses above 100 ms, measured with
``bench/loop_stalls.py``). Steps are bounded, so the collector is never held off for long.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CHUNK_SAMPLES = 100  # samples per slice of a large family: about 0.5 ms to build and format
STEP_BUDGET_S = 0.0005  # the loop is given back once a step has taken this long
CHECKPOINT_ITEMS = 250  # a collector's pass over partitions offers a step boundary this often

T = TypeVar("T")


class _One:
    """A registry-shaped wrapper so ``generate_latest`` formats exactly one family."""

    __slots__ = ("family",)

    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterable[Metric]:
        return (self.family,)


def _format(family: Metric, previous: str | None) -> bytes:
    text = generate_latest(_One(family))
    if family.name == previous:  # a further slice of the family just written: drop HELP and TYPE
        text = text.split(b"\n", 2)[2]
    return text


def _families(collectors: Iterable[Collector]) -> Iterator[Metric | None]:
    for collector in collectors:
        yield from collector.collect()


class Fixed:
    """A collector of families collected before (off the loop: ``broker.metrics.http``)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def render(collectors: Iterable[Collector]) -> bytes:
    """The whole page at once (tests, tools)."""
    out: list[bytes] = []
    previous: str | None = None
    for family in _families(collectors):
        if family is not None:
            out.append(_format(family, previous))
            previous = family.name
    return b"".join(out)


class RenderStats:
    """What the last ``render_async`` cost: loop time in all, the longest step, the steps."""

    __slots__ = ("longest_step_s", "loop_s", "steps")

    def __init__(self) -> None:
        self.loop_s = 0.0
        self.longest_step_s = 0.0
        self.steps = 0


async def render_async(
    collectors: Iterable[Collector], budget_s: float = STEP_BUDGET_S, stats: RenderStats | None = None
) -> bytes:
    """The same page, giving the loop back after every ``budget_s`` of work (``stats``: filled
    with what it cost the loop)."""
    out: list[bytes] = []
    previous: str | None = None
    perf = time.perf_counter
    collecting = gc.isenabled()
    step_started = perf()
    loop_s = longest = 0.0
    steps = 1
    gc.disable()
    try:
        for family in _families(collectors):
            if family is not None:  # None: a collector's checkpoint inside long work
                out.append(_format(family, previous))
                previous = family.name
            spent = perf() - step_started
            if spent >= budget_s:
                loop_s += spent
                longest = max(longest, spent)
                steps += 1
                if collecting:
                    gc.enable()
                await asyncio.sleep(0)
                gc.disable()
                step_started = perf()
    finally:
        if collecting:
            gc.enable()
    spent = perf() - step_started
    if stats is not None:
        stats.loop_s = loop_s + spent
        stats.longest_step_s = max(longest, spent)
        stats.steps = steps
    return b"".join(out)


def sliced(items: list[T], size: int = CHUNK_SAMPLES) -> Iterator[list[T]]:
    """``items`` in slices of ``size`` (one empty slice for no items, so the family is declared)."""
    if not items:
        yield []
        return
    for start in range(0, len(items), size):
        yield items[start : start + size]
