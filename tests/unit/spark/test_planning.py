"""Pure micro-batch planning: rate limits, trigger delay, splits, discovery, never-backwards, data loss."""

from __future__ import annotations

import itertools
import logging

import pytest

from pyspark_log.spark.access import TopicPartition
from pyspark_log.spark.planning import (
    BrokerSnapshot,
    DataLoss,
    LossKind,
    OffsetRange,
    PlannerState,
    PylogDataLossError,
    TriggerLimits,
    plan_ranges,
    plan_trigger,
    rate_limit,
    report_data_loss,
    split_ranges,
)

TP = TopicPartition

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)
NO_LIMITS = TriggerLimits()


def snap(latest: dict[TP, int], earliest: dict[TP, int] | None = None) -> BrokerSnapshot:
    earliest = earliest if earliest is not None else dict.fromkeys(latest, 0)
    return BrokerSnapshot(frozenset(latest), earliest, latest)


# -- rate limit: maxOffsetsPerTrigger ----------------------------------------------------------------


def test_limit_is_shared_in_proportion_to_backlog() -> None:
    end = rate_limit({A0: 0, A1: 100}, {A0: 100, A1: 400}, 100)
    assert end == {A0: 25, A1: 175}


def test_shares_round_down() -> None:
    end = rate_limit({A0: 0, A1: 0, B0: 0}, {A0: 100, A1: 100, B0: 100}, 100)
    assert end == {A0: 33, A1: 33, B0: 33}


def test_small_partitions_are_not_starved() -> None:
    end = rate_limit({A0: 0, A1: 0}, {A0: 10_000, A1: 1}, 10)
    assert end == {A0: 9, A1: 1}  # 10 * 1/10001 < 1 rounds up to 1, as in the connector


def test_limit_above_backlog_reads_everything_and_idle_partitions_stay() -> None:
    assert rate_limit({A0: 5, A1: 7}, {A0: 10, A1: 7}, 1000) == {A0: 10, A1: 7}
    assert rate_limit({A0: 5}, {A0: 5}, 10) == {A0: 5}


def test_rate_limit_in_a_trigger_includes_new_partitions_from_earliest() -> None:
    plan = plan_trigger({A0: 0}, snap({A0: 300, A1: 100}), TriggerLimits(max_offsets=40), PlannerState(), 0)
    assert plan.begins == {A0: 0, A1: 0}
    assert plan.end == {A0: 30, A1: 10}


# -- minOffsetsPerTrigger / maxTriggerDelay -------------------------------------------------------


def test_min_offsets_delays_until_enough_data_or_the_delay_passes() -> None:
    limits = TriggerLimits(min_offsets=100, max_trigger_delay_ms=60_000)
    state = PlannerState()
    # The first trigger of a run always runs (last batch time starts at 0).
    plan = plan_trigger({A0: 0}, snap({A0: 10}), limits, state, now_ms=1_000_000)
    assert not plan.delayed
    assert plan.end == {A0: 10}
    state = plan.state
    assert state.last_trigger_ms == 1_000_000
    # 40 new offsets < 100, 30 s after the last batch: skipped, end == start.
    plan = plan_trigger({A0: 10}, snap({A0: 50}), limits, state, now_ms=1_030_000)
    assert plan.delayed
    assert plan.end == {A0: 10}
    assert plan.state.last_trigger_ms == 1_000_000
    state = plan.state
    # 60 s after the last batch: the delay has passed, read what is there.
    plan = plan_trigger({A0: 10}, snap({A0: 60}), limits, state, now_ms=1_060_000)
    assert not plan.delayed
    assert plan.end == {A0: 60}
    assert plan.state.last_trigger_ms == 1_060_000
    state = plan.state
    # Enough data runs at once and restarts the delay.
    plan = plan_trigger({A0: 60}, snap({A0: 160}), limits, state, now_ms=1_061_000)
    assert not plan.delayed
    assert plan.end == {A0: 160}
    assert plan.state.last_trigger_ms == 1_061_000


def test_min_and_max_together() -> None:
    limits = TriggerLimits(max_offsets=50, min_offsets=20, max_trigger_delay_ms=10_000)
    state = PlannerState(last_trigger_ms=100)
    assert plan_trigger({A0: 0}, snap({A0: 10}), limits, state, now_ms=200).delayed
    plan = plan_trigger({A0: 0}, snap({A0: 500}), limits, state, now_ms=200)
    assert plan.end == {A0: 50}


def test_min_offsets_counts_backlog_of_all_partitions() -> None:
    limits = TriggerLimits(min_offsets=10, max_trigger_delay_ms=10_000)
    state = PlannerState(last_trigger_ms=100)
    plan = plan_trigger({A0: 0, A1: 0}, snap({A0: 5, A1: 5}), limits, state, now_ms=200)
    assert not plan.delayed


