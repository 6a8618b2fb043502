"""kafka-python 3.x against a real pylog broker process.

The producer runs with ``enable_idempotence=False`` (its 3.x default needs InitProducerId, which
this broker does not serve yet); consumers use ``assign()`` with ``group_id=None``.
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    ACKS,
    BROKER_OVERRIDES,
    CODECS,
    CRASH_SAFE_OVERRIDES,
    MAX_BYTES,
    MAX_TIMESTAMP,
    SMALL_SEGMENT_OVERRIDES,
    TIMEOUT_S,
    TIMESTAMP_QUERIES,
    Rec,
    aio_consume,
    assert_codec_on_disk,
    assert_contiguous,
    assert_records,
    cluster_id_of,
    confluent_consume,
    expected,
    kp_consume,
    kp_consumer,
    kp_produce,
    kp_producer,
    matrix_records,
    now_ms,
    numbered_records,
    segment_files,
    timestamp_batches,
)
from tests.waiting import wait_until

with warnings.catch_warnings():  # kafka-python loads its schemas with importlib APIs deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, TopicPartition
    from kafka import errors as kerr
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewPartitions, NewTopic, OffsetSpec

# kafka-python loads its schemas with importlib.resources APIs deprecated in 3.11
pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("kafka-python"), overrides=BROKER_OVERRIDES) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=int(TIMEOUT_S * 1000))
    yield client
    client.close()


def _send_wait(producer: object, topic: str, records: list[Rec]) -> list[tuple[int, int]]:
    futures = [
        producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp_ms=r.timestamp_ms)  # type: ignore[attr-defined]
        for r in records
    ]
    producer.flush(timeout=TIMEOUT_S)  # type: ignore[attr-defined]
    return [(m.partition, m.offset) for m in (f.get(timeout=TIMEOUT_S) for f in futures)]


# -- metadata --------------------------------------------------------------------------------------
def test_metadata_lists_brokers_topics_partitions_and_cluster_id(
    broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str
) -> None:
    admin.create_topics([NewTopic(topic_name, 3, 1)])
    cluster = admin.describe_cluster()  # DescribeCluster (60)
    assert cluster["cluster_id"] == cluster_id_of(broker)
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
    assert topic_name in admin.list_topics()
    [described] = admin.describe_topics([topic_name])
    assert described["error_code"] == 0
    assert [
        (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in described["partitions"]
    ] == [(i, 1, [1], [1]) for i in range(3)]

    consumer = kp_consumer(broker.bootstrap_servers)
    try:
        assert consumer.partitions_for_topic(topic_name) == {0, 1, 2}
        assert topic_name in consumer.topics()
    finally:
        consumer.close()


# -- produce / consume matrix ----------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_consume_roundtrip(broker: EmbeddedBroker, topic_name: str, acks: int, codec: str) -> None:
    records = matrix_records(topic_name)
    acked = kp_produce(broker.bootstrap_servers, topic_name, records, acks=acks, codec=codec)
    got = kp_consume(broker.bootstrap_servers, topic_name, len(records))
    if acks == 0:  # no acknowledgement: the records only have to arrive
        assert_records(got, expected(records, [(0, -1)] * len(records)), check_offsets=False)
    else:
        assert_contiguous(acked)
        assert_records(got, expected(records, acked))
    assert_codec_on_disk(broker, topic_name, codec)


# -- ListOffsets -----------------------------------------------------------------------------------
def test_list_offsets_earliest_latest_and_by_timestamp(
    broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str
) -> None:
    base = now_ms() - 100_000
    producer = kp_producer(broker.bootstrap_servers, linger_ms=100)
    try:
        acked = []
        for batch in timestamp_batches(base):
            acked += _send_wait(producer, topic_name, batch)
        assert_contiguous(acked)
    finally:
        producer.close(timeout=5)

    tp = TopicPartition(topic_name, 0)
    consumer = kp_consumer(broker.bootstrap_servers)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 7}
        answers = {}
        for delta in TIMESTAMP_QUERIES:
            found = consumer.offsets_for_times({tp: base + delta})[tp]
            answers[delta] = -1 if found is None else found.offset
        assert answers == TIMESTAMP_QUERIES
        assert consumer.offsets_for_times({tp: base + 25})[tp].timestamp == base + 30
    finally:
        consumer.close()

    found = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    assert (found.offset, found.timestamp) == (MAX_TIMESTAMP[0], base + MAX_TIMESTAMP[1])
    assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 0
    assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 7


# -- auto-create -----------------------------------------------------------------------------------
def test_auto_create_on_metadata_and_produce(broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str) -> None:
    producer = kp_producer(broker.bootstrap_servers)
    try:
        assert producer.partitions_for(f"{topic_name}-md") == {0}  # Metadata auto-creates, num.partitions=1
    finally:
        producer.close(timeout=5)
    assert kp_produce(broker.bootstrap_servers, f"{topic_name}-p", [Rec(b"k", b"v", (), now_ms())]) == [(0, 0)]
    topics = admin.list_topics()
    assert f"{topic_name}-md" in topics
    assert f"{topic_name}-p" in topics


def test_no_auto_create_when_the_client_disallows_it(
    broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str
) -> None:
    consumer = kp_consumer(broker.bootstrap_servers, allow_auto_create_topics=False)
    try:
        assert not consumer.partitions_for_topic(topic_name)
    finally:
        consumer.close()
    assert topic_name not in admin.list_topics()


# -- admin: create / delete topics -------------------------------------------------------------------
def test_admin_create_and_delete_topics(broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str) -> None:
    created = admin.create_topics([NewTopic(topic_name, 3, 1, topic_configs={"retention.ms": "3600000"})])
    [result] = created["topics"]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 3, 1)
    assert result["configs"]["retention.ms"]["value"] == "3600000"

    with pytest.raises(kerr.TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    for bad in ("has space", "x" * 250, "..", "caf\u00e9"):
        with pytest.raises(kerr.InvalidTopicError):
            admin.create_topics([NewTopic(bad, 1, 1)])
    with pytest.raises(kerr.InvalidReplicationFactorError):
        admin.create_topics([NewTopic(f"{topic_name}-rf", 1, 3)])
    with pytest.raises(kerr.InvalidPartitionsError):
        admin.create_topics([NewTopic(f"{topic_name}-np", 0, 1)])
    with pytest.raises(kerr.InvalidConfigurationError):
        admin.create_topics([NewTopic(f"{topic_name}-cfg", 1, 1, topic_configs={"no.such.config": "1"})])
    with pytest.raises(kerr.InvalidRequestError):  # counts and replica lists together
        admin.create_topics([NewTopic(f"{topic_name}-both", 2, 1, replica_assignments={0: [1], 1: [1]})])
    with pytest.raises(kerr.InvalidReplicationAssignmentError):  # partition 1 missing
        admin.create_topics([NewTopic(f"{topic_name}-gap", -1, -1, replica_assignments={0: [1], 2: [1]})])
    admin.create_topics([NewTopic(f"{topic_name}-v", 2, 1)], validate_only=True)
    topics = admin.list_topics()
    for absent in ("-v", "-rf", "-np", "-cfg", "-both", "-gap"):
        assert f"{topic_name}{absent}" not in topics

    kp_produce(broker.bootstrap_servers, topic_name, [Rec(b"old", b"data", (), now_ms())], partition=0)
    deleted = admin.delete_topics([topic_name])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic_name, 0)]
    wait_until(lambda: topic_name not in admin.list_topics(), "the deleted topic to leave the metadata")
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name])

    admin.create_topics([NewTopic(topic_name, 1, 1)])
    rec = Rec(b"new", b"data", (), now_ms())
    assert kp_produce(broker.bootstrap_servers, topic_name, [rec]) == [(0, 0)]
    assert_records(kp_consume(broker.bootstrap_servers, topic_name, 1), expected([rec], [(0, 0)]))


# -- many partitions ---------------------------------------------------------------------------------
def test_many_partitions_spread_by_key(broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str) -> None:
    partitions = 40
    admin.create_topics([NewTopic(topic_name, partitions, 1)])
    ts = now_ms()
    records = [Rec(f"user-{i % 80}".encode(), f"value-{i}".encode(), (), ts + i) for i in range(400)]
    acked = kp_produce(broker.bootstrap_servers, topic_name, records)
    by_key: dict[bytes | None, set[int]] = defaultdict(set)
    per_partition: dict[int, list[int]] = defaultdict(list)
    for rec, (part, off) in zip(records, acked, strict=True):
        by_key[rec.key].add(part)
        per_partition[part].append(off)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key landed in two partitions"
    assert len(per_partition) >= 25, f"keys spread over only {len(per_partition)} partitions"
    assert all(offs == list(range(len(offs))) for offs in per_partition.values())

    got = kp_consume(broker.bootstrap_servers, topic_name, len(records), partitions=range(partitions))
    want = expected(records, acked)
    for part in range(partitions):
        assert_records([g for g in got if g.partition == part], [w for w in want if w.partition == part])


def test_create_partitions(broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    admin.create_partitions({topic_name: NewPartitions(3)}, validate_only=True)
    assert len(admin.describe_topics([topic_name])[0]["partitions"]) == 2
    admin.create_partitions({topic_name: NewPartitions(5)})
    assert len(admin.describe_topics([topic_name])[0]["partitions"]) == 5
    with pytest.raises(kerr.InvalidPartitionsError):
        admin.create_partitions({topic_name: NewPartitions(3)})
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        admin.create_partitions({f"{topic_name}-none": NewPartitions(3)})

    rec = Rec(b"k", b"in a new partition", (("h", b"v"),), now_ms())
    assert kp_produce(broker.bootstrap_servers, topic_name, [rec], partition=4) == [(4, 0)]
    assert_records(kp_consume(broker.bootstrap_servers, topic_name, 1, partitions=[4]), expected([rec], [(4, 0)]))


# -- configs -----------------------------------------------------------------------------------------
def test_describe_and_alter_topic_configs(broker: EmbeddedBroker, admin: KafkaAdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1, topic_configs={"retention.ms": "86400000"})])

    def describe(config_filter: str = "modified") -> dict:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic_name)
        return admin.describe_configs([resource], config_filter=config_filter)["topic"][topic_name]

    modified = describe()
    assert set(modified) == {"retention.ms"}
    assert modified["retention.ms"]["value"] == "86400000"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    everything = describe("all")
    assert everything["max.message.bytes"]["value"] == str(MAX_BYTES)
    assert everything["max.message.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert everything["cleanup.policy"]["value"] == "delete"
    types = {name: entry["config_type"] for name, entry in everything.items()}
    assert (types["retention.ms"], types["max.message.bytes"], types["cleanup.policy"]) == ("LONG", "INT", "LIST")
    assert "UNKNOWN" not in types.values(), types

    # IncrementalAlterConfigs (44): SET one key, DELETE another
    change = ConfigResource(
        ConfigResourceType.TOPIC,
        topic_name,
        configs={"max.message.bytes": "10000", "retention.ms": (AlterConfigOp.DELETE, None)},
    )
    assert admin.alter_configs([change], incremental=True) == {"topic": {topic_name: "OK"}}
    modified = describe()
    assert set(modified) == {"max.message.bytes"}
    assert modified["max.message.bytes"]["value"] == "10000"

    producer = kp_producer(broker.bootstrap_servers, retries=0)
    try:
        assert _send_wait(producer, topic_name, [Rec(b"k", b"x" * 100, (), now_ms())]) == [(0, 0)]
        future = producer.send(topic_name, key=b"k", value=b"x" * 20_000)
        producer.flush(timeout=TIMEOUT_S)
        with pytest.raises(kerr.MessageSizeTooLargeError):
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)

    bad = ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "soon"})
    result = admin.alter_configs([bad], incremental=True, raise_on_unknown=False)["topic"][topic_name]
    assert "InvalidConfiguration" in result

    broker_res = ConfigResource(ConfigResourceType.BROKER, "1", configs={"message.max.bytes": None})
    described = admin.describe_configs([broker_res], config_filter="all")["broker"]["1"]
    assert described["message.max.bytes"]["value"] == str(MAX_BYTES)
    assert described["message.max.bytes"]["read_only"] is False  # a dynamic broker config (KIP-226), as Kafka


# -- fetches across segments -------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_fetch_spans_many_segments(tmp_path: Path, codec: str) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=SMALL_SEGMENT_OVERRIDES) as small:
        topic = "spanning"
        rnd = random.Random(codec)
        ts = now_ms() - 10_000
        # half incompressible: a codec still shrinks batches (so clients use it) to about half
        records = [Rec(b"k%d" % i, rnd.randbytes(4000) + bytes(4000), (("i", b"%d" % i),), ts + i) for i in range(300)]
        acked = kp_produce(small.bootstrap_servers, topic, records, codec=codec, batch_size=32768)
        assert_contiguous(acked)
        assert len(segment_files(small, topic)) >= 15  # >= 1.2 MB stored in 64 KiB segments
        assert_codec_on_disk(small, topic, codec)
        assert_records(kp_consume(small.bootstrap_servers, topic, len(records)), expected(records, acked))
        assert_records(kp_consume(small.bootstrap_servers, topic, 100, start=200), expected(records, acked)[200:])
        consumer = kp_consumer(small.bootstrap_servers)
        try:
            tp = TopicPartition(topic, 0)
            assert consumer.offsets_for_times({tp: ts + 222})[tp].offset == 222
        finally:
            consumer.close()


# -- cross-client ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["confluent", "aiokafka"])
def test_other_clients_read_what_kafka_python_wrote(broker: EmbeddedBroker, topic_name: str, reader: str) -> None:
    records = matrix_records(topic_name)
    acked = kp_produce(broker.bootstrap_servers, topic_name, records[:4], codec="lz4")
    acked += kp_produce(broker.bootstrap_servers, topic_name, records[4:], codec="snappy")
    assert_contiguous(acked)
    consume = {"confluent": confluent_consume, "aiokafka": aio_consume}[reader]
    assert_records(consume(broker.bootstrap_servers, topic_name, len(records)), expected(records, acked))


# -- restarts ----------------------------------------------------------------------------------------
def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=BROKER_OVERRIDES) as b:
        producer = kp_producer(b.bootstrap_servers)
        try:
            first = numbered_records("a", 0, 30)
            acked = _send_wait(producer, "restart", first)
            b.restart()
            second = numbered_records("b", 30, 30)
            acked += _send_wait(producer, "restart", second)  # the same client reconnects
        finally:
            producer.close(timeout=5)
        assert_contiguous(acked)
        b.restart()
        assert_records(kp_consume(b.bootstrap_servers, "restart", 60), expected(first + second, acked))


def test_crash_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides={**BROKER_OVERRIDES, **CRASH_SAFE_OVERRIDES}) as b:
        sent: list[Rec] = []
        acked: list[tuple[int, int]] = []
        for round_ in range(3):
            batch = numbered_records(f"r{round_}", len(sent), 25)
            acked += kp_produce(b.bootstrap_servers, "crash", batch, codec="zstd")
            sent += batch
            b.kill()
            b.start()
        assert_contiguous(acked)
        assert_records(kp_consume(b.bootstrap_servers, "crash", len(sent)), expected(sent, acked))
