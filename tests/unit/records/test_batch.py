"""Whole batches: encode, decode, and every way a batch can be malformed (Kafka documentation §5.3 "Message Format")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, decode_batches, decode_records, encode_batch
from pyspark_log.records.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError
from pyspark_log.records.header import ATTRIBUTES_POS, CRC_POS, HEADER_SIZE, crc32c, read_header
from pyspark_log.records.record import Record, read_record, write_record
from pyspark_log.records.varint import write_varint

from .strategies import TS_BASE, codecs, record_lists

ALL_CODECS = [0, 1, 2, 3, 4]


def expected(records: list[ProducerRecord], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]


def resign(buf: bytearray) -> bytes:
    """Recompute the CRC after a deliberate edit, so the test reaches the record decoder."""
    buf[CRC_POS : CRC_POS + 4] = crc32c(bytes(buf[ATTRIBUTES_POS:])).to_bytes(4, "big")
    return bytes(buf)


SAMPLE = [
    ProducerRecord(b"key", b"value", TS_BASE),
    ProducerRecord(None, b"null key", TS_BASE + 5),
    ProducerRecord(b"null value", None, TS_BASE - 3),
    ProducerRecord(None, None, TS_BASE + 1000),
    ProducerRecord(b"", b"", TS_BASE + 1),  # empty, not null
    ProducerRecord(b"h", b"v", TS_BASE + 2, (("a", b"1"), ("", b""), ("n", None), ("ü", b"\xff"))),
    ProducerRecord(b"big", bytes(range(256)) * 40, TS_BASE + 70_000),  # multi-byte lengths
]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_sample(codec: int) -> None:
    buf = encode_batch(SAMPLE, base_offset=100, codec=codec)
    header, records = decode_records(buf)
    assert records == expected(SAMPLE, 100)
    assert header.compression == codec
    assert header.base_timestamp == TS_BASE
    assert header.max_timestamp == TS_BASE + 70_000
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.records_count == len(SAMPLE)


def test_null_and_empty_are_distinct() -> None:
    _, records = decode_records(encode_batch(SAMPLE))
    assert (records[1].key, records[2].value) == (None, None)
    assert (records[4].key, records[4].value) == (b"", b"")
    assert records[5].headers[2] == ("n", None)


def test_log_append_time_uses_max_timestamp() -> None:
    header, records = decode_records(encode_batch(SAMPLE, log_append_time=True))
    assert header.timestamp_type == 1
    assert {r.timestamp for r in records} == {TS_BASE + 70_000}


def test_producer_fields() -> None:
    buf = encode_batch(
        SAMPLE[:2],
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        transactional=True,
        partition_leader_epoch=5,
    )
    header = read_header(buf)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.is_transactional
    assert header.partition_leader_epoch == 5


def test_decode_at_position_and_from_memoryview() -> None:
    a, b = encode_batch(SAMPLE[:2]), encode_batch(SAMPLE[2:4], base_offset=2)
    buf = bytearray(a + b)
    _, records = decode_records(memoryview(buf), len(a))
    assert records == expected(SAMPLE[2:4], 2)
    _, records = decode_records(buf, len(a), verify_crc=False)
    assert records == expected(SAMPLE[2:4], 2)


@given(records=record_lists, codec=codecs, base_offset=st.integers(0, 2**40))
@settings(max_examples=150, deadline=None)
def test_round_trip_property(records: list[ProducerRecord], codec: int, base_offset: int) -> None:
    header, decoded = decode_records(encode_batch(records, base_offset=base_offset, codec=codec))
    assert decoded == expected(records, base_offset)
    assert header.max_timestamp == max(r.timestamp for r in records)


@given(records=record_lists)
@settings(max_examples=50, deadline=None)
def test_read_record_agrees_with_fast_path(records: list[ProducerRecord]) -> None:
    buf = encode_batch(records)
    pos = HEADER_SIZE
    slow = []
    while pos < len(buf):
        rec, pos = read_record(buf, pos, 0, records[0].timestamp)
        slow.append(rec)
    assert slow == decode_records(buf)[1]


def test_decode_batches_ignores_a_partial_tail() -> None:
    batches = [encode_batch(SAMPLE[:3]), encode_batch(SAMPLE[3:], base_offset=3, codec=3)]
    buf = b"".join(batches)
    decoded = decode_batches(buf + batches[0][:70])
    assert [r for _, recs in decoded for r in recs] == expected(SAMPLE)
    assert decode_batches(b"") == []


def test_encode_rejects_empty_and_bad_codec() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])
    with pytest.raises(UnsupportedCompressionError):
        encode_batch(SAMPLE, codec=6)


# --- malformed batches --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_truncated_at_every_byte(codec: int) -> None:
    buf = encode_batch(SAMPLE[:6], codec=codec)
    for cut in range(len(buf)):
        with pytest.raises(CorruptRecordError):
            decode_records(buf[:cut])
        with pytest.raises(CorruptRecordError):
            decode_records(buf[:cut], verify_crc=False)


def test_bad_crc() -> None:
    buf = bytearray(encode_batch(SAMPLE))
    buf[-2] ^= 0x10
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(bytes(buf))


def test_wrong_magic() -> None:
    buf = bytearray(encode_batch(SAMPLE))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_records(bytes(buf))


def test_records_section_cut_inside_a_record() -> None:
    """Shorten batchLength by one byte and re-sign: the last record overruns the batch."""
    buf = bytearray(encode_batch(SAMPLE[:3]))
    buf[8:12] = (int.from_bytes(buf[8:12], "big") - 1).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        decode_records(resign(buf[:-1]))


def test_trailing_bytes_after_the_records() -> None:
    buf = bytearray(encode_batch(SAMPLE[:3]) + b"\x00")
    buf[8:12] = (int.from_bytes(buf[8:12], "big") + 1).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="follow"):
        decode_records(resign(buf))


@pytest.mark.parametrize(("count", "match"), [(2, "follow"), (4, "past the end"), (-1, "record count")])
def test_record_count_mismatch(count: int, match: str) -> None:
    buf = bytearray(encode_batch(SAMPLE[:3]))
    buf[57:61] = count.to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError, match=match):
        decode_records(resign(buf))


def one_record_batch(body: bytes) -> bytes:
    """A batch around a hand-made record body (the record's length prefix is added here)."""
    out = bytearray()
    write_varint(out, len(body))
    template = bytearray(encode_batch([ProducerRecord(None, None, 0)]))
    template[HEADER_SIZE:] = out + body
    template[8:12] = (len(template) - 12).to_bytes(4, "big")
    return resign(template)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("000000030100", "invalid key length"),  # key length -2: only -1 means null
        ("00000001030000", "invalid value length"),
        ("000000010101", "header count"),  # header count -1
        ("0000000101020100", "null header key"),
        ("00000001010202ff00", "UTF-8"),
        ("00000001010000", "do not fill"),  # a byte left after the fields
        ("000000140000", "do not fill|past the end"),  # key length 10 overruns the record
        ("00000101", "invalid"),  # shorter than the 6-byte minimum
    ],
)
def test_malformed_record_fields(body: str, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        decode_records(one_record_batch(bytes.fromhex(body)))


def test_hand_made_record_is_accepted() -> None:
    """Sanity check of ``one_record_batch``: a well-formed body decodes."""
    body = bytes.fromhex("0002000261020002026b01")
    _, (rec,) = decode_records(one_record_batch(body))
    assert rec == Record(0, 1, b"a", b"\x00", (("k", None),))


def test_oversized_compressed_batch() -> None:
    buf = encode_batch([ProducerRecord(None, bytes(2_000_000), 0)], codec=compression.ZSTD)
    with pytest.raises(RecordTooLargeError):
        decode_records(buf, max_decompressed_bytes=1_000_000)
    assert decode_records(buf)[1][0].value == bytes(2_000_000)


def test_write_record_layout() -> None:
    out = bytearray()
    write_record(out, 1, -1, b"k", None, [("h", b"v")])
    # length 11, attributes, ts -1, offset 1, key 1 "k", value null, 1 header "h" = "v"
    assert out.hex() == "16000102026b010202680276"
