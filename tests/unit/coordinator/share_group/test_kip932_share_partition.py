"""KIP-932 "In-flight records": the share-partition state machine (``broker.coordinator.share_group.partition``),
its ShareSnapshot/ShareUpdate records (``records``), membership (``group``) and ``group.share.*`` checks.
Time is passed in; nothing sleeps."""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.share_group.config import ShareGroupConfig, ShareGroupConfigError
from broker.coordinator.share_group.group import ShareGroup, ShareGroupState
from broker.coordinator.share_group.manager import batch_bounds
from broker.coordinator.share_group.partition import (
    AckError,
    AckType,
    Acquired,
    RecordState,
    SharePartition,
    StateBatch,
)
from broker.coordinator.share_group.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    PersistedState,
    decode_key,
    replay,
    snapshot_key,
    snapshot_value,
)
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.wire.errors import ErrorCode

LOCK = 1000


def acquire(part: SharePartition, member: str, batches, end=100, max_records=500, now=0) -> list[Acquired]:
    return part.acquire(member, batches, end, max_records, now, LOCK)


def test_two_members_get_distinct_records():
    part = SharePartition(0)
    a = acquire(part, "a", [(0, 9)], max_records=5)
    b = acquire(part, "b", [(0, 9)], max_records=5)
    assert a == [Acquired(0, 4, 1)]
    assert b == [Acquired(5, 9, 1)]
    assert acquire(part, "c", [(0, 9)]) == []  # everything is locked
    assert (part.spso, part.speo) == (0, 10)


def test_accept_advances_the_start_offset():
    part = SharePartition(0)
    acquire(part, "a", [(0, 4)])
    part.acknowledge("a", 0, 2, [AckType.ACCEPT])
    assert part.spso == 3
    part.acknowledge("a", 3, 4, [AckType.REJECT, AckType.ACCEPT])
    assert part.spso == 5
    assert not part.records


def test_release_redelivers_with_a_higher_delivery_count():
    part = SharePartition(0)
    acquire(part, "a", [(0, 1)])
    part.acknowledge("a", 0, 0, [AckType.RELEASE])
    part.acknowledge("a", 1, 1, [AckType.ACCEPT])
    assert part.spso == 0
    assert part.records[0].state is RecordState.AVAILABLE
    assert part.next_fetch_offset() == 0
    assert acquire(part, "b", [(0, 1)]) == [Acquired(0, 0, 2)]


def test_reject_is_never_redelivered():
    part = SharePartition(0)
    acquire(part, "a", [(0, 0)])
    part.acknowledge("a", 0, 0, [AckType.REJECT])
    assert part.spso == 1
    assert acquire(part, "a", [(0, 0)]) == []


def test_lock_expiry_releases_and_the_delivery_limit_archives():
    part = SharePartition(0, delivery_count_limit=2)
    assert acquire(part, "a", [(0, 0)], now=0) == [Acquired(0, 0, 1)]
    assert part.next_lock_deadline() == LOCK
    assert not part.expire_locks(LOCK - 1)
    assert part.expire_locks(LOCK)
    assert acquire(part, "b", [(0, 0)], now=LOCK) == [Acquired(0, 0, 2)]
    assert part.expire_locks(2 * LOCK)  # second delivery reached the limit: archived, not redelivered
    assert part.spso == 1
    assert acquire(part, "c", [(0, 0)], now=2 * LOCK) == []


def test_release_at_the_limit_archives():
    part = SharePartition(0, delivery_count_limit=2)
    for member in ("a", "b"):
        acquire(part, member, [(0, 0)])
        part.acknowledge(member, 0, 0, [AckType.RELEASE])
    assert part.spso == 1


