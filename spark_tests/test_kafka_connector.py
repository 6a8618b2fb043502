"""Spark's own Kafka connector and ``format("pylog")``, side by side, on both brokers, in one run.

Spark's Kafka connector (``spark-sql-kafka-0-10``, on the session's classpath from
``spark_tests.jars``; the 4.2.0 connector on Spark 4.3.0) reads and writes a pylog broker
unchanged: batch and streaming reads, ``startingOffsetsByTimestamp``, ``includeHeaders``,
``kafka.isolation.level=read_committed`` over committed and aborted transactions, and writes with
keys, headers and partitions read back by confluent-kafka (librdkafka). The other way round,
``format("pylog")`` reads from and writes to Apache Kafka 4.1 (``tests.apache_kafka``): batch and
streaming reads, a batch write, and a streaming write that is exactly once for read_committed
readers, also when Spark replays the last micro-batch. Where both connectors read one topic, the
rows are compared column by column (Spark's "Structured Streaming + Kafka Integration Guide":
the source schema key, value, topic, partition, offset, timestamp, timestampType, headers).

The option names are the connector's (``kafka.bootstrap.servers``, ``kafka.isolation.level``),
given unchanged to both sources. Differences met here are in docs/compatibility.md ("The Spark
source, compared with Spark's Kafka connector", "The Spark sink, compared with Spark's Kafka sink").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.client import AdminClient, Consumer, Producer
from spark_tests.helpers import Kafka, recent_ms, wait_until
from spark_tests.jars import connector_version, reference_jars
from spark_tests.test_sink import confluent_values
from tests.apache_kafka import ApacheKafkaCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("stop_queries")]

Row = tuple[Any, ...]


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def connector(spark: Any) -> str:
    """The session has Spark's Kafka connector; its version (fails with the reason otherwise)."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")  # type: ignore[attr-defined]
    if "spark-sql-kafka-0-10" not in jars:
        reference_jars()  # raises ConnectorUnavailable with the reason
        pytest.fail(f"the session was started without Spark's Kafka connector (spark.jars={jars!r})")
    return connector_version()


class ApacheKafka(Kafka):
    """The Spark tier's Kafka toolbox (pylog's admin, producer, consumer) on Apache Kafka."""

    def __init__(self, cluster: ApacheKafkaCluster) -> None:
        self.broker = None  # type: ignore[assignment]
        self.servers = cluster.bootstrap()
        self.admin = AdminClient({"bootstrap.servers": self.servers})
        self.producer = Producer({"bootstrap.servers": self.servers, "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": self.servers})


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """A one-node Apache Kafka (combined KRaft node) shared by the module's tests."""
    with ApacheKafkaCluster(tmp_path_factory.mktemp("apache-kafka"), brokers=(1,)) as cluster:
        helper = ApacheKafka(cluster)
        try:
            yield helper
        finally:
            helper.close()


# -- readers -----------------------------------------------------------------------------------


def load(spark: Any, fmt: str, servers: str, *, stream: bool = False, **options: str) -> Any:
    """``format(fmt)`` (``kafka`` or ``pylog``) with the connector's option names."""
    reader = (spark.readStream if stream else spark.read).format(fmt).option("kafka.bootstrap.servers", servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def row_tuple(row: Any) -> Row:
    """Every column of a source row, comparable (headers as a tuple of (key, value) pairs)."""
    headers = row["headers"] if "headers" in row else None  # noqa: SIM401 - Row has no .get
    return (
        row["topic"],
        row["partition"],
        row["offset"],
        None if row["key"] is None else bytes(row["key"]),
        None if row["value"] is None else bytes(row["value"]),
        row["timestamp"],
        row["timestampType"],
        None
        if headers is None
        else tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in headers),
    )


def rows(df_or_rows: Any) -> list[Row]:
    collected = df_or_rows.collect() if hasattr(df_or_rows, "collect") else df_or_rows
    return sorted((row_tuple(r) for r in collected), key=lambda r: (r[0], r[1], r[2]))


def both(spark: Any, servers: str, **options: str) -> tuple[list[Row], list[Row]]:
    """The same batch read with ``format("kafka")`` and ``format("pylog")``."""
    return rows(load(spark, "kafka", servers, **options)), rows(load(spark, "pylog", servers, **options))


def run_available_now(df: Any, checkpoint: Path) -> tuple[list[Row], list[int]]:
    """Run a streaming read with Trigger.AvailableNow into a memory table; its rows and the
    row counts of its non-empty micro-batches."""
    name = f"m_{uuid.uuid4().hex[:10]}"
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    got = rows(df.sparkSession.table(name))
    df.sparkSession.catalog.dropTempView(name)
    return got, batches


