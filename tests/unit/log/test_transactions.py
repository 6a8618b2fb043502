"""Transactions on one partition log: ongoing transactions, markers, the LSO and ``.txnindex`` (KIP-98).

Kafka documentation §4.6 "Message Delivery Semantics", transactions: "Kafka uses a special type of message
called a control message" so
that readers can tell committed from aborted transactional messages. On the partition (Kafka
3.7 ``ProducerStateManager`` / ``TransactionIndex``): a producer's first transactional batch
starts its ongoing transaction; a COMMIT/ABORT marker ends it; the last stable offset is the
first offset of the earliest ongoing transaction; each aborted transaction gets a 34-byte entry
(version, producer id, first offset, last offset, LSO) in the ``.txnindex`` of the segment
holding its marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log import Log
from broker.log.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from broker.log.txn_index import ENTRY, ENTRY_SIZE, AbortedTxn
from pyspark_log.records.control import ControlType, decode_control_batch
from pyspark_log.records.header import iter_batch_headers
from tests.unit.log.helpers import FakeClock, batch, make_log, reopen


def tx(pid: int, seq: int, count: int = 1, *, epoch: int = 0) -> bytes:
    return batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True, tag=pid)


def txn_index_entries(log: Log) -> list[AbortedTxn]:
    return [txn for segment in log.segments for txn in segment.txn_index.entries]


def test_first_transactional_batch_starts_a_transaction_and_bounds_the_lso(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(batch(2))
    assert log.first_unstable_offset() is None
    log.append(tx(1, 0))
    log.append(tx(1, 1))
    log.append(batch(1))
    assert log.first_unstable_offset() == 2
    assert log.producer_state.ongoing_transactions() == {1: 2}


def test_commit_marker_ends_the_transaction(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0, 3))
    offset = log.append_control_marker(1, 0, 5, commit=True)
    assert offset == 3
    assert log.first_unstable_offset() is None
    assert txn_index_entries(log) == []
    entry = log.producer_state.last_entry(1)
    assert entry is not None
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (5, -1)
    with log.read(3, 1 << 20) as chunk:
        header, records = decode_control_batch(chunk.read_bytes())
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (1, 0)
    assert records[0].kind == ControlType.COMMIT


def test_abort_marker_is_indexed_with_the_lso_after_it(tmp_path: Path) -> None:
    """The entry's LSO is the first offset of the earliest other ongoing transaction, or the
    marker's offset + 1 when there is none (Kafka ``lastStableOffset(completedTxn)``)."""
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0, 2))  # 0-1
    log.append(tx(2, 0))  # 2
    marker1 = log.append_control_marker(1, 0, 0, commit=False)  # 3
    assert log.first_unstable_offset() == 2
    marker2 = log.append_control_marker(2, 0, 0, commit=False)  # 4
    assert log.first_unstable_offset() is None
    assert txn_index_entries(log) == [AbortedTxn(1, 0, marker1, 2), AbortedTxn(2, 2, marker2, marker2 + 1)]
    data = log.segments.active.txn_index.path.read_bytes()
    assert len(data) == 2 * ENTRY_SIZE == 68
    assert ENTRY.unpack_from(data, 0) == (0, 1, 0, 3, 2)


def test_marker_without_an_ongoing_transaction_is_written_and_harmless(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    assert log.append_control_marker(9, 0, 0, commit=False) == 0
    assert log.log_end_offset == 1
    assert txn_index_entries(log) == []
    assert log.first_unstable_offset() is None


def test_marker_with_an_older_producer_epoch_is_rejected(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        log.append_control_marker(1, 2, 0, commit=True)
    assert log.log_end_offset == 1
    assert log.first_unstable_offset() == 0


def test_marker_with_an_older_coordinator_epoch_is_fenced(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))
    log.append_control_marker(1, 0, 4, commit=True)
    log.append(tx(1, 1))
    with pytest.raises(TransactionCoordinatorFencedError) as caught:
        log.append_control_marker(1, 0, 3, commit=True)
    assert caught.value.code == 52


def test_marker_with_a_bumped_epoch_fences_the_old_epoch(tmp_path: Path) -> None:
    """A coordinator that aborts with a bumped epoch (timeout, KIP-360) fences the old producer."""
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0, epoch=0))
    log.append_control_marker(1, 1, 0, commit=False)
    with pytest.raises(InvalidProducerEpochError):
        log.append(tx(1, 1, epoch=0))
    log.append(tx(1, 0, epoch=1))  # the new epoch starts at sequence 0


def test_collect_aborted_transactions_overlapping_a_range(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0, 2))  # 0-1
    log.append_control_marker(1, 0, 0, commit=False)  # 2
    log.append(batch(2))  # 3-4
    log.append(tx(2, 0))  # 5
    log.append_control_marker(2, 0, 0, commit=True)  # 6
    log.append(tx(3, 0))  # 7
    log.append_control_marker(3, 0, 0, commit=False)  # 8
    assert log.segments.collect_aborted_transactions(0, 9) == [AbortedTxn(1, 0, 2, 3), AbortedTxn(3, 7, 8, 9)]
    assert log.segments.collect_aborted_transactions(3, 7) == []
    assert log.segments.collect_aborted_transactions(2, 3) == [AbortedTxn(1, 0, 2, 3)]
    assert log.segments.collect_aborted_transactions(7, 8) == [AbortedTxn(3, 7, 8, 9)]


