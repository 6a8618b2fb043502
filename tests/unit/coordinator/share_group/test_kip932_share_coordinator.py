"""KIP-932 "Share-partition state persistence": the share coordinator
(``broker.coordinator.share_group.coordinator``) over an in-memory ``__share_group_state``
partition: InitializeShareGroupState / ReadShareGroupState / WriteShareGroupState /
DeleteShareGroupState / ReadShareGroupStateSummary with Kafka 4.1's fencing, ShareUpdate records
between ShareSnapshots (``share.coordinator.snapshot.update.records.per.snapshot``), a reload from
the log giving what the cache held; and the share group's records of ``__consumer_offsets``
(``group_records``: Kafka's record types 10-15)."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from broker.coordinator.share_group.coordinator import ShareCoordinator
from broker.coordinator.share_group.group import ShareGroup
from broker.coordinator.share_group.group_records import (
    GROUP_METADATA,
    MEMBER_METADATA,
    STATE_PARTITIONS,
    decode_key,
    group_records,
    replay,
)
from broker.coordinator.share_group.partition import StateBatch
from broker.coordinator.share_group.records import SHARE_SNAPSHOT, SHARE_UPDATE
from broker.coordinator.share_group.records import decode_key as decode_state_key
from pyspark_log.records.batch import decode_batches
from pyspark_log.wire.errors import ErrorCode
from tests.unit.coordinator.helpers import MemoryLog

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID(int=7)
KEY = ("g", TOPIC_ID, 0)


def coordinator(log: MemoryLog, *, per_snapshot: int = 2, led: bool = True) -> ShareCoordinator:
    async def committed(partition: int, offset: int, timeout_ms: int) -> int:
        return ErrorCode.NONE

    return ShareCoordinator(log, committed, lambda sp: led, lambda: 1_000, updates_per_snapshot=per_snapshot,
                            num_partitions=1)  # fmt: skip


def record_types(log: MemoryLog) -> list[int | None]:
    out: list[int | None] = []
    for _, _, data in log.batches.get(0, []):
        for _, records in decode_batches(data):
            for rec in records:
                decoded = decode_state_key(bytes(rec.key))
                out.append(None if rec.value is None else decoded[0] if decoded else -1)
    return out


def test_writes_are_updates_between_snapshots_and_a_reload_gives_the_cached_state() -> None:
    log = MemoryLog()
    c = coordinator(log)
    assert asyncio.run(c.initialize(KEY, 0, 10)).code == ErrorCode.NONE
    batches = [StateBatch(10, 11, 2, 1), StateBatch(12, 14, 0, 1)]
    for start in (10, 12, 12, 13):
        assert asyncio.run(c.write(KEY, 0, 5, start, [b for b in batches if b.last_offset >= start])).code == 0
    # initialise: snapshot; two updates; the third write is a snapshot (limit 2); then an update
    assert record_types(log) == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE, SHARE_SNAPSHOT, SHARE_UPDATE]
    cached = c.read(KEY, 5).state
    assert cached is not None
    assert (cached.start_offset, cached.leader_epoch, cached.snapshot_epoch) == (13, 5, 1)
    assert cached.batches == (StateBatch(12, 14, 0, 1),)
    reloaded = coordinator(log).read(KEY, 5).state  # a new leader of the state partition replays it
    assert reloaded == cached


def test_stale_state_and_leader_epochs_are_fenced() -> None:
    c = coordinator(MemoryLog())
    asyncio.run(c.initialize(KEY, 3, 0))
    assert asyncio.run(c.write(KEY, 3, 7, 0, [])).code == ErrorCode.NONE
    assert asyncio.run(c.write(KEY, 2, 7, 0, [])).code == ErrorCode.FENCED_STATE_EPOCH  # a reset happened
    assert asyncio.run(c.write(KEY, 3, 6, 0, [])).code == ErrorCode.FENCED_LEADER_EPOCH  # a newer leader wrote
    assert c.read(KEY, 6).code == ErrorCode.FENCED_LEADER_EPOCH
    assert asyncio.run(c.initialize(KEY, 2, 0)).code == ErrorCode.FENCED_STATE_EPOCH
    reset = asyncio.run(c.initialize(KEY, 4, 9))
    assert reset.code == ErrorCode.NONE
    summary = c.summary(KEY).state
    assert summary is not None
    assert (summary.state_epoch, summary.leader_epoch, summary.start_offset) == (4, -1, 9)


def test_delete_tombstones_both_keys_and_unknown_or_not_led_keys_are_refused() -> None:
    log = MemoryLog()
    c = coordinator(log)
    assert c.read(KEY, 0).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # never initialised
    asyncio.run(c.initialize(KEY, 0, 0))
    asyncio.run(c.write(KEY, 0, 1, 0, [StateBatch(0, 0, 0, 1)]))
    assert asyncio.run(c.delete(KEY)).code == ErrorCode.NONE
    assert record_types(log)[-2:] == [None, None]
    assert c.summary(KEY).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert coordinator(log).read(KEY, 0).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    stale = asyncio.run(c.write(KEY, 0, 1, 0, []))  # a leader's copy of the deleted state
    assert stale.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for bad in (StateBatch(5, 4, 0, 1), StateBatch(0, 1, 3, 1), StateBatch(0, 1, 0, -1)):
        assert asyncio.run(c.write(KEY, 0, 1, 0, [bad])).code == ErrorCode.INVALID_REQUEST
    assert c.read(("", TOPIC_ID, 0), 0).code == ErrorCode.INVALID_REQUEST
    assert coordinator(log, led=False).read(KEY, 0).code == ErrorCode.NOT_COORDINATOR


def test_share_group_records_use_kafka_types_and_replay_to_the_same_group() -> None:
    topics = {"t": (TOPIC_ID, 2)}
    group = ShareGroup("g")
    group.heartbeat("m1", 0, ("t",), topics, client_id="c", client_host="/127.0.0.1")
    initialized = {"t": (TOPIC_ID, frozenset({0, 1}))}
    records = group_records(group, initialized, topics)
    types = sorted(decode_key(k)[0] for k in records)  # type: ignore[index]
    assert types == [10, 11, 12, 13, 14, 15]
    key = next(k for k in records if decode_key(k)[0] == GROUP_METADATA)  # type: ignore[index]
    assert key == struct.pack(">hh", GROUP_METADATA, 1) + b"g"  # int16 type, then ShareGroupMetadataKey v0
    value = records[key]
    assert value == struct.pack(">hiq", 0, 1, 0) + b"\x00"  # version 0, epoch 1, metadata hash 0, no tags
    back = replay(list(records.items()), topics)
    assert back.groups["g"].group_epoch == 1
    member = back.groups["g"].members["m1"]
    assert (member.member_epoch, member.client_id, member.assignment) == (1, "c", {"t": frozenset({0, 1})})
    assert back.initialized["g"] == initialized
    tombstones = [(k, None) for k in records]
    assert replay([*records.items(), *tombstones], topics).groups == {}
    assert {MEMBER_METADATA, STATE_PARTITIONS} <= set(types)
