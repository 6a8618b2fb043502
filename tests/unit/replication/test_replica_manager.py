"""``ReplicaManager`` and ``Partition`` over real logs, with hand-built metadata images and an
injected clock: roles, acks=all, min.insync.replicas, follower fetches, divergence, checkpoints.

Kafka documentation §4.7 "Replication" and Kafka documentation §3.3 "Producer Configs" (`acks`) through the
same calls the request handlers make.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from broker.controller.partition_changes import IsrChange
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.errors import OffsetOutOfRangeError
from broker.log.manager import LogManager
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.replication.replica_manager import PartitionError, ReplicaManager, ReplicationConfig
from pyspark_log.records.batch import decode_batches
from pyspark_log.wire.errors import ErrorCode
from tests.unit.log.helpers import FakeClock, batch

TOPIC = "t"
TOPIC_ID = uuid.uuid4()
BROKERS = {n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)}


def image(leader: int, isr: Sequence[int] = (1, 2, 3), *, epoch: int = 0, partition_epoch: int = 0) -> MetadataImage:
    part = PartitionImage(0, leader, epoch, (1, 2, 3), tuple(isr), partition_epoch)
    return MetadataImage("c", 1, BROKERS, {TOPIC: TopicImage(TOPIC, TOPIC_ID, {0: part})}, {TOPIC_ID: TOPIC})


class Node:
    """One broker's ReplicaManager with a settable image and a recording AlterPartition."""

    def __init__(self, root: Path, node_id: int, clock: FakeClock, min_isr: int = 1) -> None:
        self.clock = clock
        self.logs = LogManager(LogManagerConfig(log_dirs=(str(root / f"n{node_id}"),)), LogConfig(), clock)
        self.logs.startup()
        self.current: MetadataImage | None = None
        self.proposals: list[IsrChange] = []
        self.alter_fails: Exception | None = None
        self.alter_code = ErrorCode.NONE
        self.replicas = ReplicaManager(
            node_id, self.logs, lambda: self.current, lambda _: LogConfig(min_insync_replicas=min_isr),
            clock_ms=clock, config=ReplicationConfig(lag_time_max_ms=1000), alter_isr=self._alter,
        )  # fmt: skip

    async def _alter(self, changes: Sequence[IsrChange]) -> dict[tuple[uuid.UUID, int], int]:
        self.proposals.extend(changes)
        if self.alter_fails is not None:
            raise self.alter_fails
        return {(c.topic_id, c.partition): self.alter_code for c in changes}

    def set_image(self, new: MetadataImage) -> None:
        old, self.current = self.current, new
        self.replicas.on_image_change(old, new)

    @property
    def partition(self):
        hosted = self.replicas.get_partition(TOPIC, 0)
        assert hosted is not None
        return hosted

    def close(self) -> None:
        self.logs.shutdown()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def leader(tmp_path: Path, clock: FakeClock) -> Iterator[Node]:
    node = Node(tmp_path, 1, clock, min_isr=2)
    node.set_image(image(1))
    yield node
    node.close()


def follower_fetch(node: Node, replica: int, offset: int, last_epoch: int = 0):
    return node.replicas.read_for_follower(
        replica, TOPIC, 0, offset, 1 << 20, current_leader_epoch=node.partition.leader_epoch,
        last_fetched_epoch=last_epoch,
    )  # fmt: skip


def test_the_leader_stamps_its_epoch_and_the_high_watermark_waits_for_the_isr(leader: Node):
    """§4.7 "A message is considered committed when all in sync replicas ... have applied it"."""
    leader.set_image(image(1, epoch=4))
    info = leader.replicas.append(TOPIC, 0, batch(3))
    assert (info.first_offset, info.last_offset) == (0, 2)
    ((header, _),) = decode_batches(leader.partition.log.read(0, 1 << 20).read_bytes())
    assert header.partition_leader_epoch == 4
    assert leader.partition.high_watermark == 0
    assert leader.replicas.read(TOPIC, 0, 0, 1 << 20, read_committed=False).records.size == 0
    follower_fetch(leader, 2, 3, last_epoch=4)
    assert leader.partition.high_watermark == 0  # broker 3 has not fetched yet
    follower_fetch(leader, 3, 2, last_epoch=4)
    assert leader.partition.high_watermark == 2
    follower_fetch(leader, 3, 3, last_epoch=4)
    assert leader.partition.high_watermark == 3
    assert leader.replicas.read(TOPIC, 0, 0, 1 << 20, read_committed=False).high_watermark == 3


