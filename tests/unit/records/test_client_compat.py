"""Cross-checks with real Kafka clients' record codecs: kafka-python 3.x and aiokafka build
batches with every codec that we decode to the same records, and they read ours (CRC valid,
records equal). librdkafka is cross-checked through the broker by the integration tests."""

from __future__ import annotations

import warnings

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import given, settings

from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.columnar import decode_arrow
from pyspark_log.records.record import Record

from .strategies import TS_BASE, codecs, record_lists

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KpBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

CODECS = [0, 1, 2, 3, 4]
BATCH_SIZE = 10 * 1024 * 1024

RECORDS = [
    ProducerRecord(b"key-%d" % i, (b"value %d " % i) * (i % 50), TS_BASE + i * 7, (("h", b"%d" % i),) if i % 3 else ())
    for i in range(200)
] + [
    ProducerRecord(None, None, TS_BASE),
    ProducerRecord(b"", b"", TS_BASE - 1),
    ProducerRecord(None, b"x" * 70_000, TS_BASE + 1, (("n", None),)),
]


def as_records(records: list[ProducerRecord], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]


def build_with(builder_cls: type, records: list[ProducerRecord], codec: int, **producer: int) -> bytes:
    builder = builder_cls(
        2,
        codec,
        producer.get("transactional", 0),
        producer.get("producer_id", -1),
        producer.get("producer_epoch", -1),
        producer.get("base_sequence", -1),
        BATCH_SIZE,
    )
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


def read_with(batch_cls: type, buf: bytes) -> tuple[object, list[Record]]:
    batch = batch_cls(buf)
    assert batch.validate_crc()
    records = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    return batch, records


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
def test_we_read_their_batches(builder: type, codec: int) -> None:
    buf = build_with(builder, RECORDS, codec)
    header, records = decode_records(buf)
    assert header.compression == codec
    assert records == as_records(RECORDS)
    assert len(decode_arrow(buf, topic="t", partition=0, vectorize=True)) == len(RECORDS)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader", [KpBatch, AioBatch], ids=["kafka-python", "aiokafka"])
def test_they_read_our_batches(reader: type, codec: int) -> None:
    buf = encode_batch(RECORDS, base_offset=1000, codec=codec, log_append_time=False)
    batch, records = read_with(reader, buf)
    assert batch.compression_type == codec  # type: ignore[attr-defined]
    assert records == as_records(RECORDS, 1000)


def test_they_read_our_producer_fields() -> None:
    buf = encode_batch(RECORDS[:5], producer_id=77, producer_epoch=2, base_sequence=40, transactional=True, codec=3)
    for reader in (KpBatch, AioBatch):
        batch = reader(buf)
        assert batch.validate_crc()
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 40)
        assert batch.is_transactional


def test_their_producer_fields() -> None:
    buf = build_with(KpBuilder, RECORDS[:3], 4, transactional=1, producer_id=9, producer_epoch=1, base_sequence=5)
    header, _ = decode_records(buf)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 5)
    assert header.is_transactional


def test_log_append_time_seen_by_kafka_python() -> None:
    buf = encode_batch(RECORDS[:3], log_append_time=True)
    batch, records = read_with(KpBatch, buf)
    assert batch.timestamp_type == 1  # type: ignore[attr-defined]
    assert {r.timestamp for r in records} == {RECORDS[2].timestamp}
    assert records == decode_records(buf)[1]


@given(records=record_lists, codec=codecs)
@settings(max_examples=60, deadline=None)
def test_round_trip_with_kafka_python_property(records: list[ProducerRecord], codec: int) -> None:
    ours = encode_batch(records, codec=codec)
    assert read_with(KpBatch, ours)[1] == as_records(records)
    theirs = build_with(KpBuilder, records, codec)
    assert decode_records(theirs)[1] == as_records(records)
    if codec == 0:
        # Without compression the bytes are the same, but for partitionLeaderEpoch (offset 12):
        # kafka-python writes 0, we write -1 like the Java producer; the broker overwrites it.
        assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]
        assert ours[12:16] == b"\xff\xff\xff\xff"
