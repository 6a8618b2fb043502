"""A consumer reading a partition front to back (Kafka documentation §5.4.2 "Reads": "Reads are done by giving the
64-bit logical offset of a message and an S-byte max chunk size"): each read starts where the
last one stopped. The segment remembers the header of the batch a read stopped before, so the
next read does not read it from the file again; truncation forgets it.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

import broker.log.segment as segment_module
from broker.log.log import Log
from pyspark_log.records.header import iter_batch_headers
from tests.unit.log.helpers import FakeClock, batch, make_log

SIZES = [3, 1, 7, 2, 5, 4, 6, 1, 3, 8]  # records per batch, so batch sizes differ


@pytest.fixture
def log(tmp_path: Path) -> Log:
    """One segment holding batches of different sizes (offsets 0..39)."""
    created = make_log(tmp_path, FakeClock(), segment_bytes=1 << 20, index_interval_bytes=150)
    for i, count in enumerate(SIZES):
        created.append(batch(count, tag=i, value_bytes=60))
    assert len(created.segments) == 1
    return created


def _batches(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]


def _segment_bytes(log: Log) -> bytes:
    return Path(log.segments[0].log_path).read_bytes()


def _expected() -> list[tuple[int, int]]:
    out, base = [], 0
    for count in SIZES:
        out.append((base, base + count - 1))
        base += count
    return out


@pytest.mark.parametrize("max_bytes", [1, 300, 700, 1500])
def test_a_sequential_reader_gets_every_batch_once_whole_and_in_order(log: Log, max_bytes: int) -> None:
    seen: list[tuple[int, int]] = []
    offset = 0
    while offset < log.log_end_offset:
        with log.read(offset, max_bytes) as chunk:
            got = _batches(chunk.read_bytes())
            assert got, offset  # KIP-74: at least the first batch, whole
            seen.extend(got)
            offset = chunk.next_offset
    assert seen == _expected()


def test_the_next_read_starts_from_the_remembered_header(log: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[int] = []
    real = segment_module.iter_headers

    def counting(fd: int, start: int, end: int):  # type: ignore[no-untyped-def]
        walks.append(start)
        return real(fd, start, end)

    monkeypatch.setattr(segment_module, "iter_headers", counting)
    first_size, second_size = (h.size for _, h in list(iter_batch_headers(_segment_bytes(log)))[:2])
    # room for the first batch and not the second: the walk past the first stops at the second
    with log.read(0, first_size + second_size - 1) as first:
        assert _batches(first.read_bytes()) == [(0, 2)]
    walks.clear()
    with log.read(3, second_size + 1) as second:
        assert _batches(second.read_bytes()) == [(3, 3)]
    # the second batch's header came from memory; only the look past it touched the file
    assert walks == [first_size + second_size]


def test_truncation_forgets_the_remembered_header(log: Log) -> None:
    first_size, second_size = (h.size for _, h in list(iter_batch_headers(_segment_bytes(log)))[:2])
    with log.read(0, first_size + second_size - 1) as first:
        position = first.position + first.size  # the second batch (offset 3), remembered
    segment = log.segments[0]
    log.truncate_to(3)
    log.append(batch(6, tag=99, value_bytes=60))  # a different batch where the second was
    found = segment.find_batch(3, position)
    assert found is not None
    assert found[0] == position
    assert (found[1].base_offset, found[1].last_offset) == (3, 8)
    with log.read(3, 1) as chunk:
        assert _batches(chunk.read_bytes()) == [(3, 8)]


def test_a_slice_dropped_without_close_releases_its_descriptor(log: Log) -> None:
    chunk = log.read(0, 1)
    fd = chunk.fileno()
    held = os.fstat(fd)
    del chunk
    gc.collect()
    # the descriptor is closed; its number may already serve another file (a thread of another
    # test in this process opened one), but no longer this slice's segment
    try:
        now = os.fstat(fd)
    except OSError:
        return
    assert (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino), "the slice's descriptor is still open"
