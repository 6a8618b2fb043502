"""Choosing the log to clean (Kafka documentation §4.8 "Log Compaction" "Log Compaction Details" step 1 and
the lag configs).

pick the log whose head is largest relative to its tail.
"""

from __future__ import annotations

from broker.log.cleaner.choose import LogFacts, SegmentFacts, choose_log, cleanable_range, starts_new_group

NOW = 1_700_000_000_000
LONG_MAX = 2**63 - 1


def seg(base: int, end: int, size: int = 100, ts: int = NOW - 10_000_000, first_ts: int | None = None) -> SegmentFacts:
    return SegmentFacts(base, end, size, ts, ts if first_ts is None else first_ts, ts)


def facts(
    segments: list[SegmentFacts],
    *,
    key: str = "t-0",
    first_dirty: int = 0,
    stable: int | None = None,
    ratio: float = 0.5,
    min_lag: int = 0,
    max_lag: int = LONG_MAX,
) -> LogFacts:
    return LogFacts(
        key, tuple(segments), segments[0].base_offset, first_dirty,
        segments[-1].next_offset if stable is None else stable, ratio, min_lag, max_lag,
    )  # fmt: skip


def test_section_4_8_highest_dirty_ratio_wins() -> None:
    """pick the log whose head is largest relative to its tail."""
    a = facts([seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 31)], key="a", first_dirty=10)  # 2/3 dirty
    b = facts([seg(0, 10), seg(10, 20), seg(20, 21)], key="b", first_dirty=0)  # all dirty
    chosen = choose_log([a, b], NOW)
    assert chosen is not None
    assert chosen.key == "b"
    assert chosen.dirty_ratio == 1.0
    assert (chosen.first_dirty_offset, chosen.end_offset) == (0, 20)


def test_min_cleanable_dirty_ratio_keeps_a_mostly_clean_log_waiting() -> None:
    log = facts([seg(0, 10, 300), seg(10, 20, 100), seg(20, 21)], first_dirty=10, ratio=0.5)
    assert cleanable_range(log, NOW).dirty_ratio == 0.25
    assert choose_log([log], NOW) is None
    assert choose_log([facts([seg(0, 10, 300), seg(10, 20, 100), seg(20, 21)], first_dirty=10, ratio=0.2)], NOW)


def test_section_4_8_active_segment_is_never_cleaned() -> None:
    """the active segment is never compacted, however old its messages."""
    only_active = facts([seg(0, 100, 10_000)])
    assert choose_log([only_active], NOW) is None
    two = cleanable_range(facts([seg(0, 50), seg(50, 100, 10_000)]), NOW)
    assert two.end_offset == 50
    assert two.dirty_bytes == 100


def test_section_4_8_min_compaction_lag_keeps_young_segments_in_the_head() -> None:
    """``min.compaction.lag.ms`` bounds how soon after it is written a message may be compacted: a segment
    holding a record younger than the lag ends the cleanable range."""
    log = facts([seg(0, 10, ts=NOW - 60_000), seg(10, 20, ts=NOW - 1_000), seg(20, 21)], min_lag=30_000)
    found = cleanable_range(log, NOW)
    assert found.end_offset == 10
    assert found.dirty_bytes == 100


def test_section_4_8_max_compaction_lag_makes_a_log_cleanable_below_the_ratio() -> None:
    """``max.compaction.lag.ms`` bounds how long a written message may wait before it becomes eligible for
    compaction: an overdue dirty segment is cleaned even under min.cleanable.dirty.ratio."""
    segments = [seg(0, 10, 900), seg(10, 20, 100, ts=NOW - 120_000), seg(20, 21)]
    assert choose_log([facts(segments, first_dirty=10, ratio=0.5)], NOW) is None
    chosen = choose_log([facts(segments, first_dirty=10, ratio=0.5, max_lag=60_000)], NOW)
    assert chosen is not None
    assert chosen.overdue_ms == 60_000


def test_an_ongoing_transaction_ends_the_cleanable_range() -> None:
    log = facts([seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 31)], stable=15)
    assert cleanable_range(log, NOW).end_offset == 10


def test_nothing_dirty_after_a_clean_up_to_the_active_segment() -> None:
    log = facts([seg(0, 10), seg(10, 20), seg(20, 21)], first_dirty=20)
    assert choose_log([log], NOW) is None


def test_cleaned_segments_group_up_to_segment_bytes() -> None:
    """Small cleaned segments merge while the written size plus the next source fits segment.bytes."""
    assert not starts_new_group(40, 0, 60, 20, 100, 2**31 - 1)
    assert starts_new_group(41, 0, 60, 20, 100, 2**31 - 1)
    assert starts_new_group(0, 0, 10, 2**31 + 1, 100, 2**31 - 1)  # offsets must fit int32 deltas
