"""Offset and time index files: Kafka's binary layouts, sparse lookups, truncation, sanity checks.

Kafka documentation §5.4.2 "Reads": "the search is done as a simple binary search variation against an in-memory
range maintained for each file" — first over segment base offsets, then over index entries.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.index_file import CorruptIndexError
from broker.log.offset_index import OffsetIndex
from broker.log.time_index import TimeIndex


def _offset_index(path: Path, base: int = 100, max_bytes: int = 1024, exists: bool = False) -> OffsetIndex:
    return OffsetIndex(path, base, max_bytes, exists=exists)


def test_offset_index_golden_bytes(tmp_path: Path) -> None:
    """Entries are big-endian (int32 relative offset, int32 position), nothing else in the file."""
    index = _offset_index(tmp_path / "a.index")
    index.append(105, 4200)
    index.append(131, 9000)
    index.flush()
    assert (tmp_path / "a.index").read_bytes() == struct.pack(">iiii", 5, 4200, 31, 9000)


def test_time_index_golden_bytes(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", 100, 1024, exists=False)
    index.maybe_append(1_700_000_000_000, 105)
    index.maybe_append(1_700_000_000_000, 110)  # not larger: skipped
    index.maybe_append(1_700_000_000_500, 131)
    index.flush()
    data = (tmp_path / "a.timeindex").read_bytes()
    assert data == struct.pack(">qiqi", 1_700_000_000_000, 5, 1_700_000_000_500, 31)


def test_offset_lookup_is_largest_lower_bound(tmp_path: Path) -> None:
    index = _offset_index(tmp_path / "a.index")
    for offset, position in [(110, 1000), (120, 2000), (130, 3000)]:
        index.append(offset, position)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**12) == (130, 3000)
    assert index.floor_position(999) is None
    assert index.floor_position(2500) == (120, 2000)


def test_flush_appends_only_new_entries_and_reload_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = _offset_index(path)
    index.append(101, 10)
    index.flush()
    index.append(102, 20)
    index.append(103, 30)
    index.flush()
    again = _offset_index(path, exists=True)
    assert again.entries == 3
    assert again.lookup(102) == (102, 20)
    assert again.last_persisted_entry() == (3, 30)


def test_truncate_removes_entries_at_or_above_offset_in_memory_and_file(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    index = _offset_index(path)
    for i in range(1, 6):
        index.append(100 + i * 10, i * 100)
    index.flush()
    index.truncate_to(130)
    assert index.last_entry() == (120, 200)
    assert path.stat().st_size == 16
    times = TimeIndex(tmp_path / "a.timeindex", 100, 1024, exists=False)
    for i in range(1, 6):
        times.maybe_append(i, 100 + i * 10)
    times.truncate_to(130)
    assert times.last_entry() == (2, 120)


def test_full_index(tmp_path: Path) -> None:
    index = _offset_index(tmp_path / "a.index", max_bytes=8 * 3 + 5)
    for i in range(3):
        assert not index.is_full()
        index.append(101 + i, 10 * (i + 1))
    assert index.is_full()


def test_time_lookup_before(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", 100, 1024, exists=False)
    for ts, offset in [(10, 105), (20, 110), (30, 120)]:
        index.maybe_append(ts, offset)
    assert index.lookup_before(10) == 100  # nothing strictly earlier: start of the segment
    assert index.lookup_before(11) == 105
    assert index.lookup_before(30) == 110
    assert index.lookup_before(1000) == 120


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 7,  # not a multiple of the entry size
        struct.pack(">iiii", 5, 100, 4, 200),  # offsets decrease
        struct.pack(">iiii", 5, 100, 6, 100),  # positions do not increase
        struct.pack(">ii", -1, 100),  # negative relative offset
    ],
)
def test_corrupt_offset_index_detected(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        _offset_index(path, exists=True).load()


def test_corrupt_time_index_detected(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 20, 5, 10, 6))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 100, 1024, exists=True).load()
