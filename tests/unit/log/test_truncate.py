"""Truncation for replication and Raft: ``truncate_to`` and ``truncate_fully_and_start_at``.

Kafka documentation §5.4.4 "Guarantees": a replica must not let data "reappear": a follower truncates to the leader's
log before fetching, so that offsets and data agree on every replica.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log import Log
from tests.unit.log.helpers import T0_MS, FakeClock, batch, make_log, read_all, reopen


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Log:
    created = make_log(tmp_path, clock, segment_bytes=700, index_interval_bytes=64)
    for i in range(20):  # batches of 2 records: boundaries at even offsets
        created.append(batch(2, tag=i, value_bytes=40, timestamp_ms=T0_MS + i))
    return created


@pytest.mark.parametrize("target", [0, 2, 8, 20, 38])
def test_truncate_to_a_batch_boundary(log: Log, clock: FakeClock, target: int) -> None:
    assert log.truncate_to(target)
    assert log.log_end_offset == target
    assert read_all(log) == list(range(target))
    assert all(s.base_offset <= target for s in log.segments)
    info = log.append(batch(2, tag=99))
    assert info.first_offset == target
    log.close()
    again = reopen(log, clock, clean=True)
    assert read_all(again) == list(range(target + 2))


def test_truncate_mid_batch_cuts_the_whole_batch(log: Log) -> None:
    log.truncate_to(9)
    assert log.log_end_offset == 8


def test_truncate_at_or_beyond_the_end_does_nothing(log: Log) -> None:
    assert not log.truncate_to(40)
    assert not log.truncate_to(100)
    assert log.log_end_offset == 40


def test_truncate_lowers_the_recovery_point_and_the_max_timestamp(log: Log) -> None:
    log.flush()
    assert log.recovery_point == 40
    log.truncate_to(10)
    assert log.recovery_point == 10
    assert log.segments.active.max_timestamp_ms == T0_MS + 4


def test_truncated_segments_become_deleted_files(log: Log, clock: FakeClock) -> None:
    before = len(log.segments)
    log.truncate_to(4)
    assert len(log.segments) < before
    assert any(p.name.endswith(".log.deleted") for p in log.directory.iterdir())
    log.delete_pending_files(clock.now_ms + log.config.file_delete_delay_ms)
    assert not any(p.name.endswith(".deleted") for p in log.directory.iterdir())


def test_truncate_fully_and_start_at(log: Log) -> None:
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (1000, 1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.append(batch(1)).first_offset == 1000
    assert read_all(log) == [1000]


def test_truncate_below_the_first_segment_starts_afresh(log: Log) -> None:
    log.delete_records_before(30)
    first = log.segments[0].base_offset
    assert first > 0
    log.truncate_to(first - 1)
    assert (log.log_start_offset, log.log_end_offset) == (first - 1, first - 1)


def test_restart_at_the_same_base_offset_survives_the_delayed_deletion(log: Log, clock: FakeClock) -> None:
    """The old segment 0 becomes ``*.deleted``; removing it later must not touch the new one."""
    log.truncate_fully_and_start_at(0)
    log.append(batch(2))
    assert log.delete_pending_files(clock.now_ms + log.config.file_delete_delay_ms) > 0
    assert read_all(log) == [0, 1]
    assert (log.directory / "00000000000000000000.log").exists()


def test_a_closed_log_refuses_work(log: Log) -> None:
    from broker.log.errors import KafkaStorageError

    log.close()
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