# -- new partitions, pattern discovery ----------------------------------------------------------


def test_new_partitions_and_new_topics_start_at_earliest() -> None:
    snapshot = snap({A0: 10, A1: 4, B0: 7}, {A0: 0, A1: 0, B0: 0})
    plan = plan_trigger({A0: 10}, snapshot, NO_LIMITS, PlannerState(), 0)
    assert plan.begins == {A0: 10, A1: 0, B0: 0}
    assert plan.end == {A0: 10, A1: 4, B0: 7}
    assert plan.losses == ()
    assert plan_ranges(plan.begins, plan.end) == [OffsetRange(A1, 0, 4), OffsetRange(B0, 0, 7)]


def test_a_new_partition_starting_above_zero_is_reported() -> None:
    plan = plan_trigger({}, snap({A0: 10}, {A0: 3}), NO_LIMITS, PlannerState(), 0)
    assert plan.losses == (DataLoss(A0, LossKind.NEW_NOT_AT_ZERO, 3, 3),)
    assert plan.begins == {A0: 3}
    assert plan.end == {A0: 10}


# -- never backwards ----------------------------------------------------------------------------


def test_a_lower_latest_never_moves_the_end_backwards() -> None:
    plan = plan_trigger({A0: 0}, snap({A0: 100}), TriggerLimits(max_offsets=50), PlannerState(), 0)
    assert plan.end == {A0: 50}
    # The broker now reports 40 (a lagging leader), below both the seen 100 and the start 50.
    plan = plan_trigger({A0: 50}, snap({A0: 40}), NO_LIMITS, plan.state, 0)
    assert plan.losses == ()
    assert plan.end == {A0: 100}
    assert plan.latest == {A0: 100}
    assert plan.state.seen_latest == {A0: 100}


def test_seen_latest_keeps_the_maximum() -> None:
    state = PlannerState(seen_latest={A0: 70})
    plan = plan_trigger({A0: 10}, snap({A0: 60}), NO_LIMITS, state, 0)
    assert plan.end == {A0: 70}
    assert plan.state.seen_latest == {A0: 70}
    plan = plan_trigger({A0: 70}, snap({A0: 90}), NO_LIMITS, plan.state, 0)
    assert plan.end == {A0: 90}
    assert plan.state.seen_latest == {A0: 90}


def test_a_partition_missing_from_the_offset_answers_keeps_its_offset() -> None:
    snapshot = BrokerSnapshot(frozenset({A0, A1}), {A0: 0}, {A0: 5})  # A1 vanished mid-snapshot
    plan = plan_trigger({A0: 0, A1: 9}, snapshot, NO_LIMITS, PlannerState(), 0)
    assert plan.end == {A0: 5, A1: 9}
    assert plan.losses == ()
    assert plan_ranges(plan.begins, plan.end) == [OffsetRange(A0, 0, 5)]


# -- data loss ----------------------------------------------------------------------------------


def test_retention_below_the_start_skips_to_earliest() -> None:
    plan = plan_trigger({A0: 5}, snap({A0: 30}, {A0: 12}), NO_LIMITS, PlannerState(), 0)
    assert plan.losses == (DataLoss(A0, LossKind.RETENTION, 5, 12),)
    assert plan.begins == {A0: 12}
    assert plan.end == {A0: 30}
    assert plan_ranges(plan.begins, plan.end) == [OffsetRange(A0, 12, 30)]


def test_a_deleted_partition_is_dropped() -> None:
    plan = plan_trigger({A0: 5, B0: 8}, snap({A0: 6}), NO_LIMITS, PlannerState(seen_latest={B0: 8}), 0)
    assert plan.losses == (DataLoss(B0, LossKind.DELETED, 8),)
    assert plan.end == {A0: 6}
    assert B0 not in plan.state.seen_latest


def test_a_start_beyond_the_log_end_is_a_reset() -> None:
    # After a restart nothing was seen in this run: a checkpoint at 90 and a log ending at 20.
    plan = plan_trigger({A0: 90}, snap({A0: 20}, {A0: 0}), NO_LIMITS, PlannerState(), 0)
    assert plan.losses == (DataLoss(A0, LossKind.RESET, 90, 0, 20),)
    assert plan.end == {A0: 0}  # the next batch re-reads the new log from its earliest offset
    assert plan_ranges(plan.begins, plan.end) == []
    again = plan_trigger(plan.end, snap({A0: 25}, {A0: 0}), NO_LIMITS, plan.state, 0)
    assert again.losses == ()
    assert again.end == {A0: 25}


