"""``broker.runtime``: every collection's pause recorded per generation, its Prometheus samples,
and the start-up heap frozen without switching the collector off.

Project rule: "Nothing that can take more than a millisecond runs on the broker's event loop
between requests: measure the loop's stalls." A collection holds the GIL, so its pause is one.
"""

from __future__ import annotations

import gc
import re
import weakref
from collections.abc import Iterator

import pytest

from broker.config import BrokerConfig
from broker.metrics.exposition import render
from broker.runtime.gc_freeze import CONFIG_KEY, freeze_start_up_heap, thaw
from broker.runtime.gc_pauses import GcPauses, quantile_ns
from broker.runtime.metrics import GcPauseCollector


class FakeClock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def collection(pauses: GcPauses, clock: FakeClock, generation: int, pause_ns: int, collected: int = 0) -> None:
    pauses.on_gc("start", {"generation": generation, "collected": 0, "uncollectable": 0})
    clock.ns += pause_ns
    pauses.on_gc("stop", {"generation": generation, "collected": collected, "uncollectable": 1})


def test_each_generation_counts_sums_and_keeps_its_largest_pause() -> None:
    clock = FakeClock()
    pauses = GcPauses(clock_ns=clock)
    collection(pauses, clock, 0, 150_000, collected=3)
    collection(pauses, clock, 0, 50_000, collected=4)
    collection(pauses, clock, 2, 40_000_000)
    snap = pauses.snapshot()
    assert (snap[0].count, snap[0].collected, snap[0].uncollectable) == (2, 7, 2)
    assert snap[0].total_s == pytest.approx(200e-6)
    assert snap[0].max_s == pytest.approx(150e-6)
    assert snap[1].count == 0
    assert snap[1].max_s == 0
    assert snap[1].quantiles_s[0.99] == 0
    assert snap[2].count == 1
    assert snap[2].max_s == pytest.approx(0.04)


def test_quantiles_are_over_the_last_window_of_pauses() -> None:
    clock = FakeClock()
    pauses = GcPauses(window=4, clock_ns=clock)
    for pause in (9_000_000, 1_000, 2_000, 3_000, 4_000):  # the 9 ms pause falls out of the window
        collection(pauses, clock, 1, pause)
    snap = pauses.snapshot()[1]
    assert snap.quantiles_s[0.99] == pytest.approx(4e-6)
    assert snap.quantiles_s[0.5] == pytest.approx(2e-6)
    assert snap.max_s == pytest.approx(9e-3)  # the largest since ready stays
    assert snap.count == 5


def test_a_stop_without_its_start_is_ignored() -> None:
    clock = FakeClock()
    pauses = GcPauses(clock_ns=clock)
    pauses.on_gc("stop", {"generation": 0, "collected": 5, "uncollectable": 0})
    assert pauses.snapshot()[0].count == 0


def test_nearest_rank_quantile() -> None:
    assert quantile_ns([], 0.99) == 0
    assert quantile_ns([5], 0.5) == 5
    values = list(range(1, 101))
    assert quantile_ns(values, 0.99) == 99
    assert quantile_ns(values, 0.5) == 50


def test_window_must_hold_a_pause() -> None:
    with pytest.raises(ValueError, match="window=0"):
        GcPauses(window=0)


def test_install_records_real_collections_and_uninstall_stops() -> None:
    pauses = GcPauses().install()
    try:
        assert pauses.on_gc in gc.callbacks
        gc.collect()
        assert pauses.snapshot()[2].count >= 1
        assert pauses.snapshot()[2].max_s > 0
    finally:
        pauses.uninstall()
    assert pauses.on_gc not in gc.callbacks
    count = pauses.snapshot()[2].count
    gc.collect()
    assert pauses.snapshot()[2].count == count


def test_metrics_name_every_generation() -> None:
    """pylog's pause figures (prometheus-client's GCCollector serves the collection counters)."""
    clock = FakeClock()
    pauses = GcPauses(clock_ns=clock)
    collection(pauses, clock, 2, 2_000_000, collected=10)
    text = render([GcPauseCollector(pauses, frozen_objects=1234)]).decode()
    for g in "012":
        assert f'python_gc_pause_seconds{{generation="{g}",quantile="0.99"}}' in text
        assert f'python_gc_pause_seconds_max{{generation="{g}"}}' in text
    assert 'python_gc_pause_seconds_count{generation="2"} 1.0\n' in text
    assert 'python_gc_pause_seconds_max{generation="2"} 0.002\n' in text
    assert "python_gc_frozen_objects 1234.0\n" in text
    sample = re.compile(r'^python_gc_[a-z_]+(\{generation="[012]"(,quantile="0\.(5|99)")?\})? [0-9.e-]+$')
    for line in text.splitlines():
        assert line.startswith("# ") or sample.match(line), line


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def thawed() -> Iterator[None]:
    yield
    thaw()


@pytest.mark.usefixtures("thawed")
def test_freeze_collects_start_up_garbage_first_and_leaves_the_collector_on() -> None:
    before = cycle()  # garbage made during start-up: collected, not frozen
    result = freeze_start_up_heap()
    assert before() is None
    # Frozen objects can still be freed by reference counting (a thread left by an earlier test
    # dropping its last reference), so the count may only have shrunk since the freeze.
    assert 0 < gc.get_freeze_count() <= result.frozen
    assert gc.isenabled()
    after = cycle()  # made while serving: still collected
    gc.collect()
    assert after() is None
    thaw()
    assert gc.get_freeze_count() == 0


def test_the_switch_defaults_on_and_can_be_turned_off() -> None:
    assert BrokerConfig.load(None, {})[CONFIG_KEY] is True
    assert BrokerConfig.load(None, {CONFIG_KEY: "false"})[CONFIG_KEY] is False
