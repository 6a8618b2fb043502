"""Idempotent producers on one partition log (KIP-98; ``broker.log.producer_state``).

Kafka documentation §3.3 "Producer Configs", `enable.idempotence`: "unless a message's sequence number is
exactly one more than the one the
broker has, the broker does not store it", and a retried message the broker already stored is
only acknowledged (if it is already stored, only acknowledge it). The rules are Kafka 3.7's
``ProducerAppendInfo``; each test names the rule it checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.errors import InvalidRecordError
from broker.log.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    in_sequence,
)
from broker.log.validate import AppendOrigin
from tests.unit.log.helpers import FakeClock, batch, make_log

PID = 1000


def pbatch(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, txn: bool = False, tag: int = 0) -> bytes:
    """A batch of ``count`` records from producer ``pid``/``epoch`` starting at sequence ``seq``."""
    return batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn, tag=tag)


def test_in_sequence_follows_and_wraps_at_int32_max() -> None:
    """Sequences wrap: after Int32.MAX_VALUE comes 0 (Kafka ``inSequence``)."""
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert not in_sequence(4, 4)
    assert in_sequence(INT32_MAX, 0)
    assert not in_sequence(INT32_MAX - 1, 0)
    assert in_sequence(-1, 0)


def test_batches_in_sequence_are_appended_and_remembered(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, 3))
    info = log.append(pbatch(3, 2))
    assert (info.first_offset, info.last_offset) == (3, 4)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 0
    assert entry.last_seq == 4
    cached = [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches]
    assert cached == [(0, 2, 0, 2), (3, 4, 3, 4)]


@pytest.mark.parametrize("which", range(NUM_BATCHES_TO_RETAIN))
def test_duplicate_of_each_of_the_last_five_batches_is_acknowledged_not_written(tmp_path: Path, which: int) -> None:
    """A retried batch that the partition already holds (one of the producer's last 5) gets its
    original offsets and is not written again."""
    log = make_log(tmp_path, FakeClock())
    log.append(batch(2))  # a non-idempotent batch first, so offsets differ from sequences
    originals = [log.append(pbatch(seq * 2, 2, tag=seq)) for seq in range(NUM_BATCHES_TO_RETAIN)]
    end = log.log_end_offset
    retried = log.append(pbatch(which * 2, 2, tag=which))
    assert retried.first_offset == originals[which].first_offset
    assert retried.last_offset == originals[which].last_offset
    assert retried.batches == ()
    assert log.log_end_offset == end


def test_retry_of_a_batch_older_than_the_cached_five_is_out_of_order(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    for seq in range(NUM_BATCHES_TO_RETAIN + 1):
        log.append(pbatch(seq))
    with pytest.raises(OutOfOrderSequenceError) as caught:
        log.append(pbatch(0))
    assert caught.value.code == 45
    assert log.log_end_offset == NUM_BATCHES_TO_RETAIN + 1


def test_sequence_gap_is_out_of_order_sequence_number(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, 2))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(3))
    assert log.log_end_offset == 2
    log.append(pbatch(2))  # the right next sequence still works
    assert log.log_end_offset == 3


def test_overlapping_but_not_identical_range_is_out_of_order(tmp_path: Path) -> None:
    """A duplicate must match a cached batch's whole sequence range."""
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1, 2))


def test_stale_epoch_is_invalid_producer_epoch(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError) as caught:
        log.append(pbatch(1, epoch=2))
    assert caught.value.code == 47


def test_new_epoch_must_start_at_sequence_zero(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, 5, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(5, epoch=1))
    log.append(pbatch(0, epoch=1))
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq, len(entry.batches)) == (1, 0, 1)
    with pytest.raises(InvalidProducerEpochError):  # the old epoch is fenced now
        log.append(pbatch(5, epoch=0))


def test_duplicate_of_an_older_epoch_is_not_a_duplicate(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, epoch=0))
    log.append(pbatch(0, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(0, epoch=0))


def test_unknown_producer_id_is_accepted_with_any_sequence(tmp_path: Path) -> None:
    """Kafka ≥ 2.5 (KIP-360): a producer id the partition does not know (new, or expired) may
    start at any sequence; the broker no longer answers UNKNOWN_PRODUCER_ID."""
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(42, epoch=7))
    log.append(pbatch(43, epoch=7))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(45, epoch=7))


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(INT32_MAX - 1, 2))  # sequences MAX-1, MAX
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == INT32_MAX
    assert log.append(pbatch(0, 2)).first_offset == 2  # 0 follows MAX
    log.producer_state.reset()
    log.append(pbatch(INT32_MAX, 3))  # MAX, 0, 1 in one batch: its last sequence wraps
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 1
    assert log.append(pbatch(INT32_MAX, 3)).first_offset == 4, "the wrapped batch is found as a duplicate"
    assert log.append(pbatch(2)).first_offset == 7