def test_losses_are_not_delayed_by_min_offsets() -> None:
    limits = TriggerLimits(min_offsets=1000)
    plan = plan_trigger({A0: 5}, snap({A0: 30}, {A0: 12}), limits, PlannerState(last_trigger_ms=1), 2)
    assert not plan.delayed
    assert plan.losses


def test_report_data_loss_fails_naming_partition_offsets_and_fix() -> None:
    losses = [DataLoss(A0, LossKind.RETENTION, 5, 12), DataLoss(B0, LossKind.DELETED, 8)]
    with pytest.raises(PylogDataLossError) as info:
        report_data_loss(losses, fail_on_data_loss=True)
    message = str(info.value)
    assert "a-0: offsets 5 to 11 were deleted" in message
    assert "earliest available offset is 12" in message
    assert "b-0 no longer exists" in message
    assert "read up to offset 8" in message
    assert "failOnDataLoss=false" in message
    assert "new checkpoint" in message


def test_report_data_loss_warns_when_not_failing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        report_data_loss([DataLoss(A0, LossKind.RESET, 90, 0, 20)], fail_on_data_loss=False)
        report_data_loss([], fail_on_data_loss=True)
    assert "a-0: the query's next offset is 90 but the broker's log ends at 20" in caplog.text
    assert "failOnDataLoss=true" in caplog.text


def test_new_not_at_zero_description() -> None:
    assert "starts at offset 3 instead of 0" in DataLoss(A0, LossKind.NEW_NOT_AT_ZERO, 3, 3).describe()


# -- splitting: minPartitions / maxRecordsPerPartition -------------------------------------------


def test_one_range_per_partition_without_split_options() -> None:
    ranges = plan_ranges({A1: 0, A0: 0, B0: 5}, {A0: 10, A1: 0, B0: 9})
    assert ranges == [OffsetRange(A0, 0, 10), OffsetRange(B0, 5, 9)]


def test_min_partitions_splits_large_ranges_in_proportion() -> None:
    ranges = split_ranges([OffsetRange(A0, 0, 100), OffsetRange(A1, 0, 10)], min_partitions=4)
    assert ranges == [
        OffsetRange(A0, 0, 33),
        OffsetRange(A0, 33, 66),
        OffsetRange(A0, 66, 100),
        OffsetRange(A1, 0, 10),
    ]


def test_min_partitions_met_means_no_split() -> None:
    original = [OffsetRange(A0, 0, 100), OffsetRange(A1, 0, 10)]
    assert split_ranges(original, min_partitions=2) == original


def test_min_partitions_on_equal_ranges() -> None:
    ranges = split_ranges([OffsetRange(A0, 0, 10), OffsetRange(A1, 0, 10)], min_partitions=4)
    assert [r.size for r in ranges] == [5, 5, 5, 5]


def test_min_partitions_uses_round_half_up() -> None:
    # Sizes 5 and 3 toward 4 partitions: 5/8*4 = 2.5 -> 3 parts and 3/8*4 = 1.5 -> 2 parts (Scala's
    # math.round rounds halves up; Python's round() would give 2 and 2).
    ranges = split_ranges([OffsetRange(A0, 0, 5), OffsetRange(A1, 0, 3)], min_partitions=4)
    assert [(r.tp, r.start, r.end) for r in ranges] == [(A0, 0, 1), (A0, 1, 3), (A0, 3, 5), (A1, 0, 1), (A1, 1, 3)]


def test_max_records_per_partition_cuts_equal_parts() -> None:
    ranges = split_ranges([OffsetRange(A0, 0, 10), OffsetRange(A1, 3, 5)], max_records_per_partition=4)
    assert ranges == [OffsetRange(A0, 0, 3), OffsetRange(A0, 3, 6), OffsetRange(A0, 6, 10), OffsetRange(A1, 3, 5)]
    assert all(r.size <= 4 for r in ranges)


def test_max_records_then_min_partitions() -> None:
    ranges = split_ranges([OffsetRange(A0, 0, 8)], max_records_per_partition=4, min_partitions=4)
    assert [(r.start, r.end) for r in ranges] == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_ranges_are_never_empty_or_lost() -> None:
    for size in range(1, 40):
        for min_parts in range(1, 12):
            ranges = split_ranges([OffsetRange(A0, 100, 100 + size)], min_partitions=min_parts)
            assert all(r.size > 0 for r in ranges)
            assert ranges[0].start == 100
            assert ranges[-1].end == 100 + size
            assert all(x.end == y.start for x, y in itertools.pairwise(ranges))
            assert len(ranges) == min(size, min_parts)


def test_empty_and_backwards_ranges_are_dropped() -> None:
    assert split_ranges([OffsetRange(A0, 5, 5), OffsetRange(A1, 9, 3)], min_partitions=3) == []
