"""The producer's batch API (``Producer.send_batch``, issue #14) against a real broker: records
queued from Arrow columns are read back by confluent-kafka (librdkafka) and kafka-python with
the keys, values, headers, partitions and timestamps they were given, in order, once.

Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs" (producer internals): records of one
partition go in batches of ``batch.size``; the
idempotent producer's sequence numbers and the transaction's partition registration apply to
the batches the batch API makes exactly as to ``send()``'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
import kafka
import pyarrow as pa
import pytest

from pyspark_log.client import AdminClient, AsyncProducer, NewTopic, Producer, partition_for_key
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.columnar_encode import HEADERS_TYPE
from tests.waiting import Deadline

pytestmark = pytest.mark.integration

PARTITIONS = 3
TS = 1_700_000_000_000

Seen = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


def make_topic(broker: EmbeddedBroker, name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as a:
        a.create_topics([NewTopic(name, PARTITIONS, 1)])


def table(n: int, offset: int = 0) -> pa.Table:
    """Keyed, null-key, explicit-partition rows; null and empty values; headers with null values."""
    keys = [None if i % 4 == 0 else f"key-{i % 11}".encode() for i in range(offset, offset + n)]
    values = [
        None if i % 9 == 0 else (b"" if i % 9 == 1 else f"value-{i}".encode() * (i % 5 + 1))
        for i in range(offset, offset + n)
    ]
    headers = [
        [] if i % 3 == 0 else [{"key": "h", "value": str(i).encode()}, {"key": "n", "value": None}]
        for i in range(offset, offset + n)
    ]
    partitions = [i % PARTITIONS if i % 7 == 0 else None for i in range(offset, offset + n)]
    timestamps = [TS + i for i in range(offset, offset + n)]
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": pa.array(headers, HEADERS_TYPE),
            "partition": pa.array(partitions, pa.int32()),
            "timestamp": pa.array(timestamps, pa.int64()),
        }
    )


def expected(t: pa.Table) -> list[Seen]:
    """What a reader must see, with the partition each row must land on (-1: sticky, any)."""
    out: list[Seen] = []
    for row in t.to_pylist():
        if row["partition"] is not None:
            p = row["partition"]
        elif row["key"] is not None:
            p = partition_for_key(row["key"], PARTITIONS)
        else:
            p = -1
        out.append((p, row["key"], row["value"], [(h["key"], h["value"]) for h in row["headers"]], row["timestamp"]))
    return out


def check(seen: list[Seen], want: list[Seen]) -> None:
    assert len(seen) == len(want)
    by_ts = {s[4]: s for s in seen}
    assert len(by_ts) == len(seen), "a record was read twice"
    for w in want:
        s = by_ts[w[4]]
        assert s[1:] == w[1:]
        if w[0] >= 0:
            assert s[0] == w[0]
    for p in range(PARTITIONS):  # order kept within each partition
        stamps = [s[4] for s in seen if s[0] == p]
        assert stamps == sorted(stamps)


def read_confluent(broker: EmbeddedBroker, topic: str, n: int) -> list[Seen]:
    c = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    seen: list[Seen] = []
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = Deadline(60)
        while len(seen) < n and not deadline.expired():
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                headers = [(k, v) for k, v in (msg.headers() or [])]
                seen.append((msg.partition(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
    finally:
        c.close()
    return seen


def read_kafka_python(broker: EmbeddedBroker, topic: str, n: int) -> list[Seen]:
    c = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    seen: list[Seen] = []
    try:
        c.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = Deadline(60)
        while len(seen) < n and not deadline.expired():
            for records in c.poll(timeout_ms=500).values():
                for r in records:
                    seen.append((r.partition, r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp))
    finally:
        c.close()
    return seen


Reader = Callable[[EmbeddedBroker, str, int], list[Seen]]


@pytest.mark.parametrize(
    ("codec", "reader"),
    [("none", read_confluent), ("lz4", read_confluent), ("zstd", read_kafka_python), ("gzip", read_kafka_python)],
)
def test_batch_api_records_read_back_by_third_party_clients(
    broker: EmbeddedBroker, topic_name: str, codec: str, reader: Reader
) -> None:
    make_topic(broker, topic_name)
    data = table(3000)
    config: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap_servers,
        "compression.type": codec,
        "batch.size": 4096,
        "linger.ms": 20,
    }
    with Producer(config) as p:
        assert p.send_batch(topic_name, data).result(60) == 3000
    check(reader(broker, topic_name, 3000), expected(data))


def test_transactional_batch_api_mixed_with_send_keeps_order(broker: EmbeddedBroker, topic_name: str) -> None:
    """Records of ``send()`` and ``send_batch`` to one partition keep their call order, and a
    transaction covering both is what a read_committed reader sees (an aborted one is not)."""
    make_topic(broker, topic_name)
    first, second = table(500), table(500, offset=500)
    config = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic_name}", "batch.size": 2048}
    with Producer(config) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_batch(topic_name, table(50, offset=10_000))
        p.abort_transaction()
        p.begin_transaction()
        f1 = p.send_batch(topic_name, first, partition=1)
        f2 = p.send(topic_name, b"single", partition=1, timestamp_ms=TS + 999_999)
        f3 = p.send_batch(topic_name, second, partition=1)
        p.commit_transaction()
        assert (f1.result(10), f3.result(10), f2.result(10).partition) == (500, 500, 1)
    seen = read_kafka_python(broker, topic_name, 1001)
    assert [s[4] for s in seen] == [*range(TS, TS + 500), TS + 999_999, *range(TS + 500, TS + 1000)]
    assert {s[0] for s in seen} == {1}


def test_batch_api_larger_than_buffer_memory_is_back_pressured(broker: EmbeddedBroker, topic_name: str) -> None:
    """``buffer.memory`` smaller than the input: memory is reserved a few batches at a time and
    given back as batches complete, so the call blocks instead of failing."""
    make_topic(broker, topic_name)
    n = 20_000
    data = pa.table({"value": pa.array([b"x" * 200] * n), "timestamp": pa.array(range(TS, TS + n), pa.int64())})
    config = {"bootstrap.servers": broker.bootstrap_servers, "buffer.memory": 256 * 1024, "batch.size": 16384}
    with Producer(config) as p:
        assert p.send_batch(topic_name, data).result(60) == n
        assert p.core.pool.available_bytes == 256 * 1024
    seen = read_confluent(broker, topic_name, n)
    assert sorted(s[4] for s in seen) == list(range(TS, TS + n))


def test_async_batch_api_records_read_back(broker: EmbeddedBroker, topic_name: str) -> None:
    """``AsyncProducer.send_batch``: encoding runs off the loop; same records as the sync API."""
    make_topic(broker, topic_name)
    data = table(800)

    async def produce() -> int:
        config = {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "batch.size": 4096}
        async with AsyncProducer(config) as p:
            fut = await p.send_batch(topic_name, data)
            await p.flush()
            return await fut

    assert asyncio.run(produce()) == 800
    check(read_confluent(broker, topic_name, 800), expected(data))
