"""The 61-byte header fast path (Kafka documentation §5.3.1 "Record Batch"): reading, checking, walking and
rewriting."""

from __future__ import annotations

import pytest

from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.header import (
    CRC_POS,
    MAGIC_POS,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    check_batch,
    complete_prefix_size,
    iter_batch_headers,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)


def make_batch(n: int = 3, base_offset: int = 0, **kwargs: object) -> bytes:
    records = [ProducerRecord(b"k%d" % i, b"v" * i, 1000 + i) for i in range(n)]
    return encode_batch(records, base_offset=base_offset, **kwargs)  # type: ignore[arg-type]


def test_attribute_properties() -> None:
    batch = make_batch(codec=3, log_append_time=True, transactional=True, producer_id=7, producer_epoch=1)
    header = check_batch(batch)
    assert header.compression == 3
    assert header.timestamp_type == 1
    assert header.is_transactional
    assert not header.is_control
    assert not header.has_delete_horizon
    assert header.attributes == 0x03 | 0x08 | 0x10


def test_last_sequence_wraps_at_int32_max() -> None:
    header = read_header(make_batch(n=3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 0
    assert read_header(make_batch()).last_sequence == NO_SEQUENCE


def test_set_base_offset_and_leader_epoch_keep_crc_valid() -> None:
    buf = bytearray(make_batch())
    set_base_offset(buf, 0, 1234)
    set_partition_leader_epoch(buf, 0, 9)
    header = check_batch(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 9)
    _, records = decode_records(buf)
    assert [r.offset for r in records] == [1234, 1235, 1236]


def test_set_log_append_time_recomputes_crc() -> None:
    buf = bytearray(make_batch())
    set_log_append_time(buf, 0, read_header(buf), 99_999)
    header = check_batch(buf)
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == 99_999
    _, records = decode_records(buf)
    assert {r.timestamp for r in records} == {99_999}


def test_wrong_magic() -> None:
    buf = bytearray(make_batch())
    for magic in (0, 1, 3):
        buf[MAGIC_POS] = magic
        with pytest.raises(CorruptRecordError, match="magic"):
            read_header(buf)


def test_bad_crc() -> None:
    buf = bytearray(make_batch())
    buf[CRC_POS] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        check_batch(buf)
    buf[CRC_POS] ^= 0x01
    buf[-1] ^= 0x40  # a record byte: covered by the CRC
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        check_batch(buf)


def test_partition_leader_epoch_is_outside_the_crc() -> None:
    buf = bytearray(make_batch())
    buf[12:16] = b"\x12\x34\x56\x78"
    assert check_batch(buf).partition_leader_epoch == 0x12345678


def test_batch_length_below_minimum() -> None:
    buf = bytearray(make_batch())
    buf[8:12] = (48).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        read_header(buf)


def test_truncated_at_every_position() -> None:
    batch = make_batch()
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            check_batch(batch[:cut])


def test_iter_batch_headers() -> None:
    batches = [make_batch(n=2, base_offset=0), make_batch(n=3, base_offset=2), make_batch(n=1, base_offset=5)]
    buf = b"".join(batches)
    found = list(iter_batch_headers(buf))
    assert [pos for pos, _ in found] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.base_offset for _, h in found] == [0, 2, 5]
    assert all(isinstance(h, BatchHeader) for _, h in found)
    for cut in (1, 60, len(batches[2]) - 1):
        partial = buf[: len(buf) - cut]
        with pytest.raises(CorruptRecordError, match="truncated"):
            list(iter_batch_headers(partial))
        with pytest.raises(CorruptRecordError, match="truncated"):
            list(iter_batch_headers(partial, verify_crc=False))
        assert [h.base_offset for _, h in iter_batch_headers(partial, stop_at_partial=True)] == [0, 2]
        assert complete_prefix_size(partial) == len(batches[0]) + len(batches[1])
    assert complete_prefix_size(buf) == len(buf)
    assert complete_prefix_size(b"") == 0


def test_stop_at_partial_still_rejects_corruption() -> None:
    buf = bytearray(make_batch() + make_batch(base_offset=3))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batch_headers(buf, stop_at_partial=True))
