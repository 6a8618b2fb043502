"""aiokafka 0.14 against a real pylog broker process.

Tests are plain functions that run their own event loop (``asyncio.run``); consumers use
``assign()`` with ``group_id=None``. aiokafka's admin client alters configs only through the
legacy AlterConfigs (33), which this broker does not serve, so configs are only described here
(IncrementalAlterConfigs is covered by the confluent and kafka-python files).
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka import errors as aerr
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    ACKS,
    BROKER_OVERRIDES,
    CODECS,
    CRASH_SAFE_OVERRIDES,
    MAX_BYTES,
    SMALL_SEGMENT_OVERRIDES,
    TIMEOUT_S,
    TIMESTAMP_QUERIES,
    Rec,
    aio_consume,
    aio_consume_async,
    aio_consumer,
    aio_produce,
    aio_produce_async,
    aio_producer,
    assert_codec_on_disk,
    assert_contiguous,
    assert_records,
    cluster_id_of,
    confluent_consume,
    expected,
    kp_consume,
    matrix_records,
    now_ms,
    numbered_records,
    segment_files,
    timestamp_batches,
)

# Kafka error codes as the admin responses carry them (aiokafka returns, not raises, most).
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40


# kafka-python loads its schemas with importlib.resources APIs deprecated in 3.11
pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("aiokafka"), overrides=BROKER_OVERRIDES) as b:
        yield b


def with_admin(broker: EmbeddedBroker, body: Callable[[AIOKafkaAdminClient], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=int(TIMEOUT_S * 1000)
        )
        await admin.start()
        try:
            return await asyncio.wait_for(body(admin), TIMEOUT_S * 2)
        finally:
            await admin.close()

    return asyncio.run(run())


async def _create(admin: AIOKafkaAdminClient, name: str, partitions: int = 1, **configs: str) -> int:
    """CreateTopics; returns the topic's error code."""
    response = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or None)])
    [(topic, code, _)] = response.topic_errors
    assert topic == name
    return code


# -- metadata --------------------------------------------------------------------------------------
def test_metadata_lists_brokers_topics_partitions_and_cluster_id(broker: EmbeddedBroker, topic_name: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        assert await _create(admin, topic_name, 3) == 0
        cluster = await admin.describe_cluster()
        assert cluster["cluster_id"] == cluster_id_of(broker)
        assert cluster["controller_id"] == 1
        assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
        assert topic_name in await admin.list_topics()
        [described] = await admin.describe_topics([topic_name])
        assert described["error_code"] == 0
        assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in described["partitions"]] == [
            (i, 1, [1], [1]) for i in range(3)
        ]

        consumer = aio_consumer(broker.bootstrap_servers)
        await consumer.start()
        try:
            assert topic_name in await consumer.topics()
        finally:
            await consumer.stop()
        producer = aio_producer(broker.bootstrap_servers)
        await producer.start()
        try:
            assert await producer.partitions_for(topic_name) == {0, 1, 2}
        finally:
            await producer.stop()

    with_admin(broker, body)


# -- produce / consume matrix ----------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_consume_roundtrip(broker: EmbeddedBroker, topic_name: str, acks: int, codec: str) -> None:
    records = matrix_records(topic_name, null_header=True)

    async def body() -> None:
        acked = await aio_produce_async(broker.bootstrap_servers, topic_name, records, acks=acks, codec=codec)
        got = await aio_consume_async(broker.bootstrap_servers, topic_name, len(records))
        if acks == 0:  # no acknowledgement: the records only have to arrive
            assert_records(got, expected(records, [(0, -1)] * len(records)), check_offsets=False)
        else:
            assert_contiguous(acked)
            assert_records(got, expected(records, acked))

    asyncio.run(body())
    assert_codec_on_disk(broker, topic_name, codec)