def test_acks_all_completes_when_the_isr_has_the_batch_and_times_out_otherwise(leader: Node):
    async def scenario() -> tuple[int, int]:
        info = leader.replicas.append(TOPIC, 0, batch(2), acks=-1)
        waiting = asyncio.ensure_future(leader.replicas.wait_for_acks(TOPIC, 0, info.last_offset, 10_000))
        await asyncio.sleep(0)
        assert not waiting.done()
        follower_fetch(leader, 2, 2)
        follower_fetch(leader, 3, 2)
        done = await waiting
        late = leader.replicas.append(TOPIC, 0, batch(1), acks=-1)
        timed_out = await leader.replicas.wait_for_acks(TOPIC, 0, late.last_offset, 20)
        return done, timed_out

    assert asyncio.run(scenario()) == (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT)


def test_acks_all_min_insync_replicas_refuses_acks_all_before_the_append(leader: Node):
    leader.set_image(image(1, isr=(1,), partition_epoch=1))
    with pytest.raises(PartitionError) as info:
        leader.replicas.append(TOPIC, 0, batch(1), acks=-1)
    assert info.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.partition.log.log_end_offset == 0  # nothing written
    assert leader.replicas.append(TOPIC, 0, batch(1), acks=1).first_offset == 0  # acks=1 still works


