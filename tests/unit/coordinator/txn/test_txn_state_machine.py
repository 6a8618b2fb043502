"""The transaction state machine (``TransactionMetadata``): every legal and illegal transition of the
table in its docstring, and the epoch rules of Kafka 3.7's ``TransactionMetadata`` (KIP-98 fencing,
KIP-360 epoch bumps, epoch exhaustion)."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinator.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    VALID_TARGETS,
    IllegalTxnTransition,
    TransactionMetadata,
    TxnError,
)
from broker.coordinator.txn.records import TxnState
from pyspark_log.wire.errors import ErrorCode

S = TxnState
NOW = 5_000

EXPECTED = {
    (S.EMPTY, S.EMPTY),
    (S.EMPTY, S.ONGOING),
    (S.EMPTY, S.DEAD),
    (S.ONGOING, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
    (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.COMPLETE_COMMIT, S.EMPTY),
    (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_COMMIT, S.DEAD),
    (S.COMPLETE_ABORT, S.EMPTY),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.COMPLETE_ABORT, S.DEAD),
}


def in_state(state: TxnState) -> TransactionMetadata:
    """A transaction in ``state`` (PrepareEpochFence: an Ongoing one with the fence pending)."""
    if state is S.PREPARE_EPOCH_FENCE:
        txn = in_state(S.ONGOING)
        txn.prepare_fence_epoch()
        return txn
    partitions = set() if state in (S.EMPTY, S.DEAD) else {("t", 0)}
    return TransactionMetadata("x", 7, 3, 1000, state, partitions, start_ms=100, last_update_ms=100)


def test_the_table_is_kafkas() -> None:
    assert {(a, b) for a, targets in VALID_TARGETS.items() for b in targets} == EXPECTED


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)), ids=lambda s: s.kafka_name)
def test_every_transition(source: TxnState, target: TxnState) -> None:
    txn = in_state(source)
    if (source, target) in EXPECTED:
        transit = txn._prepare(target)
        assert transit.state is target
        assert txn.pending is target
    else:
        with pytest.raises(IllegalTxnTransition):
            txn._prepare(target)


def test_a_pending_transition_blocks_the_next() -> None:
    txn = in_state(S.ONGOING)
    txn.prepare_add_partitions(frozenset({("t", 1)}), NOW)
    with pytest.raises(IllegalTxnTransition):
        txn.prepare_end(commit=True, now_ms=NOW)
    txn.abort_transition()
    assert txn.prepare_end(commit=True, now_ms=NOW).state is S.PREPARE_COMMIT


def test_completion_applies_the_whole_target() -> None:
    txn = in_state(S.EMPTY)
    transit = txn.prepare_add_partitions(frozenset({("t", 1), ("u", 0)}), NOW)
    assert txn.state is S.EMPTY  # nothing changes before the record is persisted
    txn.complete_transition(transit)
    assert (txn.state, txn.partitions, txn.start_ms, txn.last_update_ms) == (
        S.ONGOING,
        {("t", 1), ("u", 0)},
        NOW,
        NOW,
    )
    txn.complete_transition(txn.prepare_add_partitions(frozenset({("v", 0)}), NOW + 5))
    assert txn.start_ms == NOW  # the transaction started at its first partition
    txn.complete_transition(txn.prepare_end(commit=False, now_ms=NOW + 6))
    txn.complete_transition(txn.prepare_complete(NOW + 7))
    assert (txn.state, txn.partitions) == (S.COMPLETE_ABORT, set())


def test_completing_something_else_than_pending_raises() -> None:
    txn = in_state(S.ONGOING)
    other = in_state(S.ONGOING).prepare_end(commit=True, now_ms=NOW)
    with pytest.raises(IllegalTxnTransition):
        txn.complete_transition(other)
    txn.prepare_end(commit=False, now_ms=NOW)
    with pytest.raises(IllegalTxnTransition):
        txn.complete_transition(other)  # PrepareCommit while PrepareAbort is pending


def test_prepare_complete_only_from_prepare_states() -> None:
    for state in (S.EMPTY, S.ONGOING, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
        with pytest.raises(IllegalTxnTransition):
            in_state(state).prepare_complete(NOW)


def test_dead_is_final() -> None:
    txn = in_state(S.COMPLETE_COMMIT)
    transit = txn.prepare_dead()
    with pytest.raises(IllegalTxnTransition):
        txn.complete_transition(transit)  # Dead is never persisted as a state: a tombstone is
    txn.complete_dead()
    assert txn.state is S.DEAD
    for target in S:
        with pytest.raises(IllegalTxnTransition):
            txn._prepare(target)


# -- InitProducerId epochs --------------------------------------------------------------------


def test_fresh_init_bumps_and_forgets_the_last_epoch() -> None:
    txn = in_state(S.COMPLETE_COMMIT)
    transit = txn.prepare_increment_epoch(2000, None, NOW)
    assert (transit.state, transit.producer_epoch, transit.last_producer_epoch) == (S.EMPTY, 4, NO_PRODUCER_EPOCH)
    assert (transit.partitions, transit.start_ms, transit.timeout_ms) == (frozenset(), -1, 2000)
    txn.complete_transition(transit)
    assert txn.producer_epoch == 4


def test_kip360_bump_and_its_retry() -> None:
    """Kafka: the expected epoch equal to the current one bumps it and remembers the old one; a
    retry with that old epoch gets the current epoch back; any other epoch is fenced."""
    txn = in_state(S.EMPTY)
    txn.complete_transition(txn.prepare_increment_epoch(1000, 3, NOW))
    assert (txn.producer_epoch, txn.last_producer_epoch) == (4, 3)
    retry = txn.prepare_increment_epoch(1000, 3, NOW)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    txn.abort_transition()
    with pytest.raises(TxnError) as err:
        txn.prepare_increment_epoch(1000, 1, NOW)
    assert err.value.code == ErrorCode.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    txn = TransactionMetadata("x", 7, MAX_EPOCH - 1, 1000, S.COMPLETE_ABORT)
    assert txn.epoch_exhausted
    with pytest.raises(IllegalTxnTransition):
        txn.prepare_increment_epoch(1000, None, NOW)
    transit = txn.prepare_producer_id_rotation(8, 1000, NOW, record_last_epoch=True)
    txn.complete_transition(transit)
    assert (txn.producer_id, txn.producer_epoch, txn.last_producer_id, txn.last_producer_epoch) == (
        8,
        0,
        7,
        MAX_EPOCH - 1,
    )


def test_rotation_needs_no_transaction_in_flight() -> None:
    with pytest.raises(IllegalTxnTransition):
        in_state(S.ONGOING).prepare_producer_id_rotation(8, 1000, NOW, record_last_epoch=False)


def test_fencing_bumps_once_and_continues_as_abort() -> None:
    txn = in_state(S.ONGOING)
    fence = txn.prepare_fence_epoch()
    assert (fence.state, fence.producer_epoch, txn.pending) == (S.PREPARE_EPOCH_FENCE, 4, S.PREPARE_EPOCH_FENCE)
    with pytest.raises(IllegalTxnTransition):
        txn.prepare_end(commit=True, now_ms=NOW, fence_epoch=4)  # a fence only ever aborts
    abort = txn.prepare_end(commit=False, now_ms=NOW, fence_epoch=fence.producer_epoch)
    assert (abort.state, abort.producer_epoch) == (S.PREPARE_ABORT, 4)
    txn.complete_transition(abort)
    assert (txn.state, txn.producer_epoch) == (S.PREPARE_ABORT, 4)


def test_a_failed_fence_is_not_bumped_again() -> None:
    """Kafka's ``hasFailedEpochFence``: the bumped epoch was never handed out, so the next fence
    reuses it instead of skipping one."""
    txn = in_state(S.ONGOING)
    fence = txn.prepare_fence_epoch()
    txn.prepare_end(commit=False, now_ms=NOW, fence_epoch=fence.producer_epoch)
    txn.abort_transition()  # the append failed
    assert (txn.state, txn.producer_epoch, txn.failed_epoch_fence) == (S.ONGOING, 4, True)
    again = txn.prepare_fence_epoch()
    assert again.producer_epoch == 4
    txn.complete_transition(txn.prepare_end(commit=False, now_ms=NOW, fence_epoch=4))
    txn.prepare_complete(NOW)
    assert not txn.failed_epoch_fence


def test_end_while_a_fence_is_pending_needs_the_fence() -> None:
    txn = in_state(S.PREPARE_EPOCH_FENCE)
    with pytest.raises(IllegalTxnTransition):
        txn.prepare_end(commit=False, now_ms=NOW)
    with pytest.raises(IllegalTxnTransition):
        in_state(S.ONGOING).prepare_end(commit=False, now_ms=NOW, fence_epoch=4)


def test_epoch_must_follow_on_completion() -> None:
    txn = in_state(S.EMPTY)
    transit = txn.prepare_increment_epoch(1000, None, NOW)
    txn.producer_epoch = 9  # someone else moved it: the transit no longer follows
    with pytest.raises(IllegalTxnTransition):
        txn.complete_transition(transit)
