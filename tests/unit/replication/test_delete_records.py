"""DeleteRecords on the leader and its followers (KIP-107; Kafka 3.7 ``Partition.deleteRecordsOnLeader``,
``lowWatermarkIfLeader``, ``DelayedDeleteRecords``): the leader moves its log start offset at once,
followers follow from the fetch responses and report theirs in their fetches, and the request
completes once every live replica's log start reached the offset."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.replication.delete_records import low_watermark, resolve_offset
from broker.replication.isr import FollowerState
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode
from tests.unit.log.helpers import FakeClock, batch
from tests.unit.replication.test_replica_manager import BROKERS, TOPIC, Node, image

pytestmark = pytest.mark.unit


def test_resolve_offset_minus_one_is_the_high_watermark() -> None:
    assert resolve_offset(-1, 10) == (ErrorCode.NONE, 10)
    assert resolve_offset(4, 10) == (ErrorCode.NONE, 4)
    assert resolve_offset(10, 10) == (ErrorCode.NONE, 10)
    assert resolve_offset(11, 10)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert resolve_offset(-2, 10)[0] == ErrorCode.OFFSET_OUT_OF_RANGE


def test_low_watermark_is_the_lowest_start_of_live_replicas() -> None:
    followers = {2: FollowerState(log_start_offset=3), 3: FollowerState(log_start_offset=1)}
    assert low_watermark(5, followers, lambda _: True) == 1
    assert low_watermark(5, followers, lambda b: b != 3) == 3  # broker 3 is not alive
    assert low_watermark(5, {2: FollowerState()}, lambda _: True) == -1  # not fetched since leading
    assert low_watermark(5, {}, lambda _: True) == 5


def fetch(node: Node, replica: int, offset: int, log_start: int):
    return node.replicas.read_for_follower(
        replica, TOPIC, 0, offset, 1 << 20, current_leader_epoch=node.partition.leader_epoch,
        last_fetched_epoch=0, log_start_offset=log_start,
    )  # fmt: skip


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Node]:
    node = Node(tmp_path, 1, FakeClock())
    node.set_image(image(1))
    node.replicas.append(TOPIC, 0, batch(10))
    fetch(node, 2, 10, 0)
    fetch(node, 3, 10, 0)
    assert node.partition.high_watermark == 10
    yield node
    node.close()


def test_the_answer_waits_for_every_live_replicas_log_start(leader: Node) -> None:
    async def scenario() -> tuple[int, int]:
        assert leader.replicas.delete_records(TOPIC, 0, 6) == 6
        assert leader.partition.log.log_start_offset == 6  # the leader moved at once
        waiting = asyncio.ensure_future(leader.replicas.wait_for_low_watermark(TOPIC, 0, 6, 10_000))
        await asyncio.sleep(0)
        fetch(leader, 2, 10, 6)
        await asyncio.sleep(0)
        assert not waiting.done()  # broker 3 still starts at 0
        fetch(leader, 3, 10, 6)
        return await waiting

    assert asyncio.run(scenario()) == (ErrorCode.NONE, 6)


def test_a_replica_on_a_dead_broker_is_not_waited_for(leader: Node) -> None:
    async def scenario() -> tuple[int, int]:
        leader.replicas.delete_records(TOPIC, 0, 4)
        waiting = asyncio.ensure_future(leader.replicas.wait_for_low_watermark(TOPIC, 0, 4, 10_000))
        fetch(leader, 2, 10, 4)
        await asyncio.sleep(0)
        assert not waiting.done()
        without_3 = {n: b for n, b in BROKERS.items() if n != 3}
        leader.set_image(dataclasses.replace(image(1, partition_epoch=1), brokers=without_3))  # broker 3 fenced
        return await waiting

    assert asyncio.run(scenario()) == (ErrorCode.NONE, 4)


def test_timeout_and_lost_leadership(leader: Node) -> None:
    async def scenario() -> tuple[tuple[int, int], tuple[int, int]]:
        leader.replicas.delete_records(TOPIC, 0, 3)
        timed_out = await leader.replicas.wait_for_low_watermark(TOPIC, 0, 3, 20)
        waiting = asyncio.ensure_future(leader.replicas.wait_for_low_watermark(TOPIC, 0, 3, 10_000))
        await asyncio.sleep(0)
        leader.set_image(image(2, epoch=1, partition_epoch=1))
        return timed_out, await waiting

    assert asyncio.run(scenario()) == ((ErrorCode.REQUEST_TIMED_OUT, -1), (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))


def test_kafka_refusals(leader: Node) -> None:
    def code(topic: str, offset: int) -> int:
        with pytest.raises(PartitionError) as info:
            leader.replicas.delete_records(topic, 0, offset)
        return info.value.code

    assert code(TOPIC, 11) == ErrorCode.OFFSET_OUT_OF_RANGE  # above the high watermark
    assert code(TOPIC, -5) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert code("__consumer_offsets", 0) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert code("nope", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    leader.partition.log.config = LogConfig(cleanup_policy=("compact",))
    assert code(TOPIC, 1) == ErrorCode.POLICY_VIOLATION
    leader.partition.log.config = LogConfig(cleanup_policy=("compact", "delete"))
    assert leader.replicas.delete_records(TOPIC, 0, -1) == 10  # -1: the high watermark
    assert leader.partition.log.log_start_offset == 10


def test_a_follower_follows_the_leaders_log_start_up_to_its_high_watermark(tmp_path: Path) -> None:
    clock = FakeClock()
    leader, follower = Node(tmp_path, 1, clock), Node(tmp_path, 2, clock)
    try:
        leader.set_image(image(1))
        follower.set_image(image(1))
        leader.replicas.append(TOPIC, 0, batch(4))
        read = fetch(leader, 2, 0, follower.partition.log.log_start_offset)
        follower.partition.append_as_follower(read.records.read_bytes())
        follower.partition.follower_learns(read.high_watermark, read.log_start_offset)
        fetch(leader, 2, 4, 0)
        fetch(leader, 3, 4, 0)
        leader.replicas.append(TOPIC, 0, batch(4))
        leader.replicas.delete_records(TOPIC, 0, 4)
        follower.partition.follower_learns(4, 6)  # a leader start above this follower's HW: capped
        assert follower.partition.log.log_start_offset == 4
        follower.partition.follower_learns(4, 2)  # never moves back
        assert follower.partition.log.log_start_offset == 4
    finally:
        leader.close()
        follower.close()