def test_the_isr_shrinking_while_a_produce_waits_answers_not_enough_replicas_after_append(leader: Node):
    async def scenario() -> int:
        info = leader.replicas.append(TOPIC, 0, batch(1), acks=-1)
        waiting = asyncio.ensure_future(leader.replicas.wait_for_acks(TOPIC, 0, info.last_offset, 10_000))
        await asyncio.sleep(0)
        leader.set_image(image(1, isr=(1,), partition_epoch=1))  # both followers dropped
        return await waiting

    assert asyncio.run(scenario()) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_losing_leadership_fails_waiting_produces_with_not_leader(leader: Node):
    async def scenario() -> int:
        info = leader.replicas.append(TOPIC, 0, batch(1), acks=-1)
        waiting = asyncio.ensure_future(leader.replicas.wait_for_acks(TOPIC, 0, info.last_offset, 10_000))
        await asyncio.sleep(0)
        leader.set_image(image(2, epoch=1, partition_epoch=1))
        return await waiting

    assert asyncio.run(scenario()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(PartitionError) as info:
        leader.replicas.append(TOPIC, 0, batch(1))
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_lagging_follower_is_proposed_out_and_a_caught_up_one_back_in(leader: Node, clock: FakeClock):
    """§4.7: stuck or lagging replicas leave the ISR after replica.lag.time.max.ms; KIP-497."""

    async def scenario() -> None:
        leader.replicas.append(TOPIC, 0, batch(5))
        follower_fetch(leader, 2, 5)
        follower_fetch(leader, 3, 1)
        clock.advance(1500)
        follower_fetch(leader, 2, 5)
        assert leader.replicas.check_isr() == 1
        await asyncio.sleep(0)
        assert leader.proposals[-1].new_isr == (1, 2)
        assert leader.proposals[-1].partition_epoch == 0
        leader.set_image(image(1, isr=(1, 2), partition_epoch=1))
        assert leader.partition.high_watermark == 5  # broker 3 no longer holds it back
        follower_fetch(leader, 3, 5)  # caught up: proposed back in
        await asyncio.sleep(0)
        assert leader.proposals[-1].new_isr == (1, 2, 3)

    asyncio.run(scenario())


def test_an_isr_expansion_whose_outcome_is_unknown_stays_counted_until_the_metadata_decides(
    leader: Node, clock: FakeClock
):
    """The sim's defect 4: the controller may have applied an expansion whose answer was lost; the
    leader must keep the proposed member in its maximal ISR (Kafka's rule), or it acknowledges
    records that member — maybe the next leader — does not have."""
    from broker.controller.errors import MetadataError

    async def scenario() -> None:
        leader.set_image(image(1, isr=(1, 2), partition_epoch=1))
        leader.replicas.append(TOPIC, 0, batch(4))
        follower_fetch(leader, 2, 4)
        leader.alter_fails = MetadataError(ErrorCode.REQUEST_TIMED_OUT, "no answer")
        follower_fetch(leader, 3, 4)  # caught up: proposed back in; the answer never comes
        await asyncio.sleep(0)
        assert leader.partition.pending_isr == (1, 2, 3)
        leader.replicas.append(TOPIC, 0, batch(2))
        follower_fetch(leader, 2, 6)
        assert leader.partition.high_watermark == 4  # broker 3 may be in the ISR: wait for it
        clock.advance(2000)
        leader.alter_fails = None
        assert leader.replicas.check_isr() == 1  # the same proposal again
        assert leader.proposals[-1].new_isr == (1, 2, 3)
        leader.set_image(image(1, isr=(1, 2, 3), partition_epoch=2))
        assert leader.partition.pending_isr is None

    asyncio.run(scenario())


def test_an_isr_expansion_the_controller_refuses_is_dropped(leader: Node):
    async def scenario() -> None:
        leader.set_image(image(1, isr=(1, 2), partition_epoch=1))
        leader.replicas.append(TOPIC, 0, batch(1))
        leader.alter_code = ErrorCode.INELIGIBLE_REPLICA
        follower_fetch(leader, 2, 1)
        follower_fetch(leader, 3, 1)
        await asyncio.sleep(0)
        assert leader.partition.pending_isr is None

    asyncio.run(scenario())


def test_a_follower_appends_the_leaders_bytes_and_learns_its_epochs(tmp_path: Path, clock: FakeClock):
    leader = Node(tmp_path, 1, clock)
    follower = Node(tmp_path, 2, clock)
    try:
        leader.set_image(image(1, epoch=3))
        follower.set_image(image(1, epoch=3))
        leader.replicas.append(TOPIC, 0, batch(2))
        leader.replicas.append(TOPIC, 0, batch(3))
        read = follower_fetch(leader, 2, 0, last_epoch=-1)
        follower.partition.append_as_follower(read.records.read_bytes())
        follower.partition.follower_learns(read.high_watermark, read.log_start_offset)
        assert follower.partition.log.log_end_offset == 5
        assert follower.partition.epochs.latest_epoch == 3
        copied = follower.partition.log.read(0, 1 << 20).read_bytes()
        assert copied == leader.partition.log.read(0, 1 << 20).read_bytes()
        with pytest.raises(PartitionError):
            follower.replicas.append(TOPIC, 0, batch(1))
    finally:
        leader.close()
        follower.close()


def test_a_follower_with_records_the_leader_never_had_is_told_where_to_truncate(tmp_path: Path, clock: FakeClock):
    """Kafka documentation §5.4.4 "Guarantees": a replica that accepted message 6, failed, and came back after another
    message 6 was written must end with the leader's message 6."""
    old = Node(tmp_path, 1, clock)
    new = Node(tmp_path, 2, clock)
    try:
        old.set_image(image(1, epoch=0))
        new.set_image(image(1, epoch=0))
        old.replicas.append(TOPIC, 0, batch(6))
        new.partition.append_as_follower(follower_fetch(old, 2, 0, last_epoch=-1).records.read_bytes())
        old.replicas.append(TOPIC, 0, batch(1, tag=9))  # message 6 on the old leader only (acks=1)
        new.set_image(image(2, epoch=1, partition_epoch=1))
        new.replicas.append(TOPIC, 0, batch(1, tag=7))  # another message 6, epoch 1
        old.set_image(image(2, epoch=1, partition_epoch=1))
        answer = follower_fetch(new, 1, 7, last_epoch=0)
        assert answer.diverging_epoch == (0, 6)
        from broker.replication.fetcher import ReplicaFetchers

        ReplicaFetchers._truncate_on_divergence(old.partition, *answer.diverging_epoch)
        assert old.partition.log.log_end_offset == 6
        answer = follower_fetch(new, 1, 6, last_epoch=0)
        assert answer.diverging_epoch is None
        old.partition.append_as_follower(answer.records.read_bytes())
        assert old.partition.log.read(0, 1 << 20).read_bytes() == new.partition.log.read(0, 1 << 20).read_bytes()
    finally:
        old.close()
        new.close()


def test_a_follower_fetch_outside_the_log_is_out_of_range(leader: Node):
    leader.replicas.append(TOPIC, 0, batch(2))
    with pytest.raises(OffsetOutOfRangeError):
        follower_fetch(leader, 2, 5, last_epoch=-1)
    with pytest.raises(PartitionError) as info:
        follower_fetch(leader, 9, 0, last_epoch=-1)  # not a replica
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_high_watermarks_and_epochs_survive_a_restart(tmp_path: Path, clock: FakeClock):
    node = Node(tmp_path, 1, clock)
    node.set_image(image(1, isr=(1,), epoch=2))
    node.replicas.append(TOPIC, 0, batch(4))
    node.replicas.write_checkpoints()
    node.close()
    again = Node(tmp_path, 1, clock)
    try:
        again.set_image(image(2, isr=(1, 2), epoch=3, partition_epoch=1))  # now a follower
        assert again.partition.high_watermark == 4
        assert again.partition.epochs.latest_epoch == 2
    finally:
        again.close()


def test_a_restart_replaying_a_stale_leadership_records_no_epoch_until_it_serves(tmp_path: Path, clock: FakeClock):
    """Chaos finding (issue 31, the power-loss run, seed 7): a broker whose log lost everything
    unsynced restarted, and its metadata log, replayed before it caught up, still named it the
    leader at epoch 24. It recorded "epoch 24 begins at offset 0" in its epoch cache, then followed
    the real leader and copied batches of epochs 0-23 that the cache never learnt. As leader later
    it answered a follower asking about epoch 21 "it ends at 0", and that follower truncated to 0
    and fetched again for ever. Before the broker serves, a leadership from the image records no
    epoch; once it serves, the leaderships it still holds record theirs at the log end."""
    stale = Node(tmp_path, 1, clock)
    try:
        stale.replicas.serving = False  # replaying its metadata log at start-up
        stale.set_image(image(1, epoch=24))
        assert stale.partition.is_leader
        assert stale.partition.epochs.entries == []
        stale.set_image(image(2, epoch=25))  # caught up: another broker leads
        leader = Node(tmp_path, 2, clock)
        try:
            leader.set_image(image(2, epoch=5))
            for _ in range(3):
                leader.replicas.append(TOPIC, 0, batch(2))
            read = follower_fetch(leader, 1, 0, last_epoch=stale.partition.epochs.latest_epoch)
            assert read.diverging_epoch is None
            stale.partition.append_as_follower(read.records.read_bytes())
            assert [(e.epoch, e.start_offset) for e in stale.partition.epochs.entries] == [(5, 0)]
        finally:
            leader.close()
        stale.replicas.start_serving()
        assert [(e.epoch, e.start_offset) for e in stale.partition.epochs.entries] == [(5, 0)]  # a follower

        again = Node(tmp_path / "again", 3, clock)
        try:
            again.replicas.serving = False
            again.set_image(image(3, epoch=7))
            again.replicas.start_serving()  # it still leads once caught up: epoch 7 begins at its log end
            assert [(e.epoch, e.start_offset) for e in again.partition.epochs.entries] == [(7, 0)]
        finally:
            again.close()
    finally:
        stale.close()
