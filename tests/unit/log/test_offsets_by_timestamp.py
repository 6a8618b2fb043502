"""ListOffsets lookups: first record with timestamp ≥ T, earliest, latest, max timestamp.

The time index narrows the search, batch headers (maxTimestamp) find the batch, and exactly one
batch is decoded to find the record (Kafka ``LogSegment.findOffsetByTimestamp``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tests.unit.log.helpers import T0_MS, FakeClock, batch, make_log, reopen


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Log:
    """40 batches of 3 records; record i has timestamp T0 + 10*i, except a late spike."""
    created = make_log(tmp_path, clock, segment_bytes=1500, index_interval_bytes=100)
    for b in range(40):
        stamps = [T0_MS + 10 * (3 * b + j) for j in range(3)]
        if b == 25:
            stamps[1] = T0_MS + 100_000  # offset 76 has the largest timestamp
        created.append(batch(3, timestamps=stamps, tag=b))
    assert len(created.segments) > 2
    return created


def _expected(target: int) -> tuple[int, int] | None:
    for offset in range(120):
        ts = T0_MS + 100_000 if offset == 76 else T0_MS + 10 * offset
        if ts >= target:
            return offset, ts
    return None


def test_first_offset_with_timestamp_at_or_after(log: Log) -> None:
    for target in [T0_MS - 5, T0_MS, T0_MS + 1, T0_MS + 35, T0_MS + 760, T0_MS + 770, T0_MS + 1190]:
        assert log.fetch_offset_by_timestamp(target) == _expected(target), target
    assert log.fetch_offset_by_timestamp(T0_MS + 1191) == (76, T0_MS + 100_000)
    assert log.fetch_offset_by_timestamp(T0_MS + 100_001) is None


def test_every_timestamp_lookup_matches_a_linear_scan(log: Log) -> None:
    for target in range(T0_MS - 3, T0_MS + 1200, 7):
        assert log.fetch_offset_by_timestamp(target) == _expected(target), target


def test_special_timestamps(log: Log) -> None:
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (120, -1)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (76, T0_MS + 100_000)
    log.delete_records_before(31)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (31, -1)
    assert log.fetch_offset_by_timestamp(T0_MS) == (31, T0_MS + 310)  # nothing below log start


def test_lookups_after_reopen_use_the_persisted_time_index(log: Log, clock: FakeClock) -> None:
    log.close()
    again = reopen(log, clock, clean=True)
    assert again.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (76, T0_MS + 100_000)
    assert again.fetch_offset_by_timestamp(T0_MS + 500) == (50, T0_MS + 500)


def test_log_append_time_topic(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    log.append(batch(2, timestamp_ms=5))
    clock.advance(100)
    log.append(batch(2, timestamp_ms=5))
    assert log.fetch_offset_by_timestamp(clock.now_ms - 50) == (2, clock.now_ms)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (2, clock.now_ms)


def test_empty_log(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    assert log.fetch_offset_by_timestamp(T0_MS) is None
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (0, -1)
