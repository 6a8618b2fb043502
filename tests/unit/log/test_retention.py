"""Retention by time and size, the log start offset, and non-blocking deletion (Kafka documentation §5.4.3 "Deletes").

"Data is deleted one log segment at a time ... A segment is deleted when the retention time is
greater than the largest timestamp recorded in the segment file" and "segments are deleted,
oldest first, until the rest of the partition is under the configured size"; "segments are
deleted copy-on-write style so that reads are not blocked".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.errors import OffsetOutOfRangeError
from broker.log.log import Log
from broker.log.retention import SegmentFacts, segments_to_delete
from tests.unit.log.helpers import T0_MS, FakeClock, batch, make_log, offsets_in, read_all

HOUR_MS = 3_600_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _facts(*segments: tuple[int, int, int, int]) -> list[SegmentFacts]:
    return [SegmentFacts(base, nxt, size, ts, 0) for base, nxt, size, ts in segments]


SEGMENTS = _facts((0, 10, 100, 1000), (10, 20, 100, 2000), (20, 30, 100, 3000), (30, 35, 50, 4000))


@pytest.mark.parametrize(
    ("retention_ms", "now", "count"),
    [(-1, 10**9, 0), (1000, 2000, 0), (1000, 2001, 1), (1000, 3001, 2), (1000, 4001, 3), (1000, 5001, 4)],
)
def test_time_retention_uses_largest_timestamp(retention_ms: int, now: int, count: int) -> None:
    decision = segments_to_delete(SEGMENTS, LogConfig(retention_ms=retention_ms), now, 0, 35)
    assert decision.count == count


@pytest.mark.parametrize(("retention_bytes", "count"), [(-1, 0), (350, 0), (250, 1), (150, 2), (0, 4)])
def test_size_retention_oldest_first(retention_bytes: int, count: int) -> None:
    config = LogConfig(retention_ms=-1, retention_bytes=retention_bytes)
    decision = segments_to_delete(SEGMENTS, config, 0, 0, 35)
    assert decision.count == count
    assert decision.reason == ("retention.bytes" if count else "")


def test_retention_stops_at_the_high_watermark_and_spares_an_empty_active_segment() -> None:
    config = LogConfig(retention_ms=1000)
    assert segments_to_delete(SEGMENTS, config, 10**9, 0, 19).count == 1
    with_empty_active = [*SEGMENTS, SegmentFacts(35, 35, 0, -1, 0)]
    assert segments_to_delete(with_empty_active, config, 10**9, 0, 35).count == 4


def test_log_start_offset_deletes_segments_wholly_below_it() -> None:
    config = LogConfig(retention_ms=-1)
    assert segments_to_delete(SEGMENTS, config, 0, 19, 35).count == 1
    decision = segments_to_delete(SEGMENTS, config, 0, 20, 35)
    assert (decision.count, decision.reason) == (2, "log-start-offset")


def test_compact_only_policy_disables_time_and_size_retention() -> None:
    config = LogConfig(retention_ms=1, retention_bytes=0, cleanup_policy=("compact",))
    assert segments_to_delete(SEGMENTS, config, 10**9, 0, 35).count == 0


def _log_with_hourly_segments(tmp_path: Path, clock: FakeClock, **config: object) -> Log:
    """Five segments of 4 records (offsets 0..19), timestamps one hour apart per segment."""
    log = make_log(tmp_path, clock, **config)
    for hour in range(5):
        clock.now_ms = T0_MS + hour * HOUR_MS
        log.append(batch(2, timestamp_ms=T0_MS + hour * HOUR_MS, tag=hour))
        log.append(batch(2, timestamp_ms=T0_MS + hour * HOUR_MS + 1, tag=hour))
        log.roll()
    return log


def test_time_retention_on_a_log(tmp_path: Path, clock: FakeClock) -> None:
    log = _log_with_hourly_segments(tmp_path, clock, retention_ms=2 * HOUR_MS)
    clock.now_ms = T0_MS + 4 * HOUR_MS + 1
    assert log.delete_old_segments() == 2  # segments of hours 0 and 1 (largest ts + 2h < now)
    assert log.log_start_offset == 8
    assert read_all(log) == list(range(8, 20))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)


def test_everything_expired_rolls_and_keeps_offsets(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, retention_ms=HOUR_MS)
    log.append(batch(3, timestamp_ms=T0_MS))
    clock.advance(HOUR_MS + 1)
    assert log.delete_old_segments() == 1
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert [s.base_offset for s in log.segments] == [3]
    info = log.append(batch(1))
    assert info.first_offset == 3


def test_size_retention_on_a_log(tmp_path: Path, clock: FakeClock) -> None:
    """Kafka deletes a segment only while what remains is still at least ``retention.bytes``."""
    log = _log_with_hourly_segments(tmp_path, clock, retention_ms=-1)
    segment_bytes = log.segments[0].size_bytes
    log.config = LogConfig(retention_ms=-1, retention_bytes=2 * segment_bytes + 1)
    assert log.delete_old_segments() == 2
    assert log.size_bytes == 3 * segment_bytes
    log.config = LogConfig(retention_ms=-1, retention_bytes=2 * segment_bytes)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 12
    assert log.size_bytes == 2 * segment_bytes


def test_deleted_files_wait_for_the_delay_and_open_slices_keep_reading(tmp_path: Path, clock: FakeClock) -> None:
    log = _log_with_hourly_segments(tmp_path, clock, retention_ms=HOUR_MS, file_delete_delay_ms=60_000)
    chunk = log.read(0, 10_000)
    clock.now_ms = T0_MS + 10 * HOUR_MS
    assert log.delete_old_segments() == 5
    names = sorted(p.name for p in log.directory.iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    assert log.delete_pending_files(clock.now_ms + 59_999) == 0
    assert log.delete_pending_files(clock.now_ms + 60_000) == 5
    assert not any(name.endswith(".deleted") for name in (p.name for p in log.directory.iterdir()))
    assert offsets_in(chunk.read_bytes()) == [0, 1, 2, 3]  # the unlinked inode is still readable
    chunk.close()


def test_delete_records_before(tmp_path: Path, clock: FakeClock) -> None:
    log = _log_with_hourly_segments(tmp_path, clock, retention_ms=-1)
    assert log.delete_records_before(6) == 6
    assert [s.base_offset for s in log.segments][:2] == [4, 8]  # segment [0, 4) deleted
    assert log.delete_records_before(2) == 6  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(15, high_watermark=14)
    assert read_all(log) == list(range(6, 20))
