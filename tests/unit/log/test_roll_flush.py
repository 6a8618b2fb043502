"""Rolling segments and the flush policy (Kafka documentation §5.4.1 "Writes").

"The log rolls over to a fresh file when it reaches a configurable size (say 1GB)"; Kafka also
rolls by ``segment.ms`` (from the first batch's timestamp, or the segment's creation when it has
none), when an index is full and when an offset would not fit a relative int32. "M gives the
number of messages to write before forcing the OS to flush the file to disk, and S gives a number
of seconds after which a flush is forced."
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log import Log
from tests.unit.log.helpers import T0_MS, FakeClock, batch, make_log, read_all


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_roll_by_size_keeps_segments_within_segment_bytes(tmp_path: Path, clock: FakeClock) -> None:
    one = len(batch(2, value_bytes=100))
    log = make_log(tmp_path, clock, segment_bytes=3 * one)
    for _ in range(10):
        log.append(batch(2, value_bytes=100))
    sizes = [s.size_bytes for s in log.segments]
    assert sizes == [3 * one, 3 * one, 3 * one, one]
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    names = sorted(p.name for p in log.directory.iterdir() if p.suffix == ".log")
    assert names == [f"{base:020d}.log" for base in (0, 6, 12, 18)]
    assert read_all(log) == list(range(20))


def test_roll_by_time_from_first_batch_timestamp(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_ms=1000)
    log.append(batch(1, timestamp_ms=T0_MS))
    log.append(batch(1, timestamp_ms=T0_MS + 1000))  # exactly segment.ms later: no roll yet
    assert len(log.segments) == 1
    log.append(batch(1, timestamp_ms=T0_MS + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_time_without_timestamps_uses_the_clock(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_ms=1000)
    log.append(batch(1, timestamp_ms=-1))
    clock.advance(1000)
    log.append(batch(1, timestamp_ms=-1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(batch(1, timestamp_ms=-1))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_the_offset_index_is_full(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_index_bytes=24, index_interval_bytes=0)
    for i in range(8):
        log.append(batch(1, timestamp_ms=T0_MS + i))
    # the time index (12-byte entries) holds 2 entries: entries for batches 1, 2, then roll
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert read_all(log) == list(range(8))


def test_roll_when_relative_offset_would_overflow(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    log.append_as_follower(batch(2, base_offset=0))
    far = 2**31 + 10
    log.append_as_follower(batch(1, base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 1
    with log.read(far, 100) as chunk:
        assert chunk.size > 0
    with log.read(1, 100) as chunk:
        assert chunk.next_offset == 2


def test_roll_replaces_an_empty_active_segment(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    log.append_as_follower(batch(1, base_offset=50))  # first segment starts at 0 but is empty
    assert [s.base_offset for s in log.segments] == [0]
    log.roll()
    log.roll()  # rolling an empty active segment at the same offset is a no-op
    assert [s.base_offset for s in log.segments] == [0, 51]


def test_roll_flushes_the_old_segment_and_moves_the_recovery_point(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    log.append(batch(3))
    assert log.recovery_point == 0
    log.roll()
    assert log.recovery_point == 3
    assert not log.segments[0].dirty


def test_flush_messages(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, flush_messages=5)
    log.append(batch(3))
    assert log.recovery_point == 0
    log.append(batch(3))
    assert log.recovery_point == 6
    assert not log.segments.active.dirty


def test_flush_ms_is_driven_by_the_clock(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, flush_ms=1000)
    log.append(batch(2))
    assert not log.flusher.flush_if_due(clock.now_ms + 999)
    assert log.flusher.flush_if_due(clock.now_ms + 1000)
    assert log.recovery_point == 2
    assert not log.flusher.flush_if_due(clock.now_ms + 5000)  # nothing unflushed


def test_index_entries_reach_disk_when_the_segment_stops_being_active(tmp_path: Path, clock: FakeClock) -> None:
    """The active segment's indexes are rebuilt by recovery after a crash, so a flush fsyncs only
    its log file; roll (and close) write and fsync the indexes of the segment left behind."""
    log = make_log(tmp_path, clock, index_interval_bytes=0)
    for _ in range(4):
        log.append(batch(1))
    index_path = log.segments.active.offset_index.path
    log.flush()
    assert index_path.stat().st_size == 0  # entries of the active segment stay in memory
    log.roll()
    assert index_path.stat().st_size == 3 * 8
    assert log.segments[0].time_index.path.stat().st_size == 12


def test_appends_keep_going_after_reopen(tmp_path: Path, clock: FakeClock) -> None:
    from tests.unit.log.helpers import reopen

    log = make_log(tmp_path, clock, segment_bytes=400)
    for i in range(6):
        log.append(batch(2, tag=i, value_bytes=50))
    log.close()
    again = reopen(log, clock, clean=True)
    again.append(batch(2, tag=9, value_bytes=50))
    assert read_all(again) == list(range(14))
    assert isinstance(again, Log)