def test_acknowledging_what_the_member_does_not_hold_is_refused_unchanged():
    part = SharePartition(0)
    acquire(part, "a", [(0, 3)])
    with pytest.raises(AckError) as err:
        part.acknowledge("b", 0, 1, [AckType.ACCEPT])
    assert err.value.code == ErrorCode.INVALID_RECORD_STATE
    with pytest.raises(AckError) as err:
        part.acknowledge("a", 2, 5, [AckType.ACCEPT])  # 4, 5 were never acquired
    assert err.value.code == ErrorCode.INVALID_RECORD_STATE
    assert part.records[2].state is RecordState.ACQUIRED  # nothing applied
    with pytest.raises(AckError) as err:
        part.acknowledge("a", 0, 3, [1, 1])  # neither one type nor one per offset
    assert err.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(AckError):
        part.acknowledge("a", 0, 0, [9])


def test_member_gone_releases_its_records():
    part = SharePartition(0)
    acquire(part, "a", [(0, 1)], max_records=1)
    acquire(part, "b", [(0, 1)], max_records=1)
    assert part.release_member("a")
    assert acquire(part, "c", [(0, 1)]) == [Acquired(0, 0, 2)]


def test_gaps_between_batches_are_archived_and_fetchable_end_bounds():
    part = SharePartition(0)
    assert acquire(part, "a", [(0, 1), (5, 6)], end=6) == [Acquired(0, 1, 1), Acquired(5, 5, 1)]
    assert part.records[3].state is RecordState.ARCHIVED
    assert part.speo == 6


def test_in_flight_bound():
    part = SharePartition(0, max_in_flight=3)
    assert acquire(part, "a", [(0, 9)]) == [Acquired(0, 2, 1)]
    part.acknowledge("a", 0, 0, [AckType.ACCEPT])
    assert acquire(part, "a", [(0, 9)]) == [Acquired(3, 3, 1)]


def test_log_start_and_reset_move_the_window():
    part = SharePartition(0)
    acquire(part, "a", [(0, 4)])
    part.move_start(3)
    assert part.spso == 3
    assert set(part.records) == {3, 4}
    part.reset(10)
    assert (part.spso, part.speo, part.state_epoch) == (10, 10, 1)
    assert not part.records


def test_snapshot_round_trip_keeps_counts_and_drops_locks():
    part = SharePartition(0)
    acquire(part, "a", [(0, 5)])
    part.acknowledge("a", 0, 0, [AckType.ACCEPT])  # spso 1
    part.acknowledge("a", 2, 2, [AckType.ACCEPT])
    part.acknowledge("a", 3, 3, [AckType.RELEASE])
    snap = part.snapshot()
    assert snap == [
        StateBatch(1, 1, RecordState.AVAILABLE, 1),  # acquired: persisted as available
        StateBatch(2, 2, RecordState.ACKNOWLEDGED, 1),
        StateBatch(3, 5, RecordState.AVAILABLE, 1),
    ]
    back = SharePartition.restore(part.spso, snap)
    assert (back.spso, back.speo) == (1, 6)
    assert acquire(back, "b", [(0, 5)]) == [Acquired(1, 1, 2), Acquired(3, 5, 2)]


def test_share_snapshot_record_codec_and_update_replay():
    tid = uuid.uuid4()
    key = snapshot_key("g", tid, 3)
    assert key[:2] == b"\x00\x00"
    assert decode_key(key) == (SHARE_SNAPSHOT, "g", tid, 3)
    state = PersistedState(2, 0, 10, (StateBatch(10, 12, 0, 1), StateBatch(13, 13, 2, 1)))
    value = snapshot_value(state, 123)
    assert replay(None, SHARE_SNAPSHOT, value) == state
    assert replay(state, SHARE_SNAPSHOT, None) is None
    # a ShareUpdate (type 1) replaces the offsets it covers
    from broker.coordinator.share_group import records as r

    update = r._INT16.pack(0) + r._UPDATE.encode(
        {
            "snapshot_epoch": 0, "leader_epoch": 0, "start_offset": 11,
            "state_batches": [{"first_offset": 12, "last_offset": 12, "delivery_state": 4, "delivery_count": 2}],
        },
        0,
    )  # fmt: skip
    after = replay(state, SHARE_UPDATE, update)
    assert after is not None
    assert after.start_offset == 11
    assert after.batches == (StateBatch(10, 11, 0, 1), StateBatch(12, 12, 4, 2), StateBatch(13, 13, 2, 1))
    assert replay(None, SHARE_UPDATE, update) is None


