"""``validate.py``: Kafka LogValidator rules on batch headers, offsets assigned by rewriting.

Kafka documentation §5.4 "Log": "records are always written in batches"; Kafka documentation §4.3
"Efficiency": the broker keeps the
producer's binary format, so validation reads headers only and rewrites baseOffset in place.
"""

from __future__ import annotations

import struct

import pytest

from broker.log.config import LogConfig
from broker.log.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    LogError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from broker.log.validate import AppendOrigin, validate_and_assign_offsets, validate_as_follower
from pyspark_log.records.batch import decode_records
from pyspark_log.records.header import ATTRIBUTES_POS, CRC_POS, check_batch, crc32c
from tests.unit.log.helpers import T0_MS, batch, batch_bases, offsets_in

CONFIG = LogConfig()


def _with_field(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    """One batch with a header field changed and its CRC recomputed (so only the field is wrong)."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    struct.pack_into(">I", buf, CRC_POS, crc32c(bytes(buf[ATTRIBUTES_POS:])))
    return bytes(buf)


def test_assigns_offsets_from_next_offset_and_keeps_records() -> None:
    data = batch(3) + batch(2, tag=1)
    result = validate_and_assign_offsets(data, 40, CONFIG, T0_MS)
    assert result.first_offset == 40
    assert result.last_offset == 44
    assert batch_bases(bytes(result.records)) == [40, 43]
    assert offsets_in(bytes(result.records)) == [40, 41, 42, 43, 44]
    assert [(b.position, b.base_offset, b.last_offset) for b in result.batches] == [
        (0, 40, 42),
        (len(batch(3)), 43, 44),
    ]
    assert result.records_count == 5
    assert result.log_append_time_ms == -1
    first_size = len(batch(3))
    assert result.records[61:first_size] == data[61:first_size]  # records untouched


def test_is_pure_input_not_modified() -> None:
    data = bytearray(batch(2))
    before = bytes(data)
    validate_and_assign_offsets(data, 7, CONFIG, T0_MS)
    assert bytes(data) == before


def test_crc_stays_valid_after_base_offset_rewrite() -> None:
    result = validate_and_assign_offsets(batch(2), 1234, CONFIG, T0_MS, partition_leader_epoch=5)
    header = check_batch(result.records)
    assert header.base_offset == 1234
    assert header.partition_leader_epoch == 5


def test_max_timestamp_and_its_shallow_offset() -> None:
    data = batch(2, timestamp_ms=T0_MS - 10) + batch(3, timestamp_ms=T0_MS - 5) + batch(1, timestamp_ms=T0_MS - 7)
    result = validate_and_assign_offsets(data, 0, CONFIG, T0_MS)
    assert result.max_timestamp_ms == T0_MS - 5
    assert result.offset_of_max_timestamp == 4  # last offset of the second batch


def test_log_append_time_rewrites_max_timestamp_and_crc() -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    result = validate_and_assign_offsets(batch(3, timestamp_ms=5), 10, config, T0_MS)
    header = check_batch(result.records)
    assert header.timestamp_type == 1
    assert header.max_timestamp == T0_MS
    assert result.log_append_time_ms == T0_MS
    assert result.offset_of_max_timestamp == 12
    _, records = decode_records(result.records)
    assert {r.timestamp for r in records} == {T0_MS}


@pytest.mark.parametrize(
    ("data", "error", "code"),
    [
        (b"", InvalidRecordError, 87),
        (batch(1)[:-1], CorruptMessageError, 2),
        (batch(1) + b"\x00" * 5, CorruptMessageError, 2),
        (batch(1) + batch(1)[:70], CorruptMessageError, 2),
        (_with_field(batch(1), 16, ">b", 1), CorruptMessageError, 2),  # magic 1
        (_with_field(batch(1), 8, ">i", 10), CorruptMessageError, 2),  # length below header
        (_with_field(batch(1), 8, ">i", -5), CorruptMessageError, 2),  # negative length
        (_with_field(batch(1), 21, ">h", 6), CorruptMessageError, 2),  # codec 6 is unknown
        (_with_field(batch(2), 23, ">i", 0), InvalidRecordError, 87),  # lastOffsetDelta != count-1
        (_with_field(batch(1), 57, ">i", 0), InvalidRecordError, 87),  # recordsCount 0
        (_with_field(batch(1), 23, ">i", -1), InvalidRecordError, 87),  # negative offset range
        (batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), InvalidRecordError, 87),
        (batch(1, control=True), InvalidRecordError, 87),
    ],
    ids=[
        "empty",
        "truncated",
        "trailing-bytes",
        "partial-second-batch",
        "magic",
        "short-length",
        "negative-length",
        "codec",
        "offset-delta",
        "zero-count",
        "negative-delta",
        "pid-without-sequence",
        "control-from-client",
    ],
)
def test_rejects_with_kafka_error_codes(data: bytes, error: type[LogError], code: int) -> None:
    with pytest.raises(error) as info:
        validate_and_assign_offsets(data, 0, CONFIG, T0_MS)
    assert info.value.code == code


def test_crc_mismatch_is_corrupt_message() -> None:
    data = bytearray(batch(2))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError) as info:
        validate_and_assign_offsets(bytes(data), 0, CONFIG, T0_MS)
    assert info.value.code == 2


def test_message_too_large() -> None:
    data = batch(1, value_bytes=2000)
    with pytest.raises(MessageTooLargeError) as info:
        validate_and_assign_offsets(data, 0, LogConfig(max_message_bytes=len(data) - 1), T0_MS)
    assert info.value.code == 10
    validate_and_assign_offsets(data, 0, LogConfig(max_message_bytes=len(data)), T0_MS)


def test_append_larger_than_a_segment_is_record_list_too_large() -> None:
    data = batch(5, value_bytes=100)
    with pytest.raises(RecordListTooLargeError) as info:
        validate_and_assign_offsets(data, 0, LogConfig(segment_bytes=len(data) - 1), T0_MS)
    assert info.value.code == 18


@pytest.mark.parametrize(
    ("timestamps", "ok"),
    [
        ([T0_MS - 1000, T0_MS], True),
        ([T0_MS - 1001, T0_MS], False),  # base timestamp too old
        ([T0_MS, T0_MS + 500], True),
        ([T0_MS, T0_MS + 501], False),  # max timestamp too far ahead
        ([-1, -1], True),  # no timestamps: nothing to check
    ],
)
def test_timestamp_bounds(timestamps: list[int], ok: bool) -> None:
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    data = batch(2, timestamps=timestamps)
    if ok:
        validate_and_assign_offsets(data, 0, config, T0_MS)
    else:
        with pytest.raises(InvalidTimestampError) as info:
            validate_and_assign_offsets(data, 0, config, T0_MS)
        assert info.value.code == 32


def test_default_after_bound_is_one_hour() -> None:
    with pytest.raises(InvalidTimestampError):
        validate_and_assign_offsets(batch(1, timestamp_ms=T0_MS + 3_600_001), 0, CONFIG, T0_MS)


def test_client_may_not_claim_log_append_time_on_log_append_time_topic() -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    with pytest.raises(InvalidTimestampError):
        validate_and_assign_offsets(batch(1, log_append_time=True), 0, config, T0_MS)


def test_coordinator_may_write_control_batches() -> None:
    data = batch(1, control=True, producer_id=3, producer_epoch=0, transactional=True)
    result = validate_and_assign_offsets(data, 9, CONFIG, T0_MS, origin=AppendOrigin.COORDINATOR)
    assert result.batches[0].is_control
    assert result.batches[0].is_transactional
    assert result.batches[0].producer_id == 3


def test_producer_fields_reported() -> None:
    data = batch(3, producer_id=77, producer_epoch=2, base_sequence=10)
    info = validate_and_assign_offsets(data, 0, CONFIG, T0_MS).batches[0]
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.last_sequence) == (77, 2, 10, 12)


def test_follower_keeps_offsets_and_rejects_going_backwards() -> None:
    data = batch(2, base_offset=10) + batch(1, base_offset=15)
    result = validate_as_follower(data, 10)
    assert batch_bases(bytes(result.records)) == [10, 15]
    assert (result.first_offset, result.last_offset) == (10, 15)
    with pytest.raises(InvalidRecordError):
        validate_as_follower(data, 11)
    with pytest.raises(InvalidRecordError):
        validate_as_follower(batch(2, base_offset=10) + batch(1, base_offset=11), 0)
