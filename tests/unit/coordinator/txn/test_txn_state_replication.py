"""The transaction coordinator answers only once its ``__transaction_state`` record is committed
(acks=all, as Kafka's ``TransactionStateManager.appendTransactionToLog``).

Regression for the chaos run in which EndTxn was acknowledged while its PrepareCommit record was
on the coordinator's leader alone: a failover lost the record and the transaction hung. Here the
wait for replication is gated by the test: until it opens, the client has no answer and the
transactional id is busy (CONCURRENT_TRANSACTIONS); a failed wait leaves the state unchanged
and answers Kafka's code (COORDINATOR_NOT_AVAILABLE for a timeout or too few in-sync replicas,
NOT_COORDINATOR for a lost leadership)."""

from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.txn.records import TxnState, partition_for
from pyspark_log.wire.errors import ErrorCode

from .helpers import TXN_ID, TXN_PARTITIONS, Harness, complete

S = TxnState


class GatedCommits:
    """``wait_committed`` whose answers the test releases one by one."""

    def __init__(self) -> None:
        self.waiting: list[tuple[int, int, asyncio.Future[int]]] = []

    async def __call__(self, partition: int, offset: int, timeout_ms: int) -> int:
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append((partition, offset, answer))
        return await answer

    def release(self, code: int = ErrorCode.NONE) -> tuple[int, int]:
        partition, offset, answer = self.waiting.pop(0)
        answer.set_result(int(code))
        return partition, offset


def gated_harness() -> tuple[Harness, GatedCommits]:
    h = Harness()
    h.init()
    h.begin(("t", 0))
    gate = GatedCommits()
    h.coordinator.manager.wait_committed = gate
    return h, gate


async def until(condition: object) -> None:
    for _ in range(100):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError("the coordinator did not reach the expected state")


def test_end_txn_is_answered_after_its_record_is_committed() -> None:
    h, gate = gated_harness()
    txn = h.txn

    async def scenario() -> None:
        ending = asyncio.ensure_future(h.coordinator.end_txn(TXN_ID, txn.producer_id, txn.producer_epoch, commit=True))
        await until(lambda: gate.waiting)
        assert not ending.done()  # no answer while only the leader has PrepareCommit
        assert (txn.state, txn.pending) == (S.ONGOING, S.PREPARE_COMMIT)
        again = await h.coordinator.end_txn(TXN_ID, txn.producer_id, txn.producer_epoch, commit=True)
        assert again == ErrorCode.CONCURRENT_TRANSACTIONS
        assert h.appender.markers == []  # no marker before the decision is committed
        partition, _ = gate.release()
        assert partition == partition_for(TXN_ID, TXN_PARTITIONS)
        assert await ending == ErrorCode.NONE
        assert txn.state is S.PREPARE_COMMIT
        assert [(m.topic, m.partition, m.commit) for m in h.appender.markers] == [("t", 0, True)]
        await until(lambda: gate.waiting)  # CompleteCommit waits too
        gate.release()
        await until(lambda: txn.state is S.COMPLETE_COMMIT)

    h.coordinator.manager.spawn = lambda work, name: asyncio.ensure_future(work)  # type: ignore[method-assign]
    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("waited", "answered"),
    [
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_a_failed_wait_changes_nothing(waited: int, answered: int) -> None:
    h, gate = gated_harness()
    txn = h.txn

    async def scenario() -> int:
        ending = asyncio.ensure_future(h.coordinator.end_txn(TXN_ID, txn.producer_id, txn.producer_epoch, commit=True))
        await until(lambda: gate.waiting)
        gate.release(waited)
        return await ending

    assert asyncio.run(scenario()) == answered
    assert (txn.state, txn.pending) == (S.ONGOING, None)
    assert h.appender.markers == []
    h.coordinator.manager.wait_committed = h.wait_committed
    assert h.end(commit=True) == ErrorCode.NONE  # the client's retry ends it
    assert txn.state is S.COMPLETE_COMMIT


def test_leadership_lost_during_the_wait_answers_not_coordinator() -> None:
    """The partition is unloaded while the record waits: the old cache is gone, the answer is
    NOT_COORDINATOR (the client finds the new coordinator, which loads what was committed)."""
    h, gate = gated_harness()
    txn = h.txn

    async def scenario() -> int:
        ending = asyncio.ensure_future(h.coordinator.end_txn(TXN_ID, txn.producer_id, txn.producer_epoch, commit=True))
        await until(lambda: gate.waiting)
        h.coordinator.manager.set_partitions(TXN_PARTITIONS, {})
        gate.release()
        return await ending

    assert asyncio.run(scenario()) == ErrorCode.NOT_COORDINATOR
    assert h.appender.markers == []


def test_add_partitions_and_init_wait_for_the_commit_too() -> None:
    h = Harness()
    gate = GatedCommits()
    h.coordinator.manager.wait_committed = gate

    async def scenario() -> None:
        init = asyncio.ensure_future(h.coordinator.init_producer_id(TXN_ID, 10_000))
        await until(lambda: gate.waiting)
        assert not init.done()
        gate.release()
        result = await init
        assert result.error == ErrorCode.NONE
        add = asyncio.ensure_future(h.coordinator.add_partitions(TXN_ID, result.producer_id, 0, [("t", 1)]))
        await until(lambda: gate.waiting)
        assert not add.done()
        assert h.txn.state is S.EMPTY
        gate.release(ErrorCode.REQUEST_TIMED_OUT)
        assert await add == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (h.txn.state, h.txn.partitions) == (S.EMPTY, set())

    asyncio.run(scenario())


def test_expired_ids_are_removed_only_after_their_tombstones_commit() -> None:
    h = Harness()
    h.init()
    h.init("other")
    h.clock.now += 100_001
    gate = GatedCommits()
    h.coordinator.manager.wait_committed = gate

    async def scenario() -> int:
        expiring = asyncio.ensure_future(h.coordinator.expire_transactional_ids())
        await until(lambda: gate.waiting)
        assert set(h.coordinator.manager.txns) == {TXN_ID, "other"}
        while not expiring.done():
            if gate.waiting:
                gate.release()
            await asyncio.sleep(0)
        return await expiring

    assert asyncio.run(scenario()) == 2
    assert h.coordinator.manager.txns == {}
    assert complete(h.coordinator.end_txn(TXN_ID, 1, 0, commit=True)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_request_cancelled_during_the_wait_leaves_nothing_pending() -> None:
    """The connection of the EndTxn closes while its record waits for the ISR (the handler is
    cancelled): the transition is dropped, so the client's retry is served, not answered
    CONCURRENT_TRANSACTIONS forever (found by the chaos transactions run)."""
    h, gate = gated_harness()
    txn = h.txn

    async def scenario() -> None:
        ending = asyncio.ensure_future(h.coordinator.end_txn(TXN_ID, txn.producer_id, txn.producer_epoch, commit=True))
        await until(lambda: gate.waiting)
        ending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ending

    asyncio.run(scenario())
    assert (txn.state, txn.pending) == (S.ONGOING, None)
    h.coordinator.manager.wait_committed = h.wait_committed
    assert h.end(commit=True) == ErrorCode.NONE
    assert txn.state is S.COMPLETE_COMMIT
