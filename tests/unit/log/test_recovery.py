"""Recovery at start-up (Kafka documentation §5.4.4 "Guarantees").

"The log maintains a CRC32 checksum for every record batch flushed to disk. On log recovery each
record batch is validated. ... If the log is found to be corrupted (length negative, offsets not
monotonically increasing, or CRC mismatch), the log is truncated to the last valid offset."
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.log import Log
from broker.log.recovery import load_log
from tests.unit.log.helpers import FakeClock, batch, make_log, read_all, reopen


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _ends(log: Log) -> list[tuple[int, int]]:
    """``(byte end, next offset)`` of every batch of the active segment."""
    from broker.log.scan import iter_headers

    segment = log.segments.active
    return [(pos + h.size, h.next_offset) for pos, h in iter_headers(segment.fd, 0, segment.size_bytes)]


def test_truncating_the_active_segment_at_every_byte_keeps_the_whole_batches(tmp_path: Path, clock: FakeClock) -> None:
    """A torn tail (crash mid-write) loses only the torn batch and nothing before it."""
    original = make_log(tmp_path / "orig", clock, index_interval_bytes=50)
    for i in range(5):
        original.append(batch(1 + i % 3, tag=i, value_bytes=1))
    ends = _ends(original)
    original.close()
    data = original.segments.active.log_path.read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    log_path = work / "00000000000000000000.log"
    for cut in range(len(data) + 1):
        for stale in work.iterdir():
            stale.unlink()  # no index files: as if they were never flushed
        log_path.write_bytes(data[:cut])
        recovered = load_log(work, "t", 0, original.config, clock)
        whole = [(end, nxt) for end, nxt in ends if end <= cut]
        expected_size, expected_end = whole[-1] if whole else (0, 0)
        assert (recovered.segments.active.size_bytes, recovered.log_end_offset) == (expected_size, expected_end)
        assert read_all(recovered) == list(range(expected_end))
        assert recovered.append(batch(1)).first_offset == expected_end
        recovered.close(flush=False)


@pytest.mark.parametrize("victim", [0, 2, 4])
def test_flipped_byte_truncates_at_that_batch_and_drops_later_segments(
    tmp_path: Path, clock: FakeClock, victim: int
) -> None:
    log = make_log(tmp_path, clock, segment_bytes=1300)
    for i in range(16):
        log.append(batch(2, tag=i, value_bytes=60))
    assert len(log.segments) >= 3
    assert log.segments[1].base_offset >= 10
    first = log.segments[0]
    ends = [0, *(e for e, _ in _ends_of(first))]
    log.flush()
    path = first.log_path
    data = bytearray(path.read_bytes())
    data[ends[victim] + 70] ^= 0x01  # a byte inside batch ``victim``'s records
    path.write_bytes(bytes(data))
    recovered = reopen(log, clock, recovery_point=0)
    assert recovered.log_end_offset == 2 * victim
    assert len(recovered.segments) == 1
    assert read_all(recovered) == list(range(2 * victim))
    assert sorted(p.name for p in recovered.directory.glob("*.log")) == ["00000000000000000000.log"]


def _ends_of(segment: object) -> list[tuple[int, int]]:
    from broker.log.scan import iter_headers

    fd, size = segment.fd, segment.size_bytes  # type: ignore[attr-defined]
    return [(pos + h.size, h.next_offset) for pos, h in iter_headers(fd, 0, size)]


@pytest.mark.parametrize(
    "damage",
    [
        lambda buf, pos: struct.pack_into(">i", buf, pos + 8, -7),  # negative length
        lambda buf, pos: struct.pack_into(">i", buf, pos + 8, 10**8),  # length past the end
        lambda buf, pos: struct.pack_into(">q", buf, pos, 0),  # offsets go backwards
        lambda buf, pos: struct.pack_into(">b", buf, pos + 16, 1),  # magic
    ],
    ids=["negative-length", "oversized-length", "offset-backwards", "magic"],
)
def test_invalid_batch_headers_cut_the_log(tmp_path: Path, clock: FakeClock, damage: object) -> None:
    log = make_log(tmp_path, clock)
    for i in range(4):
        log.append(batch(3, tag=i))
    ends = [e for e, _ in _ends(log)]
    log.flush()
    data = bytearray(log.segments.active.log_path.read_bytes())
    damage(data, ends[1])  # type: ignore[operator]
    log.segments.active.log_path.write_bytes(bytes(data))
    recovered = reopen(log, clock)
    assert recovered.log_end_offset == 6
    assert read_all(recovered) == list(range(6))


def test_flushed_batches_survive_a_torn_unflushed_tail(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_bytes=500)
    for i in range(10):
        log.append(batch(2, tag=i, value_bytes=40))
    log.flush()
    flushed_end = log.log_end_offset
    for i in range(3):
        log.append(batch(2, tag=50 + i, value_bytes=40))
    segment = log.segments.active
    os.truncate(segment.log_path, segment.size_bytes - 3)  # the last unflushed batch is torn
    recovered = reopen(log, clock, recovery_point=flushed_end)
    assert recovered.log_end_offset >= flushed_end
    assert recovered.log_end_offset == log.log_end_offset - 2
    assert read_all(recovered) == list(range(recovered.log_end_offset))


@pytest.mark.parametrize(
    "spoil",
    [
        lambda p: p.unlink(),
        lambda p: p.write_bytes(b"\x01\x02\x03"),
        lambda p: p.write_bytes(struct.pack(">ii", 1, 10**6)),  # points past the log
        lambda p: p.write_bytes(struct.pack(">ii", 0, 10)),  # not a batch boundary
    ],
    ids=["missing", "odd-size", "past-the-end", "not-a-boundary"],
)
def test_bad_offset_index_of_a_closed_segment_is_rebuilt(tmp_path: Path, clock: FakeClock, spoil: object) -> None:
    log = make_log(tmp_path, clock, segment_bytes=800, index_interval_bytes=100)
    for i in range(20):
        log.append(batch(2, tag=i, value_bytes=30))
    log.close()
    middle = log.segments[1]
    good = middle.offset_index.path.read_bytes()
    assert good
    spoil(middle.offset_index.path)  # type: ignore[operator]
    recovered = reopen(log, clock, clean=True)
    assert read_all(recovered) == list(range(40))
    assert middle.offset_index.path.read_bytes() == good


def test_unsorted_index_entries_are_rebuilt_when_first_used(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_bytes=800, index_interval_bytes=100)
    for i in range(20):
        log.append(batch(2, tag=i, value_bytes=30))
    log.close()
    path = log.segments[0].offset_index.path
    good = path.read_bytes()
    entries = [good[i : i + 8] for i in range(0, len(good), 8)]
    assert len(entries) >= 3
    path.write_bytes(entries[1] + entries[0] + b"".join(entries[2:]))  # last entry still valid
    recovered = reopen(log, clock, clean=True)
    assert read_all(recovered, max_bytes=100) == list(range(40))
    assert path.read_bytes() == good


def test_missing_time_index_is_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_bytes=800, index_interval_bytes=100)
    for i in range(20):
        log.append(batch(2, tag=i, timestamp_ms=clock.now_ms + i))
    log.close()
    log.segments[0].time_index.path.unlink()
    recovered = reopen(log, clock, clean=True)
    assert recovered.fetch_offset_by_timestamp(clock.now_ms + 3) == (6, clock.now_ms + 3)
    assert log.segments[0].time_index.path.exists()


def test_stray_files_are_removed(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    log.append(batch(2))
    log.close()
    strays = ["00000000000000000099.log.deleted", "00000000000000000000.log.cleaned", "00000000000000000000.log.swap",
              "00000000000000000007.index", "00000000000000000007.timeindex", "x.tmp"]  # fmt: skip
    for name in strays:
        (log.directory / name).write_bytes(b"junk")
    (log.directory / "partition.metadata").write_text("version: 0\n")
    recovered = reopen(log, clock, clean=True)
    names = {p.name for p in recovered.directory.iterdir()}
    assert names.isdisjoint(strays)
    assert "partition.metadata" in names  # files of other owners are left alone
    assert read_all(recovered) == [0, 1]


def test_clean_reopen_keeps_everything_and_sets_the_recovery_point(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock, segment_bytes=700, index_interval_bytes=64)
    for i in range(25):
        log.append(batch(3, tag=i, value_bytes=25))
    log.close()
    again = reopen(log, clock, clean=True)
    assert (again.log_end_offset, again.recovery_point) == (75, 75)
    assert [s.base_offset for s in again.segments] == [s.base_offset for s in log.segments]
    for fresh, old in zip(again.segments, log.segments, strict=True):
        assert (fresh.next_offset, fresh.max_timestamp_ms) == (old.next_offset, old.max_timestamp_ms)
    assert read_all(again, max_bytes=200) == list(range(75))


def test_log_start_offset_past_the_end_starts_afresh(tmp_path: Path, clock: FakeClock) -> None:
    log = make_log(tmp_path, clock)
    log.append(batch(2))
    log.close()
    again = load_log(log.directory, "t", 0, log.config, clock, log_start_offset=10, clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (10, 10)
    assert again.append(batch(1)).first_offset == 10


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=25),
    cut_fraction=st.floats(0, 1),
    garbage=st.binary(max_size=80),
)
def test_any_torn_tail_recovers_to_a_prefix(
    tmp_path: Path, counts: list[int], cut_fraction: float, garbage: bytes
) -> None:
    clock = FakeClock()
    work = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
    log = make_log(work, clock, segment_bytes=400, index_interval_bytes=60)
    for i, count in enumerate(counts):
        log.append(batch(count, tag=i, value_bytes=20))
    log.flush()
    segment = log.segments.active
    ends = [0, *(e for e, _ in _ends(log))]
    nexts = [segment.base_offset, *(n for _, n in _ends(log))]
    cut = int(segment.size_bytes * cut_fraction)
    with segment.log_path.open("r+b") as f:
        f.truncate(cut)
        f.seek(cut)
        f.write(garbage)
    kept = max(i for i, end in enumerate(ends) if end <= cut)
    recovered = reopen(log, clock)
    assert recovered.log_end_offset == nexts[kept]
    assert read_all(recovered) == list(range(nexts[kept]))
    recovered.close()


def test_unclean_recovery_defers_fsync_to_the_next_flush(tmp_path: Path, clock: FakeClock) -> None:
    """Recovery fsyncs nothing (a start-up may recover many segments): the recovery point stays
    at the checkpoint and the next flush makes the recovered segments and their indexes durable."""
    log = make_log(tmp_path, clock, segment_bytes=600, index_interval_bytes=100)
    for i in range(12):
        log.append(batch(2, tag=i, value_bytes=60))
    checkpoint = log.segments[1].base_offset
    recovered = reopen(log, clock, recovery_point=checkpoint)
    assert recovered.recovery_point == checkpoint
    assert all(s.dirty for s in recovered.segments[1:])
    assert not recovered.segments[0].dirty  # below the recovery point: trusted, untouched
    recovered.flush()
    assert recovered.recovery_point == recovered.log_end_offset == 24
    assert not any(s.dirty for s in recovered.segments)
    rebuilt = recovered.segments[1].offset_index.path
    assert rebuilt.stat().st_size > 0  # a recovered, inactive segment's index is on disk
    recovered.close()
    again = reopen(recovered, clock, clean=True)
    assert read_all(again, max_bytes=150) == list(range(24))
