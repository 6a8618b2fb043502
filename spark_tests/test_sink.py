"""Writing to pylog: ``df.write.format("pylog")`` and ``df.writeStream.format("pylog")`` against a
real broker — columns as Spark's Kafka sink, one transaction per task, exactly-once streams read
back by read_committed readers (our source and confluent-kafka), and errors at query start."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.functions import udf

from pyspark_log.client import TopicPartition
from pyspark_log.spark.available_now import run_available_now
from spark_tests.helpers import Kafka, read, stream, values_of, wait_until
from tests.waiting import Deadline

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("stop_queries")]


def output(spark, kafka: Kafka, topic: str, isolation: str = "read_committed") -> list[str]:
    """Every value of ``topic`` a reader with ``isolation`` sees, sorted."""
    return values_of(read(spark, kafka.servers, subscribe=topic, isolationLevel=isolation))


def settled(spark, kafka: Kafka, topic: str, expected: list[str], isolation: str = "read_committed") -> None:
    """Wait until a reader sees exactly ``expected`` (sorted). The coordinator writes the COMMIT
    markers after EndTxn returns (as Kafka does), so a commit becomes visible shortly after."""
    seen: list[list[str]] = []

    def check() -> bool:
        seen.append(output(spark, kafka, topic, isolation))
        return seen[-1] == expected

    try:
        wait_until(check, 60, f"{isolation} readers of {topic} to see {len(expected)} records")
    except AssertionError:
        assert seen[-1] == expected  # shows the difference
        raise


def confluent_values(servers: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[str]:
    """What a confluent-kafka read_committed consumer reads from the start of ``topic`` up to the
    end (every transaction is complete by then, so the end is the high watermark)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        tps = [KafkaTopicPartition(topic, p, 0) for p in range(partitions)]
        marks = {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10) for p in range(partitions)
        }
        ends = {p: high for p, (_low, high) in marks.items()}
        # A partition holding nothing (every task's sticky partition was another one) never gets a
        # position: nothing is fetched from it. It is read to its end already.
        empty = {p for p, (low, high) in marks.items() if high <= low}
        consumer.assign(tps)
        values: list[str] = []
        deadline = Deadline(timeout_s)
        while True:
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if all(p in empty or positions[p] >= ends[p] for p in range(partitions)):
                return sorted(values)
            assert not deadline.expired(), f"confluent-kafka did not reach {ends} (at {positions})"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
    finally:
        consumer.close()


def write_batch(df, kafka: Kafka, **options: str) -> None:
    writer = df.write.format("pylog").mode("append").option("bootstrap.servers", kafka.servers)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def start_stream(df, kafka: Kafka, chk: Path, *, trigger: dict[str, Any] | None = None, **options: str):
    writer = df.writeStream.format("pylog").option("bootstrap.servers", kafka.servers)
    writer = writer.option("checkpointLocation", str(chk))
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def run_stream(df, kafka: Kafka, chk: Path, **options: str):
    """Run ``df`` into pylog with Trigger.AvailableNow to completion; returns the query."""
    query = start_stream(df, kafka, chk, **options)
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None
    return query


def test_batch_write_of_every_column_reads_back(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 3)
    rows = [
        ("k1", b"v1", 2, [("h1", b"x"), ("h2", None)]),
        (None, b"v2", 0, []),
        ("k3", None, 1, None),
    ]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    write_batch(df, kafka, topic=topic, includeHeaders="true")  # accepted, as by Spark's Kafka sink
    wait_until(lambda: read(spark, kafka.servers, subscribe=topic).count() == 3, 60, "the committed rows")
    got = read(spark, kafka.servers, subscribe=topic, includeHeaders="true").collect()
    by_partition = {r.partition: r for r in got}
    assert sorted(by_partition) == [0, 1, 2]
    assert bytes(by_partition[2].key) == b"k1"
    assert bytes(by_partition[2].value) == b"v1"
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in by_partition[2].headers] == [
        ("h1", b"x"),
        ("h2", None),
    ]
    assert by_partition[0].key is None
    assert by_partition[1].value is None  # a null value is a tombstone


def test_topic_column_and_the_topic_option_that_overrides_it(spark, kafka: Kafka, topic: str) -> None:
    a, b, forced = kafka.create(f"{topic}-a"), kafka.create(f"{topic}-b"), kafka.create(f"{topic}-f")
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")
    write_batch(df, kafka)
    settled(spark, kafka, a, ["1", "3"])
    settled(spark, kafka, b, ["2"])
    write_batch(df, kafka, topic=forced)
    settled(spark, kafka, forced, ["1", "2", "3"])


def test_batch_write_commits_one_transaction_per_task(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 3)
    df = spark.range(0, 1000, 1, 4).selectExpr("CAST(id AS STRING) AS value", "CAST(id % 7 AS STRING) AS key")
    write_batch(df, kafka, topic=topic)
    expected = sorted(str(i) for i in range(1000))
    settled(spark, kafka, topic, expected)
    assert output(spark, kafka, topic, "read_uncommitted") == expected
    assert confluent_values(kafka.servers, topic, 3) == expected
    # Each task's transaction ends with a COMMIT marker in every partition it wrote: offsets
    # beyond the records.
    assert sum(kafka.latest(topic, p) for p in range(3)) > 1000