# -- ListOffsets -----------------------------------------------------------------------------------
def test_list_offsets_earliest_latest_and_by_timestamp(broker: EmbeddedBroker, topic_name: str) -> None:
    base = now_ms() - 100_000

    async def body() -> None:
        producer = aio_producer(broker.bootstrap_servers, linger_ms=100)
        await producer.start()
        try:
            acked = []
            for batch in timestamp_batches(base):
                futures = [await producer.send(topic_name, r.value, r.key, timestamp_ms=r.timestamp_ms) for r in batch]
                acked += [(m.partition, m.offset) for m in await asyncio.gather(*futures)]
            assert_contiguous(acked)
        finally:
            await producer.stop()

        tp = TopicPartition(topic_name, 0)
        consumer = aio_consumer(broker.bootstrap_servers)
        await consumer.start()
        try:
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 7}
            answers = {}
            for delta in TIMESTAMP_QUERIES:
                found = (await consumer.offsets_for_times({tp: base + delta}))[tp]
                answers[delta] = -1 if found is None else found.offset
            assert answers == TIMESTAMP_QUERIES
            assert (await consumer.offsets_for_times({tp: base + 25}))[tp].timestamp == base + 30
        finally:
            await consumer.stop()

    asyncio.run(body())


# -- auto-create -----------------------------------------------------------------------------------
def test_auto_create_on_metadata_and_produce(broker: EmbeddedBroker, topic_name: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        producer = aio_producer(broker.bootstrap_servers)
        await producer.start()
        try:
            assert await producer.partitions_for(f"{topic_name}-md") == {0}  # Metadata auto-creates
        finally:
            await producer.stop()
        rec = Rec(b"k", b"v", (), now_ms())
        assert await aio_produce_async(broker.bootstrap_servers, f"{topic_name}-p", [rec]) == [(0, 0)]
        topics = await admin.list_topics()
        assert f"{topic_name}-md" in topics
        assert f"{topic_name}-p" in topics

    with_admin(broker, body)


# -- admin: create / delete topics -------------------------------------------------------------------
def test_admin_create_and_delete_topics(broker: EmbeddedBroker, topic_name: str) -> None:
    rec = Rec(b"new", b"data", (), now_ms())

    async def body(admin: AIOKafkaAdminClient) -> None:
        assert await _create(admin, topic_name, 3, **{"retention.ms": "3600000"}) == 0
        assert await _create(admin, topic_name) == TOPIC_ALREADY_EXISTS
        for bad in ("has space", "x" * 250, "..", "caf\u00e9"):
            assert await _create(admin, bad) == INVALID_TOPIC_EXCEPTION, bad
        assert await _create(admin, f"{topic_name}-np", 0) == INVALID_PARTITIONS
        assert await _create(admin, f"{topic_name}-cfg", **{"no.such.config": "1"}) == INVALID_CONFIG
        response = await admin.create_topics([NewTopic(f"{topic_name}-rf", 1, 3)])
        assert response.topic_errors[0][1] == INVALID_REPLICATION_FACTOR
        response = await admin.create_topics([NewTopic(f"{topic_name}-v", 2, 1)], validate_only=True)
        assert response.topic_errors[0][1] == 0
        topics = await admin.list_topics()
        assert topic_name in topics
        for absent in ("-v", "-rf", "-np", "-cfg"):
            assert f"{topic_name}{absent}" not in topics

        await aio_produce_async(broker.bootstrap_servers, topic_name, [Rec(b"old", b"data", (), now_ms())], partition=0)
        response = await admin.delete_topics([topic_name])
        assert response.topic_error_codes == [(topic_name, 0)]
        assert topic_name not in await admin.list_topics()
        response = await admin.delete_topics([topic_name])
        assert response.topic_error_codes == [(topic_name, UNKNOWN_TOPIC_OR_PARTITION)]

        assert await _create(admin, topic_name) == 0
        assert await aio_produce_async(broker.bootstrap_servers, topic_name, [rec]) == [(0, 0)]

    with_admin(broker, body)
    assert_records(aio_consume(broker.bootstrap_servers, topic_name, 1), expected([rec], [(0, 0)]))


# -- many partitions ---------------------------------------------------------------------------------
def test_many_partitions_spread_by_key(broker: EmbeddedBroker, topic_name: str) -> None:
    partitions = 64
    with_admin(broker, lambda admin: _create(admin, topic_name, partitions))
    ts = now_ms()
    records = [Rec(f"user-{i % 128}".encode(), f"value-{i}".encode(), (), ts + i) for i in range(512)]
    acked = aio_produce(broker.bootstrap_servers, topic_name, records)
    by_key: dict[bytes | None, set[int]] = defaultdict(set)
    per_partition: dict[int, list[int]] = defaultdict(list)
    for rec, (part, off) in zip(records, acked, strict=True):
        by_key[rec.key].add(part)
        per_partition[part].append(off)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key landed in two partitions"
    assert len(per_partition) >= 40, f"keys spread over only {len(per_partition)} partitions"
    assert all(offs == list(range(len(offs))) for offs in per_partition.values())

    got = aio_consume(broker.bootstrap_servers, topic_name, len(records), partitions=range(partitions))
    want = expected(records, acked)
    for part in range(partitions):
        assert_records([g for g in got if g.partition == part], [w for w in want if w.partition == part])


def test_create_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        assert await _create(admin, topic_name, 2) == 0
        await admin.create_partitions({topic_name: NewPartitions(3)}, validate_only=True)
        assert len((await admin.describe_topics([topic_name]))[0]["partitions"]) == 2
        response = await admin.create_partitions({topic_name: NewPartitions(5)})
        assert response.topic_errors == [(topic_name, 0, None)]
        assert len((await admin.describe_topics([topic_name]))[0]["partitions"]) == 5
        with pytest.raises(aerr.InvalidPartitionsError):
            await admin.create_partitions({topic_name: NewPartitions(3)})
        with pytest.raises(aerr.UnknownTopicOrPartitionError):
            await admin.create_partitions({f"{topic_name}-none": NewPartitions(3)})

    with_admin(broker, body)
    rec = Rec(b"k", b"in a new partition", (("h", b"v"),), now_ms())
    assert aio_produce(broker.bootstrap_servers, topic_name, [rec], partition=4) == [(4, 0)]
    assert_records(aio_consume(broker.bootstrap_servers, topic_name, 1, partitions=[4]), expected([rec], [(4, 0)]))


# -- configs -----------------------------------------------------------------------------------------
def test_describe_topic_and_broker_configs(broker: EmbeddedBroker, topic_name: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        assert await _create(admin, topic_name, **{"retention.ms": "86400000"}) == 0
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        [resource] = response.resources
        assert resource[0] == 0  # error_code
        entries = {e[0]: e for e in resource[4]}  # name -> (name, value, read_only, source, ...)
        assert entries["retention.ms"][1:4] == ("86400000", False, 1)  # DYNAMIC_TOPIC_CONFIG
        assert entries["max.message.bytes"][1:4] == (str(MAX_BYTES), False, 4)  # STATIC_BROKER_CONFIG
        assert entries["cleanup.policy"][1:4] == ("delete", False, 5)  # DEFAULT_CONFIG

        keys = {"message.max.bytes": None}
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs=keys)])
        [resource] = response.resources
        # a dynamic broker config (KIP-226), so not read-only, as Kafka describes it
        assert [(e[0], e[1], e[2]) for e in resource[4]] == [("message.max.bytes", str(MAX_BYTES), False)]

        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, f"{topic_name}-none")])
        assert response.resources[0][0] == UNKNOWN_TOPIC_OR_PARTITION

    with_admin(broker, body)


