"""Appends and reads at every boundary (Kafka documentation §5.4.2 "Reads").

"Reads are done by giving the 64-bit logical offset of a message and an S-byte max chunk size":
a read returns whole batches starting with the batch that contains the offset; at least one
whole batch even when it is larger than the chunk (KIP-74); nothing at or above the high
watermark; OFFSET_OUT_OF_RANGE below the log start or above the log end.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

import pytest

from broker.log.errors import OffsetOutOfRangeError
from broker.log.log import Log
from pyspark_log.records.header import iter_batch_headers
from tests.unit.log.helpers import FakeClock, batch, batch_bases, make_log, offsets_in, read_all

BATCH_RECORDS = 3


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Log:
    """30 batches of 3 records (offsets 0..89) over several 1 KiB segments, sparse indexes."""
    created = make_log(tmp_path, clock, segment_bytes=1024, index_interval_bytes=150)
    for i in range(30):
        created.append(batch(BATCH_RECORDS, tag=i, value_bytes=20 + (i % 4) * 15))
    assert len(created.segments) > 3
    return created


def _batches(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]


def test_append_returns_offsets_and_log_start(log: Log) -> None:
    info = log.append(batch(4))
    assert (info.first_offset, info.last_offset) == (90, 93)
    assert info.log_start_offset == 0
    assert info.records_count == 4
    assert log.log_end_offset == 94


def test_read_every_offset_returns_the_batch_that_contains_it(log: Log) -> None:
    for offset in range(log.log_end_offset):
        with log.read(offset, 1) as chunk:
            batches = _batches(chunk.read_bytes())
        assert len(batches) == 1, offset
        base, last = batches[0]
        assert base <= offset <= last
        assert base == offset - offset % BATCH_RECORDS
        assert chunk.next_offset == last + 1


def test_reads_stay_in_one_segment_and_continue_in_the_next(log: Log) -> None:
    segments = log.segments
    for segment, following in itertools.pairwise(segments):
        with log.read(segment.base_offset, 1 << 20) as chunk:
            assert batch_bases(chunk.read_bytes())[0] == segment.base_offset
            assert chunk.size == segment.size_bytes
            assert chunk.next_offset == following.base_offset
        with log.read(segment.next_offset - 1, 1 << 20) as last_batch:  # last offset of a segment
            assert _batches(last_batch.read_bytes())[-1][1] == segment.next_offset - 1
            assert last_batch.next_offset == following.base_offset


def test_read_all_sees_every_offset_once(log: Log) -> None:
    assert read_all(log) == list(range(90))
    assert read_all(log, max_bytes=1) == list(range(90))
    assert read_all(log, start=44, max_bytes=300) == list(range(44, 90))


def test_never_a_partial_batch_and_kip74_first_batch_whole(log: Log) -> None:
    for max_bytes in (0, 1, 60, 150, 151, 400, 700, 5000):
        for offset in range(0, 90, 7):
            with log.read(offset, max_bytes) as chunk:
                data = chunk.read_bytes()
            sizes = [h.size for _, h in iter_batch_headers(data)]  # raises on a partial batch
            assert sizes, (offset, max_bytes)
            assert sum(sizes) <= max(max_bytes, sizes[0])


def test_min_one_batch_false_returns_empty_when_first_batch_too_big(log: Log) -> None:
    chunk = log.read(0, 10, min_one_batch=False)
    assert chunk.size == 0
    assert chunk.next_offset == 0


def test_read_at_end_is_empty_and_beyond_or_below_is_out_of_range(log: Log) -> None:
    end = log.read(90, 1000)
    assert (end.size, end.next_offset) == (0, 90)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(91, 1000)
    assert info.value.code == 1
    log.delete_records_before(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 1000)
    with log.read(10, 1) as chunk:  # mid-batch at the new log start: the whole batch [9, 11]
        assert _batches(chunk.read_bytes()) == [(9, 11)]


def test_max_offset_hides_batches_at_or_above_it(log: Log) -> None:
    for max_offset in (3, 4, 5, 6, 40, 89):
        seen = []
        offset = 0
        while True:
            with log.read(offset, 500, max_offset) as chunk:
                if chunk.size == 0:
                    break
                seen += _batches(chunk.read_bytes())
                offset = chunk.next_offset
        assert seen, max_offset
        assert all(last < max_offset for _, last in seen)
        boundary = max_offset - max_offset % BATCH_RECORDS
        assert seen[-1][1] == boundary - 1  # a batch straddling max_offset is not returned
    assert log.read(30, 500, max_offset=30).size == 0
    assert log.read(31, 500, max_offset=30).size == 0


def test_read_from_an_empty_log(tmp_path: Path, clock: FakeClock) -> None:
    empty = make_log(tmp_path, clock)
    assert empty.read(0, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        empty.read(1, 100)


def test_sendfile_to_a_socket_and_dev_null_match_read_bytes(log: Log) -> None:
    with log.read(0, 5000) as chunk:
        expected = chunk.read_bytes()
        left, right = socket.socketpair()
        with left, right:
            assert chunk.send_to(left.fileno()) == chunk.size
            received = b""
            while len(received) < chunk.size:
                received += right.recv(65536)
        assert received == expected
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            assert chunk.send_to(null) == chunk.size
        finally:
            os.close(null)
    assert offsets_in(expected)[0] == 0


def test_slice_survives_segment_close(log: Log) -> None:
    chunk = log.read(0, 100000)
    expected = chunk.read_bytes()
    log.close()
    assert chunk.read_bytes() == expected
    chunk.close()
    with pytest.raises(ValueError, match="no file descriptor"):
        chunk.fileno()


def test_reads_after_truncation_do_not_use_stale_positions(log: Log) -> None:
    log.read(60, 1000).close()  # caches boundaries around offset 60
    log.truncate_to(45)
    for i in range(5):
        log.append(batch(BATCH_RECORDS, tag=100 + i, value_bytes=200))
    assert read_all(log) == list(range(60))
    with log.read(58, 1) as chunk:
        assert _batches(chunk.read_bytes()) == [(57, 59)]
    assert log.read(60, 1).size == 0