def test_batch_bounds_reads_base_and_last_offsets():
    one = bytearray(encode_batch([ProducerRecord(b"k", b"v", 0)] * 3))
    two = bytearray(encode_batch([ProducerRecord(b"k", b"v", 0)] * 2))
    two[0:8] = (3).to_bytes(8, "big")
    bounds = batch_bounds(bytes(one + two) + b"\x00" * 5)  # a partial tail is ignored
    assert [(b, last, ctl) for b, last, _, _, ctl in bounds] == [(0, 2, False), (3, 4, False)]


def test_membership_epochs_and_assignment():
    topics = {"t": (uuid.uuid4(), 2)}
    group = ShareGroup("g")
    assert group.state is ShareGroupState.EMPTY
    a = group.heartbeat("a", 0, ("t",), topics)
    assert a.member_epoch == 1
    assert a.assignment == {"t": frozenset({0, 1})}
    b = group.heartbeat("b", 0, ("t",), topics)
    assert b.member_epoch == 2
    assert b.assignment == {"t": frozenset({0, 1})}
    again = group.heartbeat("a", 1, None, topics)
    assert again.member_epoch == 2
    assert again.assignment is None
    from broker.coordinator.share_group.group import HeartbeatError

    assert group.heartbeat("a", 1, None, topics).member_epoch == 2  # the previous epoch: a lost response
    with pytest.raises(HeartbeatError) as err:
        group.heartbeat("a", 7, None, topics)
    assert err.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatError) as err:
        group.heartbeat("zz", 5, None, topics)
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.heartbeat("a", -1, None, topics).left
    assert set(group.members) == {"b"}
    assert group.group_epoch == 3
    with pytest.raises(HeartbeatError) as err:
        group.heartbeat("c", 0, ("t",), topics, max_size=1)
    assert err.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_group_share_config_defaults_and_bounds_as_kafka_4_1():
    config = ShareGroupConfig.from_properties(lambda key, default: default)
    assert (config.delivery_count_limit, config.record_lock_duration_ms, config.partition_max_record_locks) == (
        5, 30_000, 2000,
    )  # fmt: skip
    for key, value in (
        ("group.share.delivery.count.limit", 1),
        ("group.share.delivery.count.limit", 11),
        ("group.share.record.lock.duration.ms", 999),
        ("group.share.record.lock.duration.ms", 14_000),  # below group.share.min.record.lock.duration.ms
        ("group.share.partition.max.record.locks", 99),
        ("group.share.max.size", 1001),
        ("group.share.heartbeat.interval.ms", 50_000),
    ):
        with pytest.raises(ShareGroupConfigError, match=key.replace(".", r"\.")):
            ShareGroupConfig.from_properties(lambda k, d, key=key, value=value: value if k == key else d)
    short = {"group.share.record.lock.duration.ms": 2000, "group.share.min.record.lock.duration.ms": 1000}
    assert ShareGroupConfig.from_properties(short.get).record_lock_duration_ms == 2000


def test_share_group_configs_checked_as_kafka_group_config():
    from broker.coordinator.share_group.config import check_group_config, group_config_defaults

    config = ShareGroupConfig()
    assert group_config_defaults(config)["share.auto.offset.reset"] == "latest"
    assert group_config_defaults(config)["share.isolation.level"] == "read_uncommitted"
    assert check_group_config(config, "share.isolation.level", "read_committed") is None
    assert check_group_config(config, "share.auto.offset.reset", "earliest") is None
    assert check_group_config(config, "share.record.lock.duration.ms", "20000") is None
    for key, value in (
        ("share.isolation.level", "serializable"),
        ("share.auto.offset.reset", "newest"),
        ("share.record.lock.duration.ms", "14999"),  # below group.share.min.record.lock.duration.ms
        ("share.record.lock.duration.ms", "x"),
        ("share.heartbeat.interval.ms", "16000"),
        ("consumer.unknown.key", "1"),
    ):
        assert check_group_config(config, key, value) is not None, key