# -- fetches across segments -------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_fetch_spans_many_segments(tmp_path: Path, codec: str) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=SMALL_SEGMENT_OVERRIDES) as small:
        topic = "spanning"
        rnd = random.Random(codec)
        ts = now_ms() - 10_000
        # half incompressible: a codec still shrinks batches (so clients use it) to about half
        records = [Rec(b"k%d" % i, rnd.randbytes(4000) + bytes(4000), (("i", b"%d" % i),), ts + i) for i in range(300)]
        acked = aio_produce(small.bootstrap_servers, topic, records, codec=codec, max_batch_size=32768)
        assert_contiguous(acked)
        assert len(segment_files(small, topic)) >= 15  # >= 1.2 MB stored in 64 KiB segments
        assert_codec_on_disk(small, topic, codec)
        assert_records(aio_consume(small.bootstrap_servers, topic, len(records)), expected(records, acked))
        assert_records(aio_consume(small.bootstrap_servers, topic, 100, start=200), expected(records, acked)[200:])


# -- cross-client ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["confluent", "kafka-python"])
def test_other_clients_read_what_aiokafka_wrote(broker: EmbeddedBroker, topic_name: str, reader: str) -> None:
    records = matrix_records(topic_name, null_header=True)
    acked = aio_produce(broker.bootstrap_servers, topic_name, records[:4], codec="snappy")
    acked += aio_produce(broker.bootstrap_servers, topic_name, records[4:], codec="lz4")
    assert_contiguous(acked)
    consume = {"confluent": confluent_consume, "kafka-python": kp_consume}[reader]
    assert_records(consume(broker.bootstrap_servers, topic_name, len(records)), expected(records, acked))


