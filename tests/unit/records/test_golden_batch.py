"""A one-record batch written out byte by byte from Kafka documentation's layout (§5.3.1 "Record Batch",
§5.3.2 "Record").

the CRC is computed with the CRC-32C (Castagnoli) polynomial and the CRC covers "from the magic byte to the
end of the batch" after the crc field itself, i.e. attributes to the end: checked here with a bitwise
reference CRC written from the polynomial, independent of the ``crc32c`` package.
"""

from __future__ import annotations

import warnings

from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.header import HEADER_SIZE, check_batch, crc32c, read_header
from pyspark_log.records.record import Record

with warnings.catch_warnings():  # kafka-python's schema loader uses deprecated importlib APIs
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

TIMESTAMP = 1_700_000_000_000  # 0x0000018bcfe56800

RECORD = bytes.fromhex(
    "1c"  # length: varint 14 (zig-zag 28)
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "06"
    "6b6579"  # keyLength 3, "key"
    "0a"
    "76616c7565"  # valueLen 5, "value"
    "00"  # headers count 0
)
AFTER_CRC = (
    bytes.fromhex(
        "0000"  # attributes: no compression, CreateTime, not transactional, not control
        "00000000"  # lastOffsetDelta 0
        "0000018bcfe56800"  # baseTimestamp
        "0000018bcfe56800"  # maxTimestamp
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000001"  # recordsCount 1
    )
    + RECORD
)
GOLDEN_CRC = 0xDB5E9CDD
GOLDEN = (
    bytes.fromhex(
        "0000000000000000"  # baseOffset 0
        "00000040"  # batchLength 64 = 61 - 12 + 15
        "ffffffff"  # partitionLeaderEpoch -1
        "02"  # magic
    )
    + GOLDEN_CRC.to_bytes(4, "big")
    + AFTER_CRC
)


def reference_crc32c(data: bytes) -> int:
    """Bitwise CRC-32C: reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_reference_crc_check_value() -> None:
    assert reference_crc32c(b"123456789") == 0xE3069283 == crc32c(b"123456789")


def test_golden_crc_covers_attributes_to_end() -> None:
    assert reference_crc32c(AFTER_CRC) == GOLDEN_CRC
    assert crc32c(GOLDEN[21:]) == GOLDEN_CRC


def test_encode_matches_golden_bytes() -> None:
    encoded = encode_batch([ProducerRecord(b"key", b"value", TIMESTAMP)])
    assert len(GOLDEN) == 76
    assert encoded.hex() == GOLDEN.hex()


def test_decode_golden_bytes() -> None:
    header, records = decode_records(GOLDEN)
    assert records == [Record(0, TIMESTAMP, b"key", b"value", ())]
    assert header == check_batch(GOLDEN) == read_header(GOLDEN)
    assert (header.base_offset, header.batch_length, header.partition_leader_epoch) == (0, 64, -1)
    assert (header.magic, header.crc, header.attributes) == (2, GOLDEN_CRC, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.records_count == 1
    assert header.size == len(GOLDEN)
    assert (header.last_offset, header.next_offset) == (0, 1)


def test_kafka_python_reads_golden_bytes() -> None:
    batch = KafkaPythonBatch(GOLDEN)
    assert batch.validate_crc()
    (rec,) = list(batch)
    assert (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers) == (0, TIMESTAMP, b"key", b"value", [])


def test_header_size_is_61() -> None:
    assert HEADER_SIZE == 61
    assert GOLDEN[HEADER_SIZE:] == RECORD
