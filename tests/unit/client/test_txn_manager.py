"""The transaction manager's state machine and sequence rules (pure; KIP-98, KIP-360)."""

from __future__ import annotations

import pytest

from pyspark_log.client.errors import IllegalTransactionStateError, ProducerFencedError, TransactionAbortableError
from pyspark_log.client.producer_batch import ProducerBatch
from pyspark_log.client.txn_manager import _MOVES, TransactionManager, TxnState
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.batch import ProducerRecord
from pyspark_log.wire import ErrorCode, KafkaError

TP = TopicPartition("t", 0)

LEGAL = {
    ("UNINITIALIZED", "INITIALIZING"),
    ("INITIALIZING", "READY"),
    ("INITIALIZING", "UNINITIALIZED"),
    ("READY", "IN_TRANSACTION"),
    ("READY", "INITIALIZING"),
    ("IN_TRANSACTION", "COMMITTING"),
    ("IN_TRANSACTION", "ABORTING"),
    ("IN_TRANSACTION", "PREPARED"),
    ("IN_TRANSACTION", "ABORTABLE_ERROR"),
    ("COMMITTING", "READY"),
    ("COMMITTING", "ABORTABLE_ERROR"),
    ("ABORTING", "READY"),
    ("ABORTING", "INITIALIZING"),
    ("ABORTABLE_ERROR", "ABORTING"),
    ("ABORTABLE_ERROR", "ABORTABLE_ERROR"),
}


def test_the_transition_table_is_the_documented_one() -> None:
    table = {(a.name, b.name) for a, targets in _MOVES.items() for b in targets}
    assert table == LEGAL


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_every_move_is_legal_or_raises(source: TxnState, target: TxnState) -> None:
    txn = TransactionManager("tx")
    txn.state = source
    if target is TxnState.FATAL_ERROR or (source.name, target.name) in LEGAL:
        txn.transition_to(target, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR))
        assert txn.state is target
    else:
        with pytest.raises(IllegalTransactionStateError, match=f"{source.value} -> {target.value}"):
            txn.transition_to(target)
        assert txn.state is source


def test_send_needs_a_transaction_and_errors_surface() -> None:
    txn = TransactionManager("tx")
    with pytest.raises(IllegalTransactionStateError, match="begin_transaction"):
        txn.check_send()
    txn.state = TxnState.READY
    txn.begin()
    txn.check_send()
    txn.fail(KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    assert txn.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        txn.check_send()
    txn.fail(KafkaError(ErrorCode.PRODUCER_FENCED))
    assert txn.state is TxnState.FATAL_ERROR
    with pytest.raises(KafkaError, match="PRODUCER_FENCED"):
        txn.check_send()


def test_fencing_errors_raise_producer_fenced() -> None:
    from pyspark_log.client.txn_manager import fatal_error

    for code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
        assert isinstance(fatal_error(code, "x"), ProducerFencedError)


def _batch(n: int = 1) -> ProducerBatch:
    b = ProducerBatch(TP, 0.0, 10**6)
    for i in range(n):
        b.try_append(ProducerRecord(None, bytes([i]), 0), 1, 0, None)
    return b


def test_only_the_first_in_flight_batch_is_retried_first() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 0)
    a, b, c = _batch(2), _batch(3), _batch()
    for x in (a, b):
        assert txn.may_drain(x, 1)
        txn.on_drain(x)
        x.sent_to = 1  # as the accumulator records it
    assert (a.base_sequence, b.base_sequence) == (0, 2)
    assert not txn.may_drain(b, 1)  # a retried b waits for a
    assert txn.may_drain(a, 1)
    assert txn.may_drain(c, 1)  # a new batch may go
    assert txn.can_retry(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # not the next one: a is pending
    txn.on_completed(a, 10)
    assert txn.may_drain(b, 1)


def test_an_unresolved_failure_blocks_new_batches_until_resolved() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 0)
    a, b, c = _batch(), _batch(), _batch()
    txn.on_drain(a)
    txn.on_drain(b)
    txn.on_failed(a, KafkaError(ErrorCode.REQUEST_TIMED_OUT), rejected=False)
    assert not txn.may_drain(c, 1)
    txn.on_completed(b, 5)  # a later batch was acknowledged: a was written
    txn.maybe_resolve_sequences()
    assert txn.may_drain(c, 1)
    assert not txn.epoch_bump_required