# -- restarts ----------------------------------------------------------------------------------------
def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=BROKER_OVERRIDES) as b:
        first = numbered_records("a", 0, 30)
        second = numbered_records("b", 30, 30)

        async def body() -> list[tuple[int, int]]:
            producer = aio_producer(b.bootstrap_servers)
            await producer.start()
            try:
                acked = []
                for i, rec in enumerate(first + second):
                    if i == len(first):
                        await asyncio.to_thread(b.restart)  # the same client reconnects
                    meta = await producer.send_and_wait(
                        "restart", rec.value, rec.key, timestamp_ms=rec.timestamp_ms, headers=list(rec.headers)
                    )
                    acked.append((meta.partition, meta.offset))
                return acked
            finally:
                await producer.stop()

        acked = asyncio.run(body())
        assert_contiguous(acked)
        b.restart()
        assert_records(aio_consume(b.bootstrap_servers, "restart", 60), expected(first + second, acked))


def test_crash_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides={**BROKER_OVERRIDES, **CRASH_SAFE_OVERRIDES}) as b:
        sent: list[Rec] = []
        acked: list[tuple[int, int]] = []
        for round_ in range(3):
            batch = numbered_records(f"r{round_}", len(sent), 25)
            acked += aio_produce(b.bootstrap_servers, "crash", batch, codec="gzip")
            sent += batch
            b.kill()
            b.start()
        assert_contiguous(acked)
        assert_records(aio_consume(b.bootstrap_servers, "crash", len(sent)), expected(sent, acked))


def test_alter_configs_replaces_topic_overrides(broker: EmbeddedBroker, topic_name: str) -> None:
    """AlterConfigs (33), aiokafka's only way to change configs, replaces the override set."""

    async def body(admin: AIOKafkaAdminClient) -> None:
        assert await _create(admin, topic_name, **{"retention.ms": "86400000"}) == 0
        resource = ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"segment.bytes": "1048576"})
        [response] = await admin.alter_configs([resource])
        assert [r[0] for r in response.resources] == [0]
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        entries = {e[0]: e for e in response.resources[0][4]}
        assert entries["segment.bytes"][1] == "1048576"
        assert entries["retention.ms"][1] != "86400000"  # not named again: back to the default

        bad = ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"segment.bytes": "not-a-number"})
        [response] = await admin.alter_configs([bad])
        assert response.resources[0][0] == 40  # INVALID_CONFIG

    with_admin(broker, body)