# -- test data ---------------------------------------------------------------------------------


def produce_mixed(kafka: Kafka, topic: str, partitions: int = 3, count: int = 30) -> int:
    """``count`` records over ``partitions``: keys or none, headers (a null header value, a
    repeated key) or none, tombstones, one explicit CreateTime per record. Returns the base time."""
    kafka.create(topic, partitions)
    base = recent_ms()
    for i in range(count):
        headers = [("h", f"x{i}".encode()), ("h", None), ("n", str(i).encode())] if i % 3 == 0 else None
        kafka.produce(
            topic,
            [None if i % 7 == 6 else f"value-{i}".encode()],
            partition=i % partitions,
            key=None if i % 5 == 4 else f"key-{i}",
            headers=headers,
            timestamp_ms=base + i * 1000,
        )
    return base


def produce_transactions(kafka: Kafka, topic: str) -> list[str]:
    """Transactions with pylog's transactional Producer, committed and aborted, interleaved with
    plain records on two partitions; returns the values a read_committed reader sees."""
    kafka.create(topic, 2)
    committed: list[str] = []
    with Producer({"bootstrap.servers": kafka.servers, "transactional.id": f"tx-{topic}"}) as producer:
        producer.init_transactions()
        for n, outcome in enumerate(["commit", "abort", "commit", "abort", "abort", "commit"]):
            producer.begin_transaction()
            values = [f"{outcome}-{n}-{i}" for i in range(5)]
            for i, value in enumerate(values):
                producer.send(topic, value.encode(), key=f"k{i}".encode(), partition=i % 2)
            producer.flush()
            if outcome == "commit":
                producer.commit_transaction()
                committed += values
            else:
                producer.abort_transaction()
            kafka.produce(topic, [f"plain-{n}"], partition=n % 2)
            committed.append(f"plain-{n}")
    return sorted(committed)


