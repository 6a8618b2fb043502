"""The log's batch-boundary cache holds no object the garbage collector must traverse.

Project rule: "Nothing that can take more than a millisecond runs on the broker's event loop
between requests: measure the loop's stalls." The cache keeps up to ``BOUNDARY_CACHE_ENTRIES``
entries per partition; as (segment, position) tuples each one stayed tracked, and a busy broker's
full collections traversed millions of them. As (segment base offset, position) ints they are
untracked at the first collection, and reads across segment rolls still find their batches.
"""

from __future__ import annotations

import gc
from pathlib import Path

from tests.unit.log.helpers import FakeClock, batch, make_log, read_all


def test_cached_boundaries_are_untracked_after_a_collection_and_reads_stay_right(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock(), segment_bytes=600)
    for tag in range(40):
        log.append(batch(2, tag=tag))
    assert len(log.segments) > 3  # rolled several times
    assert read_all(log) == list(range(80))
    assert read_all(log, start=37) == list(range(37, 80))
    boundaries = log._boundaries  # the cache is what this test is about
    assert len(boundaries) >= 40
    gc.collect()
    assert not any(gc.is_tracked(entry) for entry in boundaries.values())
    assert read_all(log) == list(range(80))  # now served from the cache
    log.close()
