"""confluent-kafka (librdkafka 2.x) against a real pylog broker process.

Covers metadata, produce/consume in every acks × codec, ListOffsets, auto-create, the admin API
(topics, partitions, configs), many partitions, fetches across segments, restarts, a cross-client
check, and the librdkafka record cross-check: batches librdkafka wrote are read back from the
segment files and decoded with ``pyspark_log.records``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    ACKS,
    BROKER_OVERRIDES,
    CODEC_IDS,
    CODECS,
    CRASH_SAFE_OVERRIDES,
    MAX_BYTES,
    MAX_TIMESTAMP,
    SMALL_SEGMENT_OVERRIDES,
    TIMEOUT_S,
    TIMESTAMP_QUERIES,
    Got,
    Rec,
    aio_consume,
    assert_codec_on_disk,
    assert_contiguous,
    assert_records,
    cluster_id_of,
    confluent_consume,
    confluent_consumer,
    confluent_produce,
    confluent_producer_config,
    confluent_send,
    confluent_wait,
    disk_batches,
    expected,
    kcat_consume,
    kp_consume,
    matrix_records,
    now_ms,
    numbered_records,
    segment_files,
    timestamp_batches,
)
from tests.waiting import Deadline, wait_until

# kafka-python loads its schemas with importlib.resources APIs deprecated in 3.11
pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("confluent"), overrides=BROKER_OVERRIDES) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(admin: AdminClient, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=TIMEOUT_S)
    futures[name].result(TIMEOUT_S)


def _error_code(future: object) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT_S)  # type: ignore[attr-defined]
    return info.value.args[0].code()


def _topics(admin: AdminClient) -> dict:
    return admin.list_topics(timeout=TIMEOUT_S).topics


# -- metadata --------------------------------------------------------------------------------------
def test_metadata_lists_brokers_topics_partitions_and_cluster_id(
    broker: EmbeddedBroker, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, partitions=3)
    md = admin.list_topics(timeout=TIMEOUT_S)
    assert md.cluster_id == cluster_id_of(broker)
    assert md.controller_id == 1
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1", broker.port)}
    topic = md.topics[topic_name]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2]
    for p in topic.partitions.values():
        assert (p.leader, p.replicas, p.isrs, p.error) == (1, [1], [1], None)

    cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)  # DescribeCluster (60)
    assert cluster.cluster_id == cluster_id_of(broker)
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.port)]


# -- produce / consume matrix ----------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_consume_roundtrip(broker: EmbeddedBroker, topic_name: str, acks: int, codec: str) -> None:
    records = matrix_records(topic_name, null_header=True)
    acked = confluent_produce(broker.bootstrap_servers, topic_name, records, acks=acks, codec=codec)
    got = confluent_consume(broker.bootstrap_servers, topic_name, len(records))
    if acks == 0:  # no acknowledgement: the records only have to arrive
        assert_records(got, expected(records, [(0, -1)] * len(records)), check_offsets=False)
    else:
        assert_contiguous(acked)
        assert_records(got, expected(records, acked))
    assert_codec_on_disk(broker, topic_name, codec)
    low, high = confluent_consumer(broker.bootstrap_servers).get_watermark_offsets(
        TopicPartition(topic_name, 0), timeout=TIMEOUT_S
    )
    assert (low, high) == (0, len(records))


def test_fetch_long_poll_wakes_on_produce(broker: EmbeddedBroker, topic_name: str) -> None:
    """A fetch parked for new data (fetch.wait.max.ms=10 s) is answered as soon as a record lands."""
    confluent_produce(broker.bootstrap_servers, topic_name, [Rec(b"k", b"first", (), now_ms())])
    consumer = confluent_consumer(broker.bootstrap_servers, **{"fetch.wait.max.ms": 10_000})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 1)])
        assert consumer.poll(1.0) is None  # the consumer is now parked at offset 1
        start = time.monotonic()
        confluent_produce(broker.bootstrap_servers, topic_name, [Rec(b"k", b"second", (), now_ms())])
        msg = None
        while msg is None and time.monotonic() - start < TIMEOUT_S:
            msg = consumer.poll(0.1)
        elapsed = time.monotonic() - start
        assert msg is not None
        assert msg.error() is None
        assert (msg.offset(), msg.value()) == (1, b"second")
        assert elapsed < 5.0, f"the parked fetch answered after {elapsed:.1f}s, not on the append"
    finally:
        consumer.close()


def test_out_of_range_fetch_resets_to_earliest(broker: EmbeddedBroker, topic_name: str) -> None:
    records = numbered_records("oor", 0, 5)
    acked = confluent_produce(broker.bootstrap_servers, topic_name, records)
    # OFFSET_OUT_OF_RANGE from the broker makes the client apply auto.offset.reset
    got = confluent_consume(broker.bootstrap_servers, topic_name, 5, start=1000)
    assert_records(got, expected(records, acked))
    consumer = confluent_consumer(broker.bootstrap_servers, **{"auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 1000)])
        msg = wait_until(
            lambda: (m := consumer.poll(0.2)) is not None and m.error() and m, "an error from the poll", interval_s=0
        )
        assert msg.error().code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()


# -- ListOffsets -----------------------------------------------------------------------------------
def _timestamped_topic(broker: EmbeddedBroker, topic: str) -> int:
    """Produce ``TIMESTAMP_BATCHES`` (one request per batch); returns the base timestamp."""
    base = now_ms() - 100_000
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 100}))
    acked = []
    for batch in timestamp_batches(base):
        acked += confluent_wait(producer, confluent_send(producer, topic, batch))
    assert_contiguous(acked)
    return base


def test_list_offsets_earliest_latest_and_by_timestamp(
    broker: EmbeddedBroker, admin: AdminClient, topic_name: str
) -> None:
    base = _timestamped_topic(broker, topic_name)
    consumer = confluent_consumer(broker.bootstrap_servers)
    try:
        tp = TopicPartition(topic_name, 0)
        assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, 7)
        answers = {}  # one query per call: librdkafka asks about a partition once per request
        for delta in TIMESTAMP_QUERIES:
            [res] = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + delta)], timeout=TIMEOUT_S)
            assert res.error is None
            answers[delta] = res.offset
        assert answers == TIMESTAMP_QUERIES
    finally:
        consumer.close()

    # The admin ListOffsets API, with timestamps in the answer and the max-timestamp spec (v7).
    specs = {
        "earliest": (OffsetSpec.earliest(), 0, -1),
        "latest": (OffsetSpec.latest(), 7, -1),
        "max": (OffsetSpec.max_timestamp(), MAX_TIMESTAMP[0], base + MAX_TIMESTAMP[1]),
        "t+25": (OffsetSpec.for_timestamp(base + 25), 1, base + 30),
        "t+55": (OffsetSpec.for_timestamp(base + 55), 5, base + 90),
    }
    for name, (spec, offset, timestamp) in specs.items():
        futures = admin.list_offsets({TopicPartition(topic_name, 0): spec}, request_timeout=TIMEOUT_S)
        info = futures[TopicPartition(topic_name, 0)].result(TIMEOUT_S)
        assert (info.offset, info.timestamp) == (offset, timestamp), name


def test_log_append_time_topic_stamps_records(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    records = [Rec(b"k", b"v%d" % i, (), 1_000_000 + i) for i in range(3)]  # CreateTime in 1970
    assert_contiguous(confluent_produce(broker.bootstrap_servers, topic_name, records, codec="snappy"))
    after = now_ms()
    consumer = confluent_consumer(broker.bootstrap_servers)
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        msgs = []
        deadline = Deadline(TIMEOUT_S)
        while len(msgs) < 3 and not deadline.expired():
            msgs += [m for m in consumer.consume(3, timeout=0.2) if not m.error()]
    finally:
        consumer.close()
    assert [m.value() for m in msgs] == [r.value for r in records]
    for msg in msgs:
        kind, stamp = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before <= stamp <= after


# -- auto-create -----------------------------------------------------------------------------------
def test_auto_create_on_metadata_and_produce(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    producer = Producer(confluent_producer_config(broker.bootstrap_servers))
    md = producer.list_topics(topic=f"{topic_name}-md", timeout=TIMEOUT_S)
    topic = md.topics[f"{topic_name}-md"]
    assert topic.error is None
    assert sorted(topic.partitions) == [0]  # num.partitions=1
    # never auto-created: an illegal name, and internal (__) names
    md = producer.list_topics(topic=f"{topic_name} bad!", timeout=TIMEOUT_S)
    assert md.topics[f"{topic_name} bad!"].error.code() == KafkaError.TOPIC_EXCEPTION
    md = producer.list_topics(topic=f"__{topic_name}", timeout=TIMEOUT_S)
    assert md.topics[f"__{topic_name}"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    acked = confluent_produce(broker.bootstrap_servers, f"{topic_name}-p", [Rec(b"k", b"v", (), now_ms())])
    assert acked == [(0, 0)]
    topics = _topics(admin)
    assert f"{topic_name}-md" in topics
    assert sorted(topics[f"{topic_name}-p"].partitions) == [0]
    assert f"__{topic_name}" not in topics


def test_no_auto_create_when_the_client_disallows_it(
    broker: EmbeddedBroker, admin: AdminClient, topic_name: str
) -> None:
    consumer = confluent_consumer(broker.bootstrap_servers, **{"allow.auto.create.topics": False})
    try:
        md = consumer.list_topics(topic=topic_name, timeout=TIMEOUT_S)
        assert md.topics[topic_name].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()
    assert topic_name not in _topics(admin)


# -- admin: create / delete topics -------------------------------------------------------------------
def test_admin_create_and_delete_topics(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, partitions=3, config={"retention.ms": "3600000"})
    assert sorted(_topics(admin)[topic_name].partitions) == [0, 1, 2]

    def create(topic: NewTopic, **kwargs: object) -> object:
        return admin.create_topics([topic], operation_timeout=TIMEOUT_S, **kwargs)[topic.topic]

    assert _error_code(create(NewTopic(topic_name, 1, 1))) == KafkaError.TOPIC_ALREADY_EXISTS
    for bad in ("has space", "x" * 250, "..", "caf\u00e9"):
        assert _error_code(create(NewTopic(bad, 1, 1))) == KafkaError.TOPIC_EXCEPTION, bad
    assert _error_code(create(NewTopic(f"{topic_name}-rf", 1, 3))) == KafkaError.INVALID_REPLICATION_FACTOR
    assert (
        _error_code(create(NewTopic(f"{topic_name}-cfg", 1, 1, config={"no.such.config": "1"})))
        == KafkaError.INVALID_CONFIG
    )
    create(NewTopic(f"{topic_name}-v", 2, 1), validate_only=True).result(TIMEOUT_S)  # type: ignore[attr-defined]
    topics = _topics(admin)
    assert f"{topic_name}-v" not in topics
    assert f"{topic_name}-rf" not in topics

    confluent_produce(broker.bootstrap_servers, topic_name, [Rec(b"old", b"data", (), now_ms())], partition=0)
    admin.delete_topics([topic_name], operation_timeout=TIMEOUT_S)[topic_name].result(TIMEOUT_S)
    wait_until(lambda: topic_name not in _topics(admin), "the deleted topic to leave the metadata")
    unknown = admin.delete_topics([topic_name], operation_timeout=TIMEOUT_S)[topic_name]
    assert _error_code(unknown) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created under the same name it starts empty: the old log was deleted with the topic.
    _create(admin, topic_name, partitions=1)
    rec = Rec(b"new", b"data", (), now_ms())
    assert confluent_produce(broker.bootstrap_servers, topic_name, [rec]) == [(0, 0)]
    assert_records(confluent_consume(broker.bootstrap_servers, topic_name, 1), expected([rec], [(0, 0)]))


def test_admin_replica_assignments(admin: AdminClient, topic_name: str) -> None:
    """Explicit replica lists: this broker (node 1) is the only valid replica; another id, or
    uneven lists, are INVALID_REPLICA_ASSIGNMENT and create nothing."""
    admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[1], [1]])])[topic_name].result(TIMEOUT_S)
    assert sorted(_topics(admin)[topic_name].partitions) == [0, 1]
    grow = admin.create_partitions([NewPartitions(topic_name, 3, replica_assignment=[[1]])])[topic_name]
    grow.result(TIMEOUT_S)
    assert sorted(_topics(admin)[topic_name].partitions) == [0, 1, 2]
    for lists in ([[1], [2]], [[1, 1]]):
        name = f"{topic_name}-bad"
        future = admin.create_topics([NewTopic(name, len(lists), replica_assignment=lists)])[name]
        assert _error_code(future) == KafkaError.INVALID_REPLICA_ASSIGNMENT, lists
        assert name not in _topics(admin)
    wrong = admin.create_partitions([NewPartitions(topic_name, 5, replica_assignment=[[1]])])[topic_name]
    assert _error_code(wrong) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert sorted(_topics(admin)[topic_name].partitions) == [0, 1, 2]


# -- many partitions ---------------------------------------------------------------------------------
def test_many_partitions_spread_by_key(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    partitions = 48
    _create(admin, topic_name, partitions=partitions)
    ts = now_ms()
    records = [Rec(f"user-{i % 96}".encode(), f"value-{i}".encode(), (), ts + i) for i in range(480)]
    acked = confluent_produce(broker.bootstrap_servers, topic_name, records)
    by_key: dict[bytes, set[int]] = defaultdict(set)
    for rec, (part, _) in zip(records, acked, strict=True):
        assert rec.key is not None
        by_key[rec.key].add(part)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key landed in two partitions"
    used = {p for p, _ in acked}
    assert len(used) >= 32, f"keys spread over only {len(used)} partitions"
    per_partition: dict[int, list[int]] = defaultdict(list)
    for part, off in acked:
        per_partition[part].append(off)
    assert all(offs == list(range(len(offs))) for offs in per_partition.values())

    got = confluent_consume(broker.bootstrap_servers, topic_name, len(records), partitions=range(partitions))
    want = expected(records, acked)
    for part in range(partitions):
        assert_records([g for g in got if g.partition == part], [w for w in want if w.partition == part])


def test_create_partitions(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, partitions=2)

    def grow(topic: str, count: int, **kwargs: object) -> object:
        return admin.create_partitions([NewPartitions(topic, count)], operation_timeout=TIMEOUT_S, **kwargs)[topic]

    grow(topic_name, 3, validate_only=True).result(TIMEOUT_S)  # type: ignore[attr-defined]
    assert len(_topics(admin)[topic_name].partitions) == 2
    grow(topic_name, 5).result(TIMEOUT_S)  # type: ignore[attr-defined]
    assert sorted(_topics(admin)[topic_name].partitions) == [0, 1, 2, 3, 4]
    assert _error_code(grow(topic_name, 3)) == KafkaError.INVALID_PARTITIONS
    assert _error_code(grow(f"{topic_name}-none", 3)) == KafkaError.UNKNOWN_TOPIC_OR_PART

    rec = Rec(b"k", b"in a new partition", (("h", b"v"),), now_ms())
    assert confluent_produce(broker.bootstrap_servers, topic_name, [rec], partition=4) == [(4, 0)]
    assert_records(
        confluent_consume(broker.bootstrap_servers, topic_name, 1, partitions=[4]), expected([rec], [(4, 0)])
    )


# -- configs -----------------------------------------------------------------------------------------
def test_describe_and_incrementally_alter_topic_configs(
    broker: EmbeddedBroker, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, config={"retention.ms": "86400000"})
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    def describe() -> dict:
        return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)

    configs = describe()
    assert configs["retention.ms"].value == "86400000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default
    assert configs["max.message.bytes"].value == str(MAX_BYTES)  # the broker's message.max.bytes
    assert configs["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    change = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "10000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([change], request_timeout=TIMEOUT_S)[change].result(TIMEOUT_S)
    configs = describe()
    assert configs["max.message.bytes"].value == "10000"
    assert configs["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert configs["retention.ms"].is_default

    # The new limit is enforced by the log.
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, retries=0))
    small = confluent_wait(producer, confluent_send(producer, topic_name, [Rec(b"k", b"x" * 100, (), now_ms())]))
    assert small == [(0, 0)]
    reports = confluent_send(producer, topic_name, [Rec(b"k", b"x" * 20_000, (), now_ms())])
    producer.flush(TIMEOUT_S)
    assert reports[0] is not None
    assert reports[0][0] is not None
    assert reports[0][0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    bad = [
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
    ]
    for entry in bad:
        res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[entry])
        code = _error_code(admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S)[res])
        assert code == KafkaError.INVALID_CONFIG, entry.name
    assert describe()["max.message.bytes"].value == "10000"

    broker_res = ConfigResource(ResourceType.BROKER, "1")
    broker_configs = admin.describe_configs([broker_res], request_timeout=TIMEOUT_S)[broker_res].result(TIMEOUT_S)
    assert broker_configs["message.max.bytes"].value == str(MAX_BYTES)
    assert not broker_configs["message.max.bytes"].is_read_only  # dynamic (KIP-226), as in Kafka
    assert broker_configs["node.id"].is_read_only


# -- fetches across segments -------------------------------------------------------------------------
def test_fetch_spans_many_segments(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=SMALL_SEGMENT_OVERRIDES) as small:
        topic = "spanning"
        ts = now_ms() - 10_000
        records = [Rec(b"k%d" % i, bytes([i % 251]) * 8000, (("i", b"%d" % i),), ts + i) for i in range(400)]
        acked = confluent_produce(small.bootstrap_servers, topic, records, **{"batch.size": 32768})
        assert_contiguous(acked)
        assert len(segment_files(small, topic)) >= 20
        assert_records(confluent_consume(small.bootstrap_servers, topic, len(records)), expected(records, acked))
        # from the middle of the log, and by timestamp
        tail = confluent_consume(small.bootstrap_servers, topic, 150, start=250)
        assert_records(tail, expected(records, acked)[250:])
        consumer = confluent_consumer(small.bootstrap_servers)
        try:
            [res] = consumer.offsets_for_times([TopicPartition(topic, 0, ts + 333)], timeout=TIMEOUT_S)
            assert res.offset == 333
        finally:
            consumer.close()


# -- librdkafka's batches, read back from disk ---------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_batches_decode_from_segment_files(broker: EmbeddedBroker, topic_name: str, codec: str) -> None:
    records = matrix_records(topic_name, big=False, null_header=True)
    acked = confluent_produce(broker.bootstrap_servers, topic_name, records, codec=codec, **{"linger.ms": 50})
    assert_contiguous(acked)
    batches = disk_batches(broker, topic_name)
    decoded = [Got(0, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for _, recs in batches for r in recs]
    assert_records(decoded, expected(records, acked))
    next_offset = 0
    for header, recs in batches:
        assert header.magic == 2
        assert header.base_offset == next_offset
        assert header.records_count == len(recs)
        assert header.compression in (CODEC_IDS[codec], 0)  # librdkafka skips codecs that do not help
        next_offset = header.base_offset + header.last_offset_delta + 1
    assert next_offset == len(records)
    assert any(h.compression == CODEC_IDS[codec] for h, _ in batches)


# -- cross-client ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["kafka-python", "aiokafka", "kcat"])
def test_other_clients_read_what_confluent_wrote(broker: EmbeddedBroker, topic_name: str, reader: str) -> None:
    records = matrix_records(topic_name, binary_headers=reader != "kcat", null_header=reader != "kcat")
    acked = confluent_produce(broker.bootstrap_servers, topic_name, records[:4], codec="gzip")
    acked += confluent_produce(broker.bootstrap_servers, topic_name, records[4:], codec="zstd")
    assert_contiguous(acked)
    consume = {"kafka-python": kp_consume, "aiokafka": aio_consume, "kcat": kcat_consume}[reader]
    assert_records(consume(broker.bootstrap_servers, topic_name, len(records)), expected(records, acked))


# -- restarts ----------------------------------------------------------------------------------------
def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=BROKER_OVERRIDES) as b:
        producer = Producer(confluent_producer_config(b.bootstrap_servers))
        first = numbered_records("a", 0, 30)
        acked = confluent_wait(producer, confluent_send(producer, "restart", first))
        # Two consumers parked in 30 s long-polls at the log end; one goes away before the restart.
        parked = [confluent_consumer(b.bootstrap_servers, **{"fetch.wait.max.ms": 30_000}) for _ in range(2)]
        for consumer in parked:
            consumer.assign([TopicPartition("restart", 0, 30)])
            assert consumer.poll(0.5) is None
        parked.pop().close()
        # A clean stop with fetches still parked exits 0 (flushed, checkpointed); that parked
        # requests are cancelled rather than waited for is tested in tests/unit/network.
        assert b.stop() == 0
        b.start()

        second = numbered_records("b", 30, 30)
        acked += confluent_wait(producer, confluent_send(producer, "restart", second))  # same client reconnects
        assert_contiguous(acked)
        # the consumer that stayed reconnects and reads on from where it was
        [consumer] = parked
        got: list[Got] = []
        deadline = Deadline(TIMEOUT_S)
        try:
            while len(got) < 30 and not deadline.expired():
                for msg in consumer.consume(30, timeout=0.2):
                    if msg.error() is None:
                        got.append(
                            Got(0, msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
                        )
        finally:
            consumer.close()
        assert_records(got, expected(second, acked[30:]))
        b.restart()
        assert_records(confluent_consume(b.bootstrap_servers, "restart", 60), expected(first + second, acked))


def test_crash_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides={**BROKER_OVERRIDES, **CRASH_SAFE_OVERRIDES}) as b:
        sent: list[Rec] = []
        acked: list[tuple[int, int]] = []
        for round_ in range(3):
            batch = numbered_records(f"r{round_}", len(sent), 25)
            acked += confluent_produce(b.bootstrap_servers, "crash", batch, codec="lz4")
            sent += batch
            b.kill()
            b.start()
        assert_contiguous(acked)
        assert_records(confluent_consume(b.bootstrap_servers, "crash", len(sent)), expected(sent, acked))
