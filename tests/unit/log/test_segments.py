"""``LogSegments``: a log's segments in offset order (Kafka's ``LogSegments``; Kafka documentation §5.4 "Log":
a read locates the segment holding an offset "by a simple binary search" over the base offsets),
and the aborted transactions their ``.txnindex`` files hold (KIP-98, Kafka
``collectAbortedTransactions``). Real segments in a temporary directory, filled through a ``Log``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.log.txn_index import AbortedTxn
from tests.unit.log.helpers import T0_MS, FakeClock, batch, make_log


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def rolled_log_segments(tmp_path: Path, clock: FakeClock) -> LogSegments:
    """Segments with bases 0, 2, 4 (two one-record batches each) and an empty active one at 6."""
    log = make_log(tmp_path, clock)
    for _ in range(3):
        log.append(batch(1))
        log.append(batch(1))
        log.roll()
    return log.segments


def test_floor_finds_the_segment_holding_an_offset_by_binary_search(tmp_path: Path, clock: FakeClock) -> None:
    segments = rolled_log_segments(tmp_path, clock)
    assert [s.base_offset for s in segments] == [0, 2, 4, 6]
    assert [segments.floor(offset).base_offset for offset in range(8)] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert [s.base_offset for s in segments.from_offset(3)] == [2, 4, 6]
    assert [s.base_offset for s in segments.above(3)] == [4, 6]
    assert segments.with_base(4) is segments[2]
    assert segments.with_base(3) is None
    assert segments.active is segments[-1]
    assert segments.active.base_offset == 6 == segments.next_offset
    assert segments.size_bytes == sum(s.size_bytes for s in segments)


def test_a_roll_onto_an_empty_active_segment_replaces_it(tmp_path: Path, clock: FakeClock) -> None:
    segments = rolled_log_segments(tmp_path, clock)
    empty = segments.active
    replacement = LogSegment.create(tmp_path / "t-0", 10, empty.config, T0_MS)
    assert segments.add(replacement) is empty
    assert [s.base_offset for s in segments] == [0, 2, 4, 10]


def test_truncate_remove_first_replace_and_reset_keep_bases_in_step(tmp_path: Path, clock: FakeClock) -> None:
    segments = rolled_log_segments(tmp_path, clock)
    segments.truncate_to(3, T0_MS)
    assert [s.base_offset for s in segments] == [0, 2]
    assert segments.next_offset == 3  # the batch at 3 is gone, the one at 2 stays
    assert [s.base_offset for s in segments.remove_first(1)] == [0]
    assert segments.floor(0).base_offset == 2
    segments.add(LogSegment.create(tmp_path / "t-0", 3, segments.first.config, T0_MS))
    cleaned = LogSegment.create(tmp_path / "t-0", 1, segments.first.config, T0_MS)
    segments.replace([segments.first], cleaned)
    assert [s.base_offset for s in segments] == [1, 3]
    fresh = LogSegment.create(tmp_path / "t-0", 50, segments.first.config, T0_MS)
    assert [s.base_offset for s in segments.reset(fresh)] == [1, 3]
    assert [s.base_offset for s in segments] == [50]
    with pytest.raises(AssertionError):
        segments.remove_first(1)  # the active segment always stays


def test_aborted_transactions_are_indexed_where_their_marker_is_and_found_from_the_start_offset(
    tmp_path: Path, clock: FakeClock
) -> None:
    segments = rolled_log_segments(tmp_path, clock)
    assert segments.last_abort_offset == -1
    assert segments.collect_aborted_transactions(0, 10) == []
    segments.index_aborted([AbortedTxn(7, 0, 3, 4)], segments[1])
    segments.index_aborted([AbortedTxn(8, 4, 5, 6)], segments[2])
    assert segments.last_abort_offset == 5
    assert segments.collect_aborted_transactions(2, 6) == [AbortedTxn(7, 0, 3, 4), AbortedTxn(8, 4, 5, 6)]
    assert segments.collect_aborted_transactions(6, 10) == [], "past the newest marker: no search"
    segments.truncate_to(4, T0_MS)
    assert segments.last_abort_offset == 3, "recomputed from the indexes that remain"