def committed_values(spark: Any, fmt: str, servers: str, topic: str) -> list[str]:
    df = load(spark, fmt, servers, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    return sorted(bytes(r["value"]).decode() for r in df.select("value").collect())


def settled(spark: Any, fmt: str, servers: str, topic: str, expected: list[str]) -> None:
    """Until a read_committed ``format(fmt)`` read of ``topic`` gives ``expected`` (the brokers
    write the COMMIT markers after EndTxn returns, so a commit becomes visible shortly after)."""
    seen: list[list[str]] = []

    def check() -> bool:
        seen.append(committed_values(spark, fmt, servers, topic))
        return seen[-1] == expected

    try:
        wait_until(check, 60, f"read_committed readers of {topic} to see {len(expected)} records")
    except AssertionError:
        assert seen[-1] == expected  # shows the difference
        raise


def confluent_records(servers: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    """(partition, key, value, headers, timestamp ms) of every record of ``topic`` as confluent-kafka
    (librdkafka, read_committed) reads them, up to the end offsets of the partitions."""
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = KafkaConsumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        marks = {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10) for p in range(partitions)
        }
        wanted = {p for p, (low, high) in marks.items() if high > low}
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in sorted(wanted)])
        got: list[tuple[Any, ...]] = []

        def done() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                headers = tuple(msg.headers() or ())
                got.append((msg.partition(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
            positions = consumer.position([KafkaTopicPartition(topic, p) for p in sorted(wanted)])
            return all(tp.offset >= marks[tp.partition][1] for tp in positions)

        wait_until(done, 60, f"confluent-kafka to read {topic} to its end")
        return sorted(got, key=lambda r: (r[0], r[2] or b""))
    finally:
        consumer.close()


# -- Spark's connector on a pylog broker --------------------------------------------------------


def test_spark_batch_read_of_pylog_matches_the_pylog_source(spark, kafka: Kafka, topic: str) -> None:
    produce_mixed(kafka, topic)
    spark_rows, pylog_rows = both(spark, kafka.servers, subscribe=topic, includeHeaders="true")
    assert len(spark_rows) == 30
    assert spark_rows == pylog_rows
    by_offset = {(r[1], r[2]): r for r in spark_rows}
    assert by_offset[(0, 0)][7] == (("h", b"x0"), ("h", None), ("n", b"0"))
    assert by_offset[(1, 1)][3:5] == (None, b"value-4")  # record 4: no key
    assert by_offset[(0, 2)][3:5] == (b"key-6", None)  # record 6: a tombstone
    assert by_offset[(1, 0)][7] is None  # record 1: no headers
    # Without includeHeaders both have the seven columns and the same rows.
    spark_plain, pylog_plain = both(spark, kafka.servers, assign=json.dumps({topic: [0, 2]}))
    assert spark_plain == pylog_plain
    assert len(spark_plain) == 20


def test_spark_starting_offsets_by_timestamp_on_pylog(spark, kafka: Kafka, topic: str) -> None:
    base = produce_mixed(kafka, topic, partitions=2, count=20)
    by_time = json.dumps({topic: {"0": base + 10_000, "1": base + 15_500}})
    spark_rows, pylog_rows = both(spark, kafka.servers, subscribe=topic, startingOffsetsByTimestamp=by_time)
    assert spark_rows == pylog_rows
    # partition 0 holds the even records (timestamps base + 2 s·k), partition 1 the odd ones
    assert [r[4] for r in spark_rows if r[1] == 0] == [f"value-{i}".encode() for i in (10, 12, 14, 16, 18)]
    assert [r[2] for r in spark_rows if r[1] == 1] == [8, 9]  # offsets of records 17 and 19


def test_spark_streaming_read_of_pylog(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    produce_mixed(kafka, topic, partitions=2, count=40)
    df = load(
        spark, "kafka", kafka.servers, stream=True, subscribe=topic, startingOffsets="earliest",
        maxOffsetsPerTrigger="15", includeHeaders="true",
    )  # fmt: skip
    streamed, batches = run_available_now(df, tmp_path / "chk")
    assert sum(batches) == 40
    assert len(batches) >= 3  # several micro-batches under maxOffsetsPerTrigger
    assert streamed == rows(load(spark, "pylog", kafka.servers, subscribe=topic, includeHeaders="true"))


def test_spark_read_committed_over_pylog_transactions(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    expected = produce_transactions(kafka, topic)
    settled(spark, "kafka", kafka.servers, topic, expected)
    committed = {"kafka.isolation.level": "read_committed"}
    spark_rows, pylog_rows = both(spark, kafka.servers, subscribe=topic, **committed)
    assert spark_rows == pylog_rows
    # read_uncommitted (the connector's default) sees the aborted records too, and so does pylog
    # when asked for it; the offsets of the control records are never rows.
    uncommitted = {"kafka.isolation.level": "read_uncommitted"}
    spark_all, pylog_all = both(spark, kafka.servers, subscribe=topic, **uncommitted)
    assert spark_all == pylog_all
    assert len(spark_all) == 6 * 5 + 6
    # A stream with read_committed: the same rows.
    df = load(spark, "kafka", kafka.servers, stream=True, subscribe=topic, startingOffsets="earliest", **committed)
    streamed, _ = run_available_now(df, tmp_path / "chk")
    assert streamed == spark_rows


def test_spark_sink_writes_keys_headers_and_partitions_to_pylog(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 3)
    data = [
        (f"k{i}" if i % 4 else None, f"v{i}".encode(), i % 3, [("h", f"x{i}".encode()), ("z", None)] if i % 2 else None)
        for i in range(60)
    ]
    df = spark.createDataFrame(
        data, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    ).repartition(2)
    df.write.format("kafka").option("kafka.bootstrap.servers", kafka.servers).option("topic", topic).save()
    expected = sorted(((p, None if k is None else k.encode(), v, tuple(h or ())) for k, v, p, h in data), key=by_value)
    assert sorted((r[:4] for r in confluent_records(kafka.servers, topic, 3)), key=by_value) == expected
    # Both sources read what Spark's sink wrote the same way.
    spark_rows, pylog_rows = both(spark, kafka.servers, subscribe=topic, includeHeaders="true")
    assert spark_rows == pylog_rows
    assert sorted(((r[1], r[3], r[4], r[7] or ()) for r in spark_rows), key=by_value) == expected


def by_value(record: tuple[Any, ...]) -> bytes:
    return record[2]


# -- format("pylog") on Apache Kafka ------------------------------------------------------------


def test_pylog_batch_and_stream_read_of_apache_kafka(spark, apache: ApacheKafka, topic: str, tmp_path: Path) -> None:
    produce_mixed(apache, topic)
    spark_rows, pylog_rows = both(spark, apache.servers, subscribe=topic, includeHeaders="true")
    assert len(spark_rows) == 30
    assert pylog_rows == spark_rows
    df = load(
        spark, "pylog", apache.servers, stream=True, subscribe=topic, startingOffsets="earliest",
        maxOffsetsPerTrigger="12", includeHeaders="true",
    )  # fmt: skip
    streamed, batches = run_available_now(df, tmp_path / "chk")
    assert sum(batches) == 30
    assert len(batches) >= 3
    assert streamed == spark_rows


def test_pylog_read_committed_over_apache_kafka_transactions(spark, apache: ApacheKafka, topic: str) -> None:
    expected = produce_transactions(apache, topic)
    settled(spark, "kafka", apache.servers, topic, expected)
    assert committed_values(spark, "pylog", apache.servers, topic) == expected
    for isolation in ("read_committed", "read_uncommitted"):
        spark_rows, pylog_rows = both(spark, apache.servers, subscribe=topic, **{"kafka.isolation.level": isolation})
        assert pylog_rows == spark_rows


def test_pylog_batch_write_to_apache_kafka(spark, apache: ApacheKafka, topic: str) -> None:
    apache.create(topic, 3)
    data = [(f"k{i}", f"v{i}", [("h", f"x{i}".encode())] if i % 2 else None) for i in range(300)]
    df = spark.createDataFrame(data, "key string, value string, headers array<struct<key:string,value:binary>>")
    df.repartition(3).write.format("pylog").mode("append").option("kafka.bootstrap.servers", apache.servers).option(
        "topic", topic
    ).save()
    expected = sorted(v for _k, v, _h in data)
    settled(spark, "kafka", apache.servers, topic, expected)
    assert confluent_values(apache.servers, topic, 3) == expected
    # keys went to murmur2 partitions, as Spark's sink (the Java producer) would put them
    spark_rows = rows(load(spark, "kafka", apache.servers, subscribe=topic, includeHeaders="true"))
    assert {bytes(r[3]).decode(): r[1] for r in spark_rows} == _java_partitions(spark, apache, topic, data)
    with_headers = {bytes(r[4]).decode(): r[7] for r in spark_rows}
    assert with_headers["v1"] == (("h", b"x1"),)
    assert with_headers["v0"] is None


def _java_partitions(spark: Any, apache: ApacheKafka, topic: str, data: list[Any]) -> dict[str, int]:
    """Where Spark's own sink puts the same keys: write them to a twin topic, read them back."""
    twin = apache.create(f"{topic}-java", 3)
    df = spark.createDataFrame([(k, v) for k, v, _h in data], "key string, value string")
    df.write.format("kafka").option("kafka.bootstrap.servers", apache.servers).option("topic", twin).save()
    got = load(spark, "kafka", apache.servers, subscribe=twin).selectExpr("CAST(key AS STRING) AS k", "partition")
    return {r["k"]: r["partition"] for r in got.collect()}


def test_pylog_streaming_write_to_apache_kafka_is_exactly_once(
    spark, apache: ApacheKafka, topic: str, tmp_path: Path
) -> None:
    source, sink = apache.create(f"{topic}-in", 2), apache.create(f"{topic}-out", 2)
    apache.produce_spread(source, 2, 120)
    chk = tmp_path / "chk"
    df = load(
        spark, "pylog", apache.servers, stream=True, subscribe=source, startingOffsets="earliest",
        maxOffsetsPerTrigger="40",
    ).selectExpr("key", "concat('out-', CAST(value AS STRING)) AS value")  # fmt: skip

    def run() -> Any:
        query = (
            df.writeStream.format("pylog")
            .option("kafka.bootstrap.servers", apache.servers)
            .option("topic", sink)
            .option("checkpointLocation", str(chk))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the AvailableNow query did not finish"
        assert query.exception() is None
        return query

    first = run()
    expected = sorted(f"out-v{i}" for i in range(120))
    settled(spark, "kafka", apache.servers, sink, expected)
    assert confluent_values(apache.servers, sink, 2) == expected

    # Spark replays the last micro-batch (its commit file is gone, as after a crash between the
    # sink's commit and the checkpoint's): the batch marks in Apache Kafka's group coordinator make
    # the replay write nothing, not even aborted data.
    last = max(p["batchId"] for p in first.recentProgress)
    assert last >= 2
    (chk / "commits" / str(last)).unlink()
    (chk / "commits" / f".{last}.crc").unlink(missing_ok=True)
    apache.produce_spread(source, 2, 40, "w")
    again = run()
    replayed = [p for p in again.recentProgress if p["batchId"] == last]
    assert replayed, "Spark did not replay the last batch"
    assert replayed[0]["numInputRows"] > 0
    expected = sorted([*expected, *(f"out-w{i}" for i in range(40))])
    settled(spark, "kafka", apache.servers, sink, expected)
    assert confluent_values(apache.servers, sink, 2) == expected
    every = load(spark, "kafka", apache.servers, subscribe=sink).select("value").collect()
    assert sorted(bytes(r["value"]).decode() for r in every) == expected  # read_uncommitted too
