"""``pyspark_log.spark.segment_reader``: reading a partition's segment files as the broker wrote
them (Kafka documentation §5.4 "Log": segment files named by base offset, the sparse offset
index, the KIP-98 transaction index), without Spark.

The files are written by the broker's own ``broker.log.Log`` (small segments and a dense offset
index, so reads cross segments and seek), then read with ``PartitionFiles`` and decoded with the
fetch path's decoder; the records must be what ``Log.read`` serves for the same range.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from broker.log.log import Log
from pyspark_log.records.columnar import decode_arrow
from pyspark_log.spark.segment_reader import (
    AbortedTxn,
    FilesUnavailable,
    PartitionFiles,
    aborted_overlapping,
    index_floor,
    parse_offset_index,
    parse_properties,
    parse_txn_index,
    segment_bases,
)
from tests.unit.log.helpers import FakeClock, batch, make_log, read_all


def tx(pid: int, seq: int, count: int = 1) -> bytes:
    return batch(count, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True, tag=pid)


def file_offsets(
    directory: Path, start: int, end: int, *, read_committed: bool = False, chunk: int = 1 << 20
) -> list[int]:
    """Offsets of the records ``PartitionFiles`` serves for ``[start, end)``, decoded as the
    Spark source decodes a Fetch response."""
    seen: list[int] = []
    for c in PartitionFiles(directory, chunk_bytes=chunk).read(start, end, read_committed=read_committed):
        assert c.position >= start
        decoded = decode_arrow(
            c.records, topic="t", partition=0, start_offset=c.position, end_offset=end, aborted_transactions=c.aborted
        )
        seen.extend(decoded.batch.column("offset").to_pylist())
    return seen


@pytest.fixture
def log(tmp_path: Path) -> Log:
    """A log of several segments: 60 batches of 3 records, 1 KiB segments, an index entry per batch."""
    log = make_log(tmp_path, FakeClock(), segment_bytes=1024, index_interval_bytes=1)
    for i in range(60):
        log.append(batch(3, tag=i))
    log.flush()
    return log


def test_segment_names_exclude_files_in_flight() -> None:
    names = [
        "00000000000000000000.log",
        "00000000000000000100.log",
        "00000000000000000050.log.deleted",
        "00000000000000000200.log.cleaned",
        "00000000000000000200.log.swap",
        "00000000000000000100.index",
        "leader-epoch-checkpoint",
        "0000000000000000300.log",  # 19 digits: not a segment name
    ]
    assert segment_bases(names) == [0, 100]


def test_offset_index_parsing_keeps_the_increasing_whole_entries() -> None:
    data = struct.pack(">iiiiii", 3, 0, 7, 120, 5, 90) + b"\x00\x01"
    entries = parse_offset_index(data, 100)
    assert entries == [(103, 0), (107, 120)]  # the decreasing third entry and the torn tail dropped
    assert index_floor(entries, 102) is None
    assert index_floor(entries, 103) == (103, 0)
    assert index_floor(entries, 200) == (107, 120)


def test_txn_index_parsing_and_overlap() -> None:
    data = struct.pack(">hqqqq", 0, 7, 10, 20, 21) + struct.pack(">hqqqq", 0, 8, 30, 40, 41) + b"\x00"
    entries = parse_txn_index(data)
    assert entries == [AbortedTxn(7, 10, 20, 21), AbortedTxn(8, 30, 40, 41)]
    assert aborted_overlapping(entries, 0, 10) == ()  # first offset 10 is not below 10
    assert aborted_overlapping(entries, 0, 11) == ((7, 10),)
    assert aborted_overlapping(entries, 21, 100) == ((8, 30),)  # the marker at 20 is before 21
    assert aborted_overlapping(entries, 15, 35) == ((7, 10), (8, 30))


def test_properties_parsing() -> None:
    text = "#comment\nversion=1\n\nnode.id = 3\ncluster.id=abc=\n"
    assert parse_properties(text) == {"version": "1", "node.id": "3", "cluster.id": "abc="}


def test_files_serve_what_the_log_serves_for_any_range(log: Log) -> None:
    assert len(log.segments) > 5
    end = log.log_end_offset
    assert file_offsets(log.directory, 0, end) == read_all(log, 0)
    for start, stop in [(0, 1), (4, 5), (5, 100), (61, 62), (100, end), (end - 1, end), (17, 170)]:
        assert file_offsets(log.directory, start, stop) == list(range(start, stop)), (start, stop)
    # small chunks: a batch is read whole even when it is larger than a chunk
    assert file_offsets(log.directory, 3, 80, chunk=64) == list(range(3, 80))


def test_a_stale_or_damaged_offset_index_only_costs_a_scan(log: Log) -> None:
    base = log.segments[2].base_offset
    index = log.directory / f"{base:020d}.index"
    entries = parse_offset_index(index.read_bytes(), base)
    assert entries
    # every entry points one byte off: no batch header matches, the scan starts at byte 0
    index.write_bytes(b"".join(struct.pack(">ii", o - base, p + 1) for o, p in entries))
    assert file_offsets(log.directory, base + 4, base + 8) == list(range(base + 4, base + 8))
    index.unlink()
    assert file_offsets(log.directory, base + 4, base + 8) == list(range(base + 4, base + 8))


def test_read_committed_drops_aborted_transactions_and_markers(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock(), segment_bytes=700, index_interval_bytes=1)
    log.append(batch(2))  # 0-1
    log.append(tx(1, 0, 2))  # 2-3 aborted
    log.append(tx(2, 0, 2))  # 4-5 committed
    log.append(tx(1, 2, 1))  # 6 aborted
    log.append_control_marker(1, 0, 0, commit=False)  # 7 ABORT
    log.append(batch(1))  # 8
    log.append_control_marker(2, 0, 0, commit=True)  # 9 COMMIT
    log.append(tx(1, 3, 2))  # 10-11 committed (a new transaction of producer 1)
    log.append_control_marker(1, 0, 0, commit=True)  # 12
    for i in range(10):
        log.append(batch(2, tag=i))  # 13-32: more segments after the markers
    log.flush()
    end = log.log_end_offset
    assert len(log.segments) > 2
    committed = [0, 1, 4, 5, 8, 10, 11, *range(13, end)]
    assert file_offsets(log.directory, 0, end, read_committed=True) == committed
    for start in range(end):
        expected = [o for o in committed if o >= start]
        assert file_offsets(log.directory, start, end, read_committed=True) == expected, start
    everything = [o for o in range(end) if o not in (7, 9, 12)]  # control records are never rows
    assert file_offsets(log.directory, 0, end) == everything


def test_an_open_segment_survives_its_deletion_and_a_vanished_one_is_reported(log: Log) -> None:
    directory = log.directory
    bases = [s.base_offset for s in log.segments]
    reader = PartitionFiles(directory, chunk_bytes=64).read(0, log.log_end_offset, read_committed=False)
    first = next(reader)  # segment 0 is open now
    assert first.segment_base == 0
    os.unlink(directory / f"{0:020d}.log")  # retention removes it: the open file stays readable
    os.replace(directory / f"{bases[2]:020d}.log", directory / f"{bases[2]:020d}.log.deleted")
    seen: list[int] = []

    def drain() -> None:
        seen.extend(chunk.segment_base for chunk in reader)

    with pytest.raises(FilesUnavailable) as raised:
        drain()
    assert set(seen) == {0, bases[1]}
    assert raised.value.offset == bases[2]


def test_a_range_below_the_first_segment_or_past_the_files_is_reported(log: Log) -> None:
    end = log.log_end_offset
    with pytest.raises(FilesUnavailable) as raised:
        list(PartitionFiles(log.directory).read(end, end + 5, read_committed=False))
    assert raised.value.offset == end
    os.unlink(log.directory / f"{0:020d}.log")
    with pytest.raises(FilesUnavailable) as raised:
        list(PartitionFiles(log.directory).read(0, 3, read_committed=False))
    assert raised.value.offset == 0
    assert list(PartitionFiles(log.directory / "missing").read(0, 0, read_committed=False)) == []


def test_without_any_offset_index_the_headers_lead_to_the_first_batch(log: Log) -> None:
    """An active segment the broker has not flushed has an empty ``.index`` file: the reader
    skips to a range's first batch by batch headers alone."""
    for index in log.directory.glob("*.index"):
        index.write_bytes(b"")
    end = log.log_end_offset
    for start, stop in [(0, 3), (50, 60), (121, 178), (end - 2, end)]:
        assert file_offsets(log.directory, start, stop, chunk=128) == list(range(start, stop)), (start, stop)