def test_producers_are_independent(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, pid=1))
    log.append(pbatch(0, pid=2))
    log.append(pbatch(1, pid=1))
    assert log.append(pbatch(0, pid=2)).first_offset == 1  # duplicate of pid 2's batch


def test_batches_without_producer_id_skip_the_producer_state(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    for _ in range(3):
        log.append(batch(2))
    assert log.producer_state.producers == {}
    assert log.log_end_offset == 6


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(pbatch(0, pid=2) + pbatch(0), id="new batch + duplicate"),
        pytest.param(pbatch(0) + pbatch(1, pid=2), id="duplicate + new batch"),
        pytest.param(pbatch(1) + pbatch(2), id="two new batches of one producer"),
        pytest.param(batch(1) + batch(1, tag=1), id="two batches without producer id"),
    ],
)
def test_client_append_of_several_batches_is_invalid_record(tmp_path: Path, data: bytes) -> None:
    """Kafka 3.7 ProduceRequest.validateRecords (v3+) and LogValidator: a client sends exactly one
    batch per partition, else INVALID_RECORD (87). Accepting several let a duplicate among them
    be acknowledged while the new batches beside it were silently dropped."""
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0))
    before = dict(log.producer_state.producers)
    with pytest.raises(InvalidRecordError) as caught:
        log.append(data)
    assert caught.value.code == 87
    assert log.log_end_offset == 1, "a rejected append writes none of its batches"
    assert log.producer_state.producers == before
    assert log.append(pbatch(1)).first_offset == 1, "the producer goes on at the next sequence"


def test_follower_append_of_several_batches_of_one_producer_is_applied_in_order(tmp_path: Path) -> None:
    """Replication keeps the leader's batches as they are: several per append, applied unchecked."""
    log = make_log(tmp_path, FakeClock())
    log.append_as_follower(
        batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
        + batch(2, producer_id=PID, producer_epoch=0, base_sequence=2, base_offset=2)
    )
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert (entry.last_seq, entry.last_offset, len(entry.batches)) == (3, 3, 2)


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, txn=True))
    with pytest.raises(InvalidTxnStateError) as caught:
        log.append(pbatch(1, txn=False))
    assert caught.value.code == 48


def test_coordinator_appends_check_the_epoch_but_not_sequences(tmp_path: Path) -> None:
    """Appends by the broker's coordinators (transactional offset commits) carry no meaningful
    sequence: only the epoch is checked (Kafka ``maybeValidateDataBatch``)."""
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0, epoch=2, txn=True), origin=AppendOrigin.COORDINATOR)
    log.append(pbatch(0, epoch=2, txn=True), origin=AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(0, epoch=1, txn=True), origin=AppendOrigin.COORDINATOR)


def test_prepare_does_not_change_the_state(tmp_path: Path) -> None:
    """Checking is pure: the state changes only when ``apply`` installs a written append."""
    log = make_log(tmp_path, FakeClock())
    log.append(pbatch(0))
    state = log.producer_state
    before = dict(state.producers)
    entry_before = state.producers[PID]
    from broker.log.validate import validate_and_assign_offsets

    result = validate_and_assign_offsets(pbatch(1, txn=True), 1, log.config, FakeClock()())
    pending = state.prepare(result.batches, AppendOrigin.CLIENT)
    assert pending.updated[PID].last_seq == 1
    assert state.producers == before
    assert state.producers[PID] is entry_before
    assert entry_before.last_seq == 0
    assert state.first_unstable_offset() is None


def test_expired_producers_are_removed_but_not_those_in_a_transaction(tmp_path: Path) -> None:
    """producer.id.expiration.ms: a producer idle that long without an ongoing transaction is
    forgotten; deleting its batches alone does not remove it."""
    clock = FakeClock()
    log = make_log(tmp_path, clock, segment_bytes=1024, retention_ms=1000)
    state = log.producer_state
    state.producer_id_expiration_ms = 10_000
    now = clock.now_ms
    log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=0, timestamp_ms=now, value_bytes=600))
    log.append(batch(1, producer_id=2, producer_epoch=0, base_sequence=0, transactional=True, timestamp_ms=now))
    log.roll()
    log.append(batch(1, timestamp_ms=clock.now_ms + 5000))
    clock.advance(5000)
    assert log.delete_old_segments() >= 1
    assert set(state.producers) == {1, 2}, "retention deleted the batches, the producers stay"
    clock.advance(5000)
    log.delete_old_segments()
    assert set(state.producers) == {2}


def test_remove_expired_is_idempotent_on_empty_state(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    assert manager.remove_expired(10**15) == 0