def test_a_failed_batch_write_leaves_nothing_visible(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)

    def boom(i):  # no type hints: they would make it a pandas UDF
        if i == 900:
            raise ValueError("injected failure in the last task")
        return str(i)

    fail_at_900 = udf(boom, "string")
    df = spark.range(0, 1000, 1, 4).select(fail_at_900("id").alias("value"))
    with pytest.raises(Exception, match="injected failure"):
        write_batch(df, kafka, topic=topic)
    assert output(spark, kafka, topic) == []
    # Nothing was left open either: the next write is visible at once (an open transaction would
    # hold the last stable offset, and so read_committed readers, back until it timed out).
    write_batch(spark.createDataFrame([("after",)], "value string"), kafka, topic=topic)
    settled(spark, kafka, topic, ["after"])
    assert confluent_values(kafka.servers, topic, 2) == ["after"]


def test_streaming_write_is_exactly_once(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    source, sink = kafka.create(f"{topic}-in", 2), kafka.create(f"{topic}-out", 2)
    kafka.produce_spread(source, 2, 200)
    df = stream(spark, kafka.servers, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    df = df.selectExpr("CAST(partition AS STRING) AS key", "concat('out-', CAST(value AS STRING)) AS value")
    # several limited micro-batches (PySpark 4.0/4.1: one per Trigger.AvailableNow run)
    runs = run_available_now(lambda: start_stream(df, kafka, tmp_path / "chk", topic=sink), timeout_s=300)
    batches = [p["batchId"] for query in runs for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) >= 4
    settled(spark, kafka, sink, sorted(f"out-v{i}" for i in range(200)))

    # More input, same checkpoint: only the new records are written.
    kafka.produce_spread(source, 2, 100, "w")
    runs = run_available_now(lambda: start_stream(df, kafka, tmp_path / "chk", topic=sink), timeout_s=300)
    expected = sorted([*(f"out-v{i}" for i in range(200)), *(f"out-w{i}" for i in range(100))])
    settled(spark, kafka, sink, expected)
    assert confluent_values(kafka.servers, sink, 2) == expected

    # The default transactionalIdPrefix is pylog-<query id>; each task's group holds its last batch.
    query = runs[-1]
    last = max(p["batchId"] for run in runs for p in run.recentProgress if p["numInputRows"])
    marks = kafka.admin.list_consumer_group_offsets(f"pylog-{query.id}-0", require_stable=True)
    assert [m.offset for m in marks.values()] == [last]
    assert list(marks) == [TopicPartition(sink, 0)]


def test_group_id_prefix_names_the_derived_ids(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    """Prefixed ACLs on groups and transactional ids cover what the sink derives."""
    source, sink = kafka.create(f"{topic}-in"), kafka.create(f"{topic}-out")
    kafka.produce_spread(source, 1, 10)
    df = stream(spark, kafka.servers, subscribe=source, startingOffsets="earliest").select("value")
    query = run_stream(df, kafka, tmp_path / "chk", topic=sink, groupIdPrefix="team-a")
    marks = kafka.admin.list_consumer_group_offsets(f"team-a-{query.id}-0", require_stable=True)
    assert list(marks) == [TopicPartition(sink, 0)]
    settled(spark, kafka, sink, sorted(f"v{i}" for i in range(10)))


def test_a_new_checkpoint_cannot_reuse_a_prefix(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    source, sink = kafka.create(f"{topic}-in"), kafka.create(f"{topic}-out")
    kafka.produce(source, ["a", "b"])
    df = stream(spark, kafka.servers, subscribe=source, startingOffsets="earliest").select("value")
    prefix = f"reused-{uuid.uuid4().hex[:6]}"
    run_stream(df, kafka, tmp_path / "first", topic=sink, transactionalIdPrefix=prefix)
    query = start_stream(df, kafka, tmp_path / "second", topic=sink, transactionalIdPrefix=prefix)
    with pytest.raises(Exception, match="a new checkpoint needs a new transactionalIdPrefix"):
        query.awaitTermination(180)
    settled(spark, kafka, sink, ["a", "b"])


def stream_error(df, kafka: Kafka, chk: Path, **options: str) -> str:
    """The error of starting ``df`` into pylog, or of its first step (where Spark asks for the writer)."""
    try:
        query = start_stream(df, kafka, chk, **options)
        query.awaitTermination(120)
        error = query.exception()
    except Exception as exc:
        return str(exc)
    assert error is not None, "the query did not fail"
    return str(error)


def test_bad_sink_options_and_columns_fail_at_start(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    src = stream(spark, kafka.servers, subscribe=kafka.create(topic), startingOffsets="earliest")
    kafka.produce(topic, ["x"])
    assert "no output topic: set the topic option" in stream_error(src.select("value"), kafka, tmp_path / "a")
    error = stream_error(src.selectExpr("offset AS value"), kafka, tmp_path / "b", topic=topic)
    assert "column value is bigint" in error
    error = stream_error(src.select("value"), kafka, tmp_path / "c", topic=topic, subscribe=topic)
    assert "is an option of the pylog source" in error
    assert output(spark, kafka, topic) == ["x"]  # nothing was written
    df = spark.createDataFrame([("x",)], "v string")
    with pytest.raises(Exception, match="no value column"):
        write_batch(df, kafka, topic=topic)
    with pytest.raises(Exception, match="overwrite is not supported"):
        df.selectExpr("v AS value").write.format("pylog").mode("overwrite").option(
            "bootstrap.servers", kafka.servers
        ).option("topic", topic).save()
