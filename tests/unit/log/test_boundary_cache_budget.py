"""The logs' batch-boundary caches share one budget, so memory does not grow with partitions.

Kafka documentation §5.4.2 "Reads": a read finds the segment holding the offset, then the position in that file. The
cache remembers those positions for the offsets reads start and stop at; a fixed 4,096 entries per
log (about 800 KB) made 10,000 busy partitions cost 8 GB. Now every open cache holds at most
``TOTAL_ENTRIES // open caches`` entries (between ``MIN_ENTRIES`` and ``MAX_ENTRIES``), and a
cache that lost entries answers reads exactly as before, from the offset index.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import boundary_cache
from broker.log.boundary_cache import BoundaryCache
from tests.unit.log.helpers import FakeClock, batch, make_log, read_all

pytestmark = pytest.mark.unit


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of 12 entries, 2 to 8 per cache, recomputed for the caches open now."""
    monkeypatch.setattr(boundary_cache, "TOTAL_ENTRIES", 12)
    monkeypatch.setattr(boundary_cache, "MAX_ENTRIES", 8)
    monkeypatch.setattr(boundary_cache, "MIN_ENTRIES", 2)
    BoundaryCache._share()
    yield
    monkeypatch.undo()
    BoundaryCache._share()


def test_each_open_cache_gets_an_equal_share_of_the_budget_within_its_bounds(small_budget: None) -> None:
    opened = BoundaryCache._open
    caches = [BoundaryCache()]
    expected = max(2, min(8, 12 // (opened + 1)))
    assert BoundaryCache.capacity() == expected
    caches += [BoundaryCache() for _ in range(11)]
    assert BoundaryCache.capacity() == 2  # 12 // 12+ caches is 1: the floor holds
    for cache in caches:
        cache.close()
        cache.close()  # idempotent: gives its share back once
    assert BoundaryCache._open == opened
    assert BoundaryCache.capacity() == max(2, min(8, 12 // max(opened, 1)))


def test_a_cache_over_its_share_drops_its_oldest_entries_at_the_next_insert(small_budget: None) -> None:
    first = BoundaryCache()
    for offset in range(20):
        first.put(offset, 0, offset * 100)
    assert len(first) <= BoundaryCache.capacity()
    assert first.get(19) == (0, 1900)  # the newest stay
    assert first.get(0) is None  # the oldest went
    others = [BoundaryCache() for _ in range(10)]  # the share shrinks to the floor
    first.put(20, 0, 2000)
    assert len(first) == 2
    assert first.get(20) == (0, 2000)
    assert first.get(19) == (0, 1900)
    for cache in [first, *others]:
        cache.close()


def test_a_dropped_log_gives_its_share_back_without_close() -> None:
    opened = BoundaryCache._open
    cache = BoundaryCache()
    assert BoundaryCache._open == opened + 1
    del cache
    assert BoundaryCache._open == opened


def test_reads_by_many_logs_with_a_tiny_budget_return_the_same_records(small_budget: None, tmp_path: Path) -> None:
    clock = FakeClock()
    logs = [make_log(tmp_path / f"p-{i}", clock, segment_bytes=600) for i in range(6)]
    try:
        for tag in range(30):
            for log in logs:
                log.append(batch(2, tag=tag))
        for log in logs:
            assert len(log._boundaries) <= 8  # the cache is what this test is about
            assert read_all(log) == list(range(60))
            assert read_all(log, start=37) == list(range(37, 60))
            assert read_all(log, start=3, max_bytes=200) == list(range(3, 60))  # mid-batch, small reads
    finally:
        for log in logs:
            log.close()
    assert all(len(log._boundaries) == 0 for log in logs)
