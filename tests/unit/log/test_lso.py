"""The last stable offset and the aborted-transaction lookup of one partition log (KIP-98).

Kafka 3.7 (``ProducerStateManager`` / ``UnifiedLog``): ongoing transactions are kept sorted by
their first offset, so the first unstable offset is the smallest first offset whatever order the
producers appeared in; a transaction that ends and a new one of the same producer that starts in
the same append are two entries; each aborted transaction's ``.txnindex`` LSO counts every
transaction still ongoing after its marker, including one a later marker of the same append ends;
the first unstable offset is never below the log start offset (``updateFirstUnstableOffset``).
Follower appends (several batches, offsets kept) are where these orders differ from append order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.recovery import load_log
from broker.log.txn_index import AbortedTxn
from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.records.header import set_base_offset
from tests.unit.log.helpers import FakeClock, batch, make_log, reopen


def idem(pid: int, seq: int, offset: int = 0) -> bytes:
    return batch(1, producer_id=pid, producer_epoch=0, base_sequence=seq, base_offset=offset, tag=pid)


def tx(pid: int, seq: int, offset: int = 0) -> bytes:
    return batch(
        1, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True, base_offset=offset, tag=pid
    )


def marker(pid: int, offset: int, *, commit: bool) -> bytes:
    data = bytearray(encode_control_batch(ControlType.COMMIT if commit else ControlType.ABORT, pid, 0, 0, 0))
    set_base_offset(data, 0, offset)  # not covered by the CRC
    return bytes(data)


def test_first_unstable_offset_is_the_smallest_first_offset_not_the_first_producer_seen(tmp_path: Path) -> None:
    """Producer 1 appears first (a plain batch at 0) but starts its transaction (2) after
    producer 2 (1): the LSO is 1, not 2."""
    log = make_log(tmp_path, FakeClock())
    log.append_as_follower(idem(1, 0, 0) + tx(2, 0, 1) + tx(1, 1, 2))
    assert log.producer_state.ongoing_transactions() == {1: 2, 2: 1}
    assert log.first_unstable_offset() == 1
    log.append_as_follower(marker(2, 3, commit=True))
    assert log.first_unstable_offset() == 2


def test_transaction_ended_and_restarted_in_one_follower_append_stays_ongoing(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append_as_follower(tx(1, 0, 0) + marker(1, 1, commit=False) + tx(1, 1, 2))
    assert log.producer_state.ongoing_transactions() == {1: 2}
    assert log.first_unstable_offset() == 2
    assert log.segments.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 1, 2)]


def test_each_aborted_transaction_of_one_append_counts_the_later_ones_as_ongoing(tmp_path: Path) -> None:
    """Two transactions aborted by one follower append: the first entry's LSO is the second
    transaction's first offset, so a read_committed fetch that stops before the second marker
    still gets both aborted transactions."""
    log = make_log(tmp_path, FakeClock())
    log.append_as_follower(tx(1, 0, 0) + tx(2, 0, 1) + batch(2, base_offset=2))
    log.append_as_follower(marker(1, 4, commit=False) + marker(2, 5, commit=False))
    assert log.segments[-1].txn_index.entries == [AbortedTxn(1, 0, 4, 1), AbortedTxn(2, 1, 5, 6)]
    assert log.segments.collect_aborted_transactions(0, 4) == [AbortedTxn(1, 0, 4, 1), AbortedTxn(2, 1, 5, 6)]
    assert log.first_unstable_offset() is None


def test_first_unstable_offset_is_at_least_the_log_start_offset(tmp_path: Path) -> None:
    """A hanging transaction whose first batch was deleted (DeleteRecords or retention) bounds the
    LSO at the log start offset, never below it."""
    log = make_log(tmp_path, FakeClock(), segment_bytes=1024)
    log.append(tx(1, 0))  # 0, never ended
    for i in range(40):
        log.append(batch(1, tag=i))
    log.delete_records_before(30)
    assert log.log_start_offset == 30
    assert log.producer_state.ongoing_transactions() == {1: 0}
    assert log.first_unstable_offset() == 30


def test_first_unstable_offset_after_a_start_up_above_every_batch_is_the_log_start_offset(tmp_path: Path) -> None:
    """Recovery's start-afresh case: the checkpointed log start offset is past every batch left,
    so the log restarts empty there; the hanging transaction of the loaded snapshot is bounded
    by it."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(1, 0))  # 0
    log.append(batch(2))  # 1-2
    log.close()
    loaded = load_log(log.directory, "t", 0, log.config, clock, log_start_offset=10, clean_shutdown=True)
    assert (loaded.log_start_offset, loaded.log_end_offset) == (10, 10)
    assert loaded.producer_state.ongoing_transactions() == {1: 0}
    assert loaded.first_unstable_offset() == 10


@pytest.mark.parametrize("restart", [False, True])
def test_collect_aborted_transactions_skips_the_indexes_after_the_newest_abort(
    tmp_path: Path, restart: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read_committed fetch at or after the newest ABORT marker (or of a log without any) reads
    no ``.txnindex``; before it, every overlapping aborted transaction is still found (also after
    a restart, which finds the newest marker in the index files)."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for i in range(3):
        log.append(batch(1, tag=i))
        log.roll()
    assert log.segments.collect_aborted_transactions(0, 3) == []
    log.append(tx(1, 0))  # 3
    log.append_control_marker(1, 0, 0, commit=False)  # 4
    log.roll()
    log.append(batch(2))  # 5-6
    log.roll()
    if restart:
        log.close()
        log = reopen(log, clock, clean=True)
    assert log.segments.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 3, 4, 5)]
    assert log.segments.collect_aborted_transactions(4, 7) == [AbortedTxn(1, 3, 4, 5)]

    def no_reads(*_: object) -> object:
        raise AssertionError("a .txnindex was read")

    for segment in log.segments:
        monkeypatch.setattr(segment.txn_index, "collect", no_reads)
    assert log.segments.collect_aborted_transactions(5, 7) == []


def test_truncating_away_the_newest_abort_keeps_older_ones_found(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock())
    log.append(tx(1, 0))  # 0
    log.append_control_marker(1, 0, 0, commit=False)  # 1
    log.append(tx(2, 0))  # 2
    log.append_control_marker(2, 0, 0, commit=False)  # 3
    log.truncate_to(3)
    assert log.segments.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 1, 2)]
    assert log.first_unstable_offset() == 2
    log.append_control_marker(2, 0, 0, commit=False)  # 3 again
    assert log.segments.collect_aborted_transactions(2, 4) == [AbortedTxn(2, 2, 3, 4)]
