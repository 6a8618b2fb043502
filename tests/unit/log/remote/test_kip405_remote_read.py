"""Serving a fetch from a remote segment (KIP-405 "Consumer fetch from remote storage"): the
offset index positions the read, whole batches come back (the one holding the fetch offset
first, KIP-74's first batch whole), none at or above the high watermark; and the leader-epoch
facts recorded with a copy (``segmentLeaderEpochs``, the shipped checkpoint)."""

from __future__ import annotations

import io
import struct

from broker.log.remote.read import (
    epoch_checkpoint,
    index_position,
    offset_for_timestamp,
    read_batches,
    segment_leader_epochs,
)
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch


def _segment(base: int, batches: int, per_batch: int) -> tuple[bytes, list[int]]:
    """Batches of ``per_batch`` records from ``base``; also each batch's byte position."""
    out, positions, pos = [], [], 0
    for b in range(batches):
        first = base + b * per_batch
        data = encode_batch(
            [ProducerRecord(None, b"v%d" % (first + i), 0) for i in range(per_batch)], base_offset=first
        )
        out.append(data)
        positions.append(pos)
        pos += len(data)
    return b"".join(out), positions


def _offsets(data: bytes) -> list[int]:
    return [r.offset for _, records in decode_batches(data) for r in records]


def test_index_position_is_the_floor_entry() -> None:
    index = struct.pack(">iiii", 10, 500, 20, 900) + b"\0" * 16  # preallocated tail
    assert index_position(index, 100, 105) == 0
    assert index_position(index, 100, 110) == 500
    assert index_position(index, 100, 119) == 500
    assert index_position(index, 100, 10_000) == 900
    assert index_position(b"", 100, 150) == 0


def test_read_returns_whole_batches_from_the_one_holding_the_offset() -> None:
    data, positions = _segment(100, 10, 5)
    got, next_offset = read_batches(io.BytesIO(data[positions[2] :]), 112, 10_000, None)
    assert _offsets(got)[0] == 110  # the batch holding 112, whole: the client skips 110, 111
    assert _offsets(got)[-1] == 149
    assert next_offset == 150


def test_read_skips_batches_below_the_offset_from_an_index_floor() -> None:
    data, _ = _segment(100, 10, 5)
    got, _ = read_batches(io.BytesIO(data), 131, 10_000, None)
    assert _offsets(got)[0] == 130


def test_read_stops_at_max_bytes_but_returns_the_first_batch_whole() -> None:
    data, positions = _segment(0, 10, 5)
    one = positions[1]
    got, next_offset = read_batches(io.BytesIO(data), 0, one + one // 2, None)
    assert _offsets(got) == list(range(5))
    assert next_offset == 5
    got, _ = read_batches(io.BytesIO(data), 0, 1, None)  # smaller than a batch: still one (KIP-74)
    assert _offsets(got) == list(range(5))
    got, next_offset = read_batches(io.BytesIO(data), 0, 1, None, min_one_batch=False)  # not the first partition
    assert got == b""
    assert next_offset == 0


def test_read_takes_no_batch_at_or_above_max_offset() -> None:
    data, _ = _segment(0, 10, 5)
    got, next_offset = read_batches(io.BytesIO(data), 0, 10_000, 20)
    assert _offsets(got)[-1] == 19
    assert next_offset == 20
    got, next_offset = read_batches(io.BytesIO(data), 20, 10_000, 20)
    assert got == b""
    assert next_offset == 20


def test_segment_leader_epochs_are_those_with_records_in_the_segment() -> None:
    entries = [(0, 0), (3, 50), (4, 120), (7, 300)]
    assert segment_leader_epochs(entries, 100, 199) == {3: 100, 4: 120}
    assert segment_leader_epochs(entries, 0, 49) == {0: 0}
    assert segment_leader_epochs(entries, 400, 500) == {7: 400}


def test_epoch_checkpoint_holds_entries_up_to_the_segment_end() -> None:
    assert epoch_checkpoint([(0, 0), (3, 50), (4, 120)], 99) == b"0\n2\n0 0\n3 50\n"


def test_offset_for_timestamp_finds_the_first_record_at_or_after() -> None:
    batches = [
        encode_batch([ProducerRecord(None, b"v", 1000 + 10 * (5 * b + i)) for i in range(5)], base_offset=5 * b)
        for b in range(4)
    ]
    data = b"".join(batches)
    assert offset_for_timestamp(io.BytesIO(data), 0) == (0, 1000)
    assert offset_for_timestamp(io.BytesIO(data), 1071) == (8, 1080)
    assert offset_for_timestamp(io.BytesIO(data), 1190) == (19, 1190)
    assert offset_for_timestamp(io.BytesIO(data), 1191) is None
