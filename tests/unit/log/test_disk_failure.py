"""A disk error that leaves a log's files out of step with its memory fails the log (Kafka's
log-dir failure, for one log): the request gets KAFKA_STORAGE_ERROR (56), every later append and
read of the log too, the log is closed without a snapshot, its dir is not marked clean, and the
next start-up recovers it (rebuilding the ``.txnindex`` a failed write left short).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.log.config import LogConfig, LogManagerConfig
from broker.log.errors import KafkaStorageError
from broker.log.log import Log
from broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from broker.log.txn_index import AbortedTxn
from tests.unit.log.helpers import FakeClock, batch, make_log, reopen


def tx(pid: int, seq: int) -> bytes:
    return batch(1, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True, tag=pid)


def disk_error(*_: object, **__: object) -> None:
    raise OSError(5, "Input/output error")


def assert_offline(log: Log) -> None:
    assert log.failure is not None
    for call in (lambda: log.append(batch(1)), lambda: log.read(0, 1 << 20)):
        with pytest.raises(KafkaStorageError) as caught:
            call()
        assert caught.value.code == 56


def test_failed_txn_index_write_after_an_abort_marker_fails_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(tx(1, 0))  # 0
    monkeypatch.setattr(log.segments.active.txn_index, "append", disk_error)
    with pytest.raises(KafkaStorageError) as caught:
        log.append_control_marker(1, 0, 0, commit=False)  # 1: in the log, not in the index
    assert caught.value.code == 56
    assert_offline(log)
    with pytest.raises(KafkaStorageError):
        log.append_control_marker(1, 0, 0, commit=False)
    assert log.delete_old_segments() == 0
    assert not log.flusher.flush_if_due(clock.now_ms + 10**9)
    log.close()
    assert not list(log.directory.glob("*.snapshot")), "a failed log is closed without a snapshot"
    log = reopen(log, clock)  # not clean: recovery rebuilds the index from the marker
    assert log.failure is None
    assert log.segments.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 1, 2)]
    assert log.first_unstable_offset() is None


def test_failed_snapshot_when_a_segment_rolls_fails_the_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = make_log(tmp_path, FakeClock(), segment_bytes=300)
    log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=0, value_bytes=150))
    monkeypatch.setattr(log.producer_state, "take_snapshot", disk_error)
    with pytest.raises(KafkaStorageError) as caught:
        log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=1, value_bytes=150))
    assert caught.value.code == 56
    assert_offline(log)
    assert log.log_end_offset == 1


def test_failed_fsync_fails_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = make_log(tmp_path, FakeClock(), flush_messages=1)
    monkeypatch.setattr("broker.log.flush_job.os.fsync", disk_error)  # the flush job's fsync
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    assert_offline(log)


def test_failed_snapshot_on_a_clean_close_is_only_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next start-up replays from an older snapshot (or the log start) instead."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=0))
    monkeypatch.setattr(log.producer_state, "take_snapshot", disk_error)
    log.close()
    assert log.closed
    log = reopen(log, clock, clean=True)
    assert log.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=0)).first_offset == 0


def test_log_manager_does_not_mark_a_dir_with_a_failed_log_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    good_dir, bad_dir = tmp_path / "a", tmp_path / "b"
    manager = LogManager(LogManagerConfig(log_dirs=(str(good_dir), str(bad_dir))), LogConfig(), clock)
    manager.startup()
    manager.get_or_create_log("t", 0)
    failing = manager.get_or_create_log("t", 1)  # the dir with the fewest partitions
    assert failing.directory.parent == bad_dir
    failing.append(tx(1, 0))
    monkeypatch.setattr(failing.segments.active.txn_index, "append", disk_error)
    with pytest.raises(KafkaStorageError):
        failing.append_control_marker(1, 0, 0, commit=False)
    assert asyncio.run(manager.run_retention_once(clock.now_ms + 10**12)) == 0
    manager.shutdown()
    assert (good_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert not (bad_dir / CLEAN_SHUTDOWN_FILE).exists()
    monkeypatch.undo()
    manager = LogManager(LogManagerConfig(log_dirs=(str(good_dir), str(bad_dir))), LogConfig(), clock)
    manager.startup()
    recovered = manager.get_log("t", failing.partition)
    assert recovered is not None
    assert recovered.segments.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 1, 2)]
    manager.shutdown()