def test_collect_finds_markers_in_later_segments(tmp_path: Path) -> None:
    """A transaction that starts in one segment and is aborted in a later one is found from a
    fetch of the first segment."""
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))  # 0
    log.roll()
    log.append(batch(1))  # 1
    log.roll()
    log.append_control_marker(1, 0, 0, commit=False)  # 2
    assert log.segments.collect_aborted_transactions(0, 1) == [AbortedTxn(1, 0, 2, 3)]
    assert log.segments[0].txn_index.entries == []
    assert log.segments[2].txn_index.entries == [AbortedTxn(1, 0, 2, 3)]


def test_txn_index_is_rebuilt_by_recovery(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(1, 0))
    log.append(tx(2, 0))
    log.append_control_marker(1, 0, 0, commit=False)
    log.roll()
    log.append(tx(3, 0))
    log.append_control_marker(2, 0, 0, commit=False)
    log.append(tx(1, 1))
    expected = txn_index_entries(log)
    assert len(expected) == 2
    log.close(flush=False)
    for segment in log.segments:
        segment.txn_index.path.unlink(missing_ok=True)
    log = reopen(log, clock, recovery_point=0)
    assert txn_index_entries(log) == expected
    assert log.producer_state.ongoing_transactions() == {3: 3, 1: 5}
    assert log.first_unstable_offset() == 3


def test_ongoing_transactions_survive_a_clean_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(2, 0))
    log.append(tx(1, 0))
    log.close()
    log = reopen(log, clock, clean=True, recovery_point=2)
    assert log.first_unstable_offset() == 0
    log.append_control_marker(2, 0, 0, commit=True)
    assert log.first_unstable_offset() == 1


def test_corrupt_txn_index_makes_the_segment_recover(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(1, 0))
    log.append_control_marker(1, 0, 0, commit=False)
    log.roll()
    log.append(batch(1))
    log.close()
    path = log.segments[0].txn_index.path
    path.write_bytes(path.read_bytes() + b"junk")
    log = reopen(log, clock, clean=True, recovery_point=3)
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 1, 2)]
    assert path.stat().st_size == ENTRY_SIZE


def test_truncation_drops_txn_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))
    log.append_control_marker(1, 0, 0, commit=False)
    assert txn_index_entries(log) == [AbortedTxn(1, 0, 1, 2)]
    log.truncate_to(1)
    assert txn_index_entries(log) == []
    assert log.first_unstable_offset() == 0


def test_txn_index_files_go_with_deleted_segments(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock(), file_delete_delay_ms=0)
    log.append(tx(1, 0))
    log.append_control_marker(1, 0, 0, commit=False)
    path = log.segments.active.txn_index.path
    log.roll()
    log.delete_records_before(2)
    assert not path.exists()
    log.delete_pending_files(2**62)
    assert not list(log.directory.glob("*.txnindex*"))


def test_control_batch_layout_of_markers(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))
    log.append_control_marker(1, 0, 0, commit=False, leader_epoch=3)
    with log.read(1, 1 << 20) as chunk:
        data = chunk.read_bytes()
    [(_, header)] = list(iter_batch_headers(data))
    assert header.is_control
    assert header.is_transactional
    assert header.partition_leader_epoch == 3
    assert header.base_sequence == -1


def test_replay_skips_a_batch_that_breaks_the_rules_instead_of_failing_start_up(tmp_path: Path) -> None:
    """The replay trusts the log; a batch the rules reject (here: a non-transactional batch in the
    middle of the producer's transaction, written after its state was lost) is skipped with a
    warning, so the partition still loads."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(1, 0))
    log.producer_state.reset(log.log_end_offset)
    log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=1))
    log.close(flush=False)
    log = reopen(log, clock)
    assert log.log_end_offset == 2
    assert log.first_unstable_offset() == 0


@pytest.mark.parametrize("commit", [False, True])
def test_a_batch_repeating_one_of_an_ended_transaction_is_out_of_order_not_a_duplicate(
    tmp_path: Path, commit: bool
) -> None:
    """A client ends a transaction only once its batches are answered, so a batch that repeats
    the sequences of a batch before the marker (same epoch) is no retry: librdkafka's
    ``abort_transaction`` reuses a purged batch's sequences that had been written. Kafka 3.7
    acknowledges it with the old offsets (the record is dropped); pylog refuses it as out of
    sequence, so the transaction cannot commit without the record (docs/compatibility.md)."""
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))  # 0
    log.append(tx(1, 1))  # 1
    log.append_control_marker(1, 0, 0, commit=commit)  # 2
    end = log.log_end_offset
    for seq in (1, 0):
        with pytest.raises(OutOfOrderSequenceError):
            log.append(tx(1, seq))
    assert log.log_end_offset == end
    assert log.first_unstable_offset() is None
    log.append(tx(1, 2))  # the next sequence starts the next transaction
    assert log.producer_state.ongoing_transactions() == {1: end}
    retried = log.append(tx(1, 2))  # a retry within the ongoing transaction is still a duplicate
    assert (retried.first_offset, retried.batches) == (end, ())
    with pytest.raises(OutOfOrderSequenceError):  # one of the ended transaction: still refused
        log.append(tx(1, 1))
