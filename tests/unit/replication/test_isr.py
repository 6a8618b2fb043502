"""The leader's pure replication decisions (``broker.replication.isr``), one Kafka documentation sentence each."""

from __future__ import annotations

from broker.replication.isr import (
    FollowerState,
    acks_all_error,
    can_join_isr,
    high_watermark,
    on_follower_fetch,
    out_of_sync,
)
from pyspark_log.wire.errors import ErrorCode

LEADER = 1


def test_a_followers_fetch_offset_is_its_log_end_offset_and_reaching_the_leaders_end_catches_it_up():
    """§4.7 "followers consume messages from the leader just as a normal Kafka consumer would"."""
    state = on_follower_fetch(FollowerState(), fetch_offset=10, leader_end_offset=10, now_ms=500)
    assert state.log_end_offset == 10
    assert state.last_caught_up_ms == 500


def test_reaching_the_leaders_end_as_of_the_previous_fetch_counts_as_caught_up_then():
    """Kafka ``updateFetchStateOrThrow``: a follower that is always one fetch behind a busy leader
    is still in sync — it reached, at the previous fetch's time, what the leader had then."""
    state = on_follower_fetch(FollowerState(), fetch_offset=5, leader_end_offset=10, now_ms=100)
    assert state.last_caught_up_ms == 0  # 5 < 10: not caught up yet
    state = on_follower_fetch(state, fetch_offset=10, leader_end_offset=20, now_ms=200)
    assert state.last_caught_up_ms == 100  # it has what the leader had at 100
    state = on_follower_fetch(state, fetch_offset=15, leader_end_offset=30, now_ms=300)
    assert state.last_caught_up_ms == 100  # 15 < 20: no progress to the previous end


def test_the_high_watermark_is_the_smallest_log_end_offset_of_the_isr():
    """§4.7 "A message is considered committed when all in sync replicas for that partition have
    applied it to their log"."""
    followers = {2: FollowerState(log_end_offset=7), 3: FollowerState(log_end_offset=9)}
    assert high_watermark(0, LEADER, 10, {1, 2, 3}, followers) == 7
    assert high_watermark(0, LEADER, 10, {1, 3}, followers) == 9  # broker 2 is out of the ISR
    assert high_watermark(0, LEADER, 10, {1}, followers) == 10  # alone: every append is committed


def test_the_high_watermark_never_moves_back_and_waits_for_unknown_members():
    followers = {2: FollowerState(log_end_offset=3)}
    assert high_watermark(5, LEADER, 10, {1, 2}, followers) == 5
    assert high_watermark(5, LEADER, 10, {1, 2, 3}, {**followers, 3: FollowerState()}) == 5
    assert high_watermark(0, LEADER, 10, {1, 2}, {}) == 0  # a member never heard of yet


def test_followers_not_caught_up_for_replica_lag_time_max_ms_are_out_of_sync():
    """§4.7 "If a follower dies, gets stuck, or falls behind, the leader will remove it from the
    list of in sync replicas. The determination of stuck and lagging replicas is controlled by the
    replica.lag.time.max.ms configuration"."""
    followers = {
        2: FollowerState(log_end_offset=10, last_caught_up_ms=0),  # at the leader's end: in sync
        3: FollowerState(log_end_offset=4, last_caught_up_ms=1000),  # behind, but caught up lately
        4: FollowerState(log_end_offset=4, last_caught_up_ms=0),  # behind for 30 s
    }
    slow = out_of_sync({1, 2, 3, 4}, LEADER, 10, followers, now_ms=30_500, lag_time_max_ms=30_000)
    assert slow == {4}
    assert out_of_sync({1, 3}, LEADER, 10, followers, now_ms=31_001, lag_time_max_ms=30_000) == {3}


def test_a_follower_rejoins_once_it_reaches_the_high_watermark_and_the_leaders_epoch_start():
    assert can_join_isr(FollowerState(log_end_offset=10), high_watermark_offset=10, leader_epoch_start_offset=8)
    assert not can_join_isr(FollowerState(log_end_offset=9), high_watermark_offset=10, leader_epoch_start_offset=8)
    assert not can_join_isr(FollowerState(log_end_offset=10), high_watermark_offset=5, leader_epoch_start_offset=12)
    assert not can_join_isr(FollowerState(), high_watermark_offset=0, leader_epoch_start_offset=0)


def test_acks_all_min_insync_replicas_errors_before_and_after_the_append():
    """Kafka documentation §3.3 "Producer Configs" (`acks`): acks=all with fewer in-sync replicas than
    min.insync.replicas is refused."""
    assert acks_all_error(2, 2, after_append=False) == ErrorCode.NONE
    assert acks_all_error(1, 2, after_append=False) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert acks_all_error(1, 2, after_append=True) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_acks_all_min_insync_replicas_is_capped_at_the_replica_count():
    """Kafka 4.x ``Partition.effectiveMinIsr``: min(min.insync.replicas, replicas); an RF=1
    partition with min.insync.replicas=2 takes acks=all writes (found by tests/differential)."""
    assert acks_all_error(1, 2, after_append=False, replica_count=1) == ErrorCode.NONE
    assert acks_all_error(2, 3, after_append=False, replica_count=2) == ErrorCode.NONE
    assert acks_all_error(1, 2, after_append=False, replica_count=3) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert acks_all_error(1, 3, after_append=True, replica_count=2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
