"""Transaction coordinator logic with an injected clock (Kafka 3.7 ``TransactionCoordinator`` rules;
Kafka documentation §4.6 "Message Delivery Semantics", transactions: the coordinator writes the transaction
log and marks every partition
committed or aborted with control messages)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.coordinator.txn.metadata import MAX_EPOCH
from broker.coordinator.txn.producer_ids import BLOCK_SIZE, ProducerIdManager
from broker.coordinator.txn.records import TxnState, partition_for
from broker.metadata.image import BrokerInfo
from pyspark_log.wire.errors import ErrorCode
from tests.waiting import wait_until_async

from .helpers import TXN_ID, TXN_PARTITIONS, FakeSender, Harness, complete, topic_image

S = TxnState


def test_idempotent_producers_get_fresh_ids_with_epoch_0() -> None:
    h = Harness()
    first, second = h.init(None), h.init(None)
    assert (first.error, first.producer_epoch, second.producer_epoch) == (0, 0, 0)
    assert first.producer_id != second.producer_id


def test_new_transactional_id_gets_epoch_0_and_reinit_bumps() -> None:
    h = Harness()
    first = h.init()
    assert (first.error, first.producer_epoch) == (ErrorCode.NONE, 0)
    second = h.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert h.txn.state is S.EMPTY


@pytest.mark.parametrize("timeout", [0, -5, 60_001])
def test_transaction_timeout_above_the_maximum_is_refused(timeout: int) -> None:
    assert Harness().init(timeout_ms=timeout).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_invalid_requests() -> None:
    h = Harness()
    assert h.init("").error == ErrorCode.INVALID_REQUEST
    assert h.init(pid=5).error == ErrorCode.INVALID_REQUEST  # id without epoch
    assert complete(h.coordinator.end_txn("", 1, 0, commit=True)) == ErrorCode.INVALID_REQUEST


def test_commit_writes_markers_to_every_partition_then_completes() -> None:
    h = Harness()
    pid = h.init().producer_id
    assert h.begin(("t", 0), ("t", 2)) == ErrorCode.NONE
    assert h.begin(("u", 1)) == ErrorCode.NONE
    assert h.txn.state is S.ONGOING
    assert h.end(commit=True) == ErrorCode.NONE
    markers = {(m.topic, m.partition, m.producer_id, m.producer_epoch, m.commit) for m in h.appender.markers}
    assert markers == {("t", 0, pid, 0, True), ("t", 2, pid, 0, True), ("u", 1, pid, 0, True)}
    assert (h.txn.state, h.txn.partitions) == (S.COMPLETE_COMMIT, set())


def test_end_txn_outcomes() -> None:
    """A retried completed outcome succeeds; the other outcome is INVALID_TXN_STATE; EndTxn of an
    Empty transaction is INVALID_TXN_STATE (Kafka ``handleEndTransaction``)."""
    h = Harness()
    h.init()
    assert h.end(commit=True) == ErrorCode.INVALID_TXN_STATE
    h.begin()
    assert h.end(commit=False) == ErrorCode.NONE
    assert h.end(commit=False) == ErrorCode.NONE
    assert h.end(commit=True) == ErrorCode.INVALID_TXN_STATE
    h.begin()
    h.end(commit=True)
    assert h.end(commit=True) == ErrorCode.NONE
    assert h.end(commit=False) == ErrorCode.INVALID_TXN_STATE


def test_end_txn_needs_the_current_ids() -> None:
    h = Harness()
    result = h.init()
    h.begin()
    assert (
        complete(h.coordinator.end_txn(TXN_ID, result.producer_id + 1, 0, commit=True))
        == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert complete(h.coordinator.end_txn(TXN_ID, result.producer_id, 1, commit=True)) == ErrorCode.PRODUCER_FENCED
    assert complete(h.coordinator.end_txn("unknown", 1, 0, commit=True)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # any connection that names the ids may end it (a Spark driver committing an executor's txn)
    assert complete(h.coordinator.end_txn(TXN_ID, result.producer_id, 0, commit=True)) == ErrorCode.NONE


def test_while_markers_are_pending_the_transaction_is_busy() -> None:
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    h.begin(("t", 0), ("t", 1))
    assert h.end(commit=True) == ErrorCode.NONE  # PrepareCommit is in the log: the commit will happen
    assert h.txn.state is S.PREPARE_COMMIT
    assert h.end(commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end(commit=False) == ErrorCode.INVALID_TXN_STATE
    assert h.begin(("t", 2)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.init().error == ErrorCode.CONCURRENT_TRANSACTIONS
    del h.appender.fail[("t", 0)]
    h.advance(150)  # the marker retry
    assert h.txn.state is S.COMPLETE_COMMIT
    assert sorted((m.topic, m.partition) for m in h.appender.markers) == [("t", 0), ("t", 1)]


def test_a_deleted_topic_drops_out_of_the_markers() -> None:
    h = Harness()
    h.init()
    h.begin(("t", 0), ("u", 0))
    h.image = h.image.without_topic("u")
    h.end(commit=False)
    assert h.txn.state is S.COMPLETE_ABORT
    assert [(m.topic, m.commit) for m in h.appender.markers] == [("t", False)]


def test_init_on_an_ongoing_transaction_aborts_and_fences() -> None:
    """KIP-98 zombie fencing: the new instance's InitProducerId aborts the open transaction with a
    bumped epoch and answers CONCURRENT_TRANSACTIONS; its retry bumps again; the old instance's
    later requests are PRODUCER_FENCED."""
    h = Harness()
    old = h.init()
    h.begin(("t", 0))
    assert h.init().error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert [(m.producer_epoch, m.commit) for m in h.appender.markers] == [(1, False)]
    assert (h.txn.state, h.txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    new = h.init()
    assert (new.error, new.producer_id, new.producer_epoch) == (ErrorCode.NONE, old.producer_id, 2)
    assert complete(h.coordinator.add_partitions(TXN_ID, old.producer_id, 0, [("t", 1)])) == ErrorCode.PRODUCER_FENCED
    assert complete(h.coordinator.end_txn(TXN_ID, old.producer_id, 0, commit=True)) == ErrorCode.PRODUCER_FENCED


def test_kip360_epoch_bump_of_the_current_producer() -> None:
    h = Harness()
    first = h.init()
    bumped = h.init(pid=first.producer_id, epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 1)
    retry = h.init(pid=first.producer_id, epoch=0)  # the response was lost: same answer
    assert (retry.error, retry.producer_epoch) == (ErrorCode.NONE, 1)
    assert h.init(pid=first.producer_id + 99, epoch=1).error == ErrorCode.PRODUCER_FENCED
    h.init()  # another instance: forgets the last epoch
    assert h.init(pid=first.producer_id, epoch=1).error == ErrorCode.PRODUCER_FENCED


def test_exhausted_epoch_gets_a_new_producer_id() -> None:
    h = Harness()
    first = h.init()
    h.txn.producer_epoch = MAX_EPOCH - 1
    rotated = h.init()
    assert rotated.producer_id != first.producer_id
    assert rotated.producer_epoch == 0


def test_add_partitions_rules() -> None:
    h = Harness()
    result = h.init()
    assert complete(h.coordinator.add_partitions("nope", 1, 0, [("t", 0)])) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert (
        complete(h.coordinator.add_partitions(TXN_ID, result.producer_id, 1, [("t", 0)])) == ErrorCode.PRODUCER_FENCED
    )
    assert h.begin(("t", 0)) == ErrorCode.NONE
    records = len(h.log.batches[partition_for(TXN_ID, TXN_PARTITIONS)])
    assert h.begin(("t", 0)) == ErrorCode.NONE  # already in: answered without a write
    assert len(h.log.batches[partition_for(TXN_ID, TXN_PARTITIONS)]) == records
    verified = h.coordinator.verify_partitions(TXN_ID, result.producer_id, 0, [("t", 0), ("t", 1)])
    assert verified == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.INVALID_TXN_STATE}


def test_store_failure_changes_nothing() -> None:
    h = Harness()
    h.init()
    h.log.fail_with = ErrorCode.NOT_COORDINATOR
    assert h.begin(("t", 0)) == ErrorCode.NOT_COORDINATOR
    assert (h.txn.state, h.txn.pending) == (S.EMPTY, None)
    h.log.fail_with = None
    assert h.begin(("t", 0)) == ErrorCode.NONE


def test_not_coordinator_and_loading() -> None:
    h = Harness()
    h.init()
    h.begin()
    h.end(commit=True)
    restarted = Harness(log=h.log, clock=h.clock)
    restarted.coordinator = restarted.new_coordinator()
    assert restarted.init().error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    restarted.coordinator.manager.load_all()
    assert restarted.txn.state is S.COMPLETE_COMMIT
    mine = partition_for(TXN_ID, TXN_PARTITIONS)
    restarted.coordinator.manager.set_partitions(TXN_PARTITIONS, {p: 0 for p in range(TXN_PARTITIONS) if p != mine})
    assert restarted.init().error == ErrorCode.NOT_COORDINATOR
    assert TXN_ID not in restarted.coordinator.manager.txns


def test_restart_keeps_state_and_finishes_a_prepared_commit() -> None:
    """Kafka documentation §4.6 "Message Delivery Semantics": the state lives in
    __transaction_state; a coordinator that loads a transaction in
    PrepareCommit writes its markers (again) and completes it, as Kafka's loader does."""
    h = Harness()
    first = h.init()
    h.appender.fail[("t", 1)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    h.begin(("t", 0), ("t", 1))
    h.end(commit=True)
    assert h.txn.state is S.PREPARE_COMMIT
    h.coordinator.shutdown()
    h.appender.fail.clear()
    h.appender.markers.clear()
    h.coordinator = h.new_coordinator()
    h.coordinator.manager.load_all()
    assert h.txn.state is S.COMPLETE_COMMIT
    assert {(m.topic, m.partition, m.commit) for m in h.appender.markers} == {("t", 0, True), ("t", 1, True)}
    again = h.init()
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    h = Harness()
    old = h.init(timeout_ms=2_000)
    h.begin(("t", 0))
    h.advance(1_500)
    assert h.txn.state is S.ONGOING
    h.advance(1_600)  # past the timeout, and the next abort check has run
    assert (h.txn.state, h.txn.producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert [(m.producer_epoch, m.commit) for m in h.appender.markers] == [(1, False)]
    assert complete(h.coordinator.end_txn(TXN_ID, old.producer_id, 0, commit=True)) == ErrorCode.PRODUCER_FENCED


def test_idle_transactional_ids_expire() -> None:
    h = Harness()
    h.init()
    h.init("other")
    complete(h.coordinator.add_partitions("other", h.coordinator.manager.txns["other"].producer_id, 0, [("t", 0)]))
    h.clock.now += 100_001
    assert complete(h.coordinator.expire_transactional_ids()) == 1  # the Ongoing one stays
    assert TXN_ID not in h.coordinator.manager.txns
    restarted = Harness(log=h.log, clock=h.clock)
    restarted.coordinator.manager.load_all()
    assert set(restarted.coordinator.manager.txns) == {"other"}  # the tombstone is in the log


def test_markers_for_partitions_led_elsewhere_go_through_write_txn_markers() -> None:
    h = Harness()
    h.image = h.image.with_topic(topic_image("remote", 2, leader=2))
    h.image = h.image.with_broker(BrokerInfo(2, "10.0.0.2", 9093))
    sender = FakeSender()

    async def scenario() -> None:
        h.coordinator = h.new_coordinator(sender)
        h.init()
        h.begin(("t", 0), ("remote", 1))
        assert h.end(commit=True) == ErrorCode.NONE
        assert h.txn.state is S.PREPARE_COMMIT  # the remote marker is in flight
        await wait_until_async(lambda: h.txn.state is S.COMPLETE_COMMIT, what="the remote marker's answer")
        assert h.txn.state is S.COMPLETE_COMMIT

    asyncio.run(scenario())
    host, port, request = sender.requests[0]
    assert (host, port, request.partitions, request.commit) == ("10.0.0.2", 9093, (("remote", 1),), True)
    assert [(m.topic, m.partition) for m in h.appender.markers] == [("t", 0)]


def test_fenced_marker_abandons_the_job() -> None:
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.INVALID_PRODUCER_EPOCH
    h.begin(("t", 0))
    h.end(commit=True)
    assert not h.coordinator.markers.has_pending
    assert h.txn.state is S.PREPARE_COMMIT


def test_producer_ids_are_unique_across_restarts_and_nodes(tmp_path: Path) -> None:
    ids = ProducerIdManager(3, tmp_path)
    first = [ids.generate() for _ in range(5)]
    restarted = ProducerIdManager(3, tmp_path)
    after = restarted.generate()
    assert after > max(first)
    assert after & 0xFFFFFFFF == BLOCK_SIZE  # the next block: the rest of the first is skipped
    assert {pid >> 32 for pid in [*first, after]} == {3}
    (tmp_path / "node4").mkdir()
    assert ProducerIdManager(4, tmp_path / "node4").generate() >> 32 == 4


def test_coordinator_epoch_is_the_partition_leader_epoch() -> None:
    h = Harness()
    mine = partition_for(TXN_ID, TXN_PARTITIONS)
    h.coordinator.manager.set_partitions(TXN_PARTITIONS, {p: (7 if p == mine else 0) for p in range(TXN_PARTITIONS)})
    h.init()
    h.begin(("t", 0))
    h.end(commit=True)
    assert h.appender.markers[0].coordinator_epoch == 7