def test_an_unresolved_failure_without_later_acks_bumps_the_epoch() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 4)
    a, c = _batch(), _batch()
    txn.on_drain(a)
    txn.on_failed(a, KafkaError(ErrorCode.REQUEST_TIMED_OUT), rejected=False)
    txn.maybe_resolve_sequences()
    assert txn.epoch_bump_required
    assert not txn.bump_idempotent_epoch()
    assert txn.producer_epoch == 5
    txn.on_drain(c)
    assert (c.producer_epoch, c.base_sequence) == (5, 0)


def test_an_exhausted_epoch_asks_for_a_new_producer_id() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 32767)
    txn.request_epoch_bump(TP)
    assert txn.bump_idempotent_epoch()
    assert not txn.has_producer_id


def test_an_out_of_order_answer_for_a_batch_a_later_ack_has_passed_is_written_not_a_gap() -> None:
    """Chaos finding (issue 31, the queue workload, seed 7): batches a, b, c of one partition were
    in flight; c was acknowledged, a expired (its fate unresolved), and b's retry was answered
    OUT_OF_ORDER_SEQUENCE_NUMBER (its metadata had left the broker's five-batch window). b comes
    right after the unresolved a, so the producer bumped its epoch and sent b again from sequence
    0: the broker wrote b twice. c's acknowledgement proves a and b were written: b completes
    (offset unknown), a resolves, and the epoch stays."""
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 0)
    z, a, b, c = _batch(), _batch(), _batch(), _batch()
    txn.on_drain(z)
    txn.on_completed(z, 30)  # an earlier batch: the partition knows the producer id
    for batch in (a, b, c):
        txn.on_drain(batch)
    txn.on_completed(c, 40)
    txn.on_failed(a, KafkaError(ErrorCode.REQUEST_TIMED_OUT), rejected=False)
    assert txn.written_before(b)
    txn.on_completed(b, -1)  # what the sender does with it
    txn.maybe_resolve_sequences()
    assert not txn.epoch_bump_required
    assert txn.producer_epoch == 0
    d = _batch()
    txn.on_drain(d)
    assert d.base_sequence == c.base_sequence + c.record_count  # the sequence goes on


def test_an_out_of_order_answer_for_the_next_batch_is_still_a_gap() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 0)
    a, b = _batch(), _batch()
    txn.on_drain(a)
    txn.on_drain(b)
    txn.on_completed(a, 0)
    assert not txn.written_before(b)  # nothing acknowledged past b: the broker lacks it
    assert txn.can_retry(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert txn.epoch_bump_required


def test_a_later_batch_acknowledged_alone_does_not_prove_the_earlier_ones_were_written() -> None:
    """CI finding (issue 31, the queue workload, seed 31): the first five batches of a partition
    were in flight to its leader when the leader was cut off; the producer sent the next batches
    to the new leader, which had never seen the producer id and accepted them at sequence 5
    (KIP-360: any first sequence). The first five, retried, were answered OUT_OF_ORDER_SEQUENCE_NUMBER
    and taken for written (a later batch was acknowledged): five records lost. Now a new batch
    waits while the partition's batches are in flight to another node, and an acknowledgement
    proves the earlier batches written only if a batch before them was acknowledged too."""
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(1, 0)
    first = [_batch() for _ in range(5)]
    for batch in first:
        assert txn.may_drain(batch, 3)
        txn.on_drain(batch)
        batch.sent_to = 3
    later = _batch()
    assert txn.may_drain(later, 3)  # to the same leader, behind them on one connection
    assert not txn.may_drain(later, 1)  # the leader moved: wait until they are answered
    txn.on_drain(later)
    later.sent_to = 1
    txn.on_completed(later, 0)  # as if a producer had sent it anyway
    assert not any(txn.written_before(batch) for batch in first)
    assert txn.can_retry(first[0], ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
