"""Batch reads, ``spark.read.format("pylog")``: subscriptions, offset and timestamp bounds,
splitting, headers, timestamps, isolation levels (the Kafka connector's batch options)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from spark_tests.helpers import Kafka, read, recent_ms, values_of

pytestmark = pytest.mark.timeout(180)


def test_schema_and_rows_of_subscribe(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    kafka.produce(topic, ["a", "b"], partition=0, key="k")
    kafka.produce(topic, ["c"], partition=1)
    df = read(spark, kafka.servers, subscribe=topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int>"
    )
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, bytes(r.value)) for r in rows] == [(0, 0, b"a"), (0, 1, b"b"), (1, 0, b"c")]
    assert bytes(rows[0].key) == b"k"
    assert rows[2].key is None
    assert {r.topic for r in rows} == {topic}


def test_subscribe_pattern_and_comma_list(spark, kafka: Kafka, topic: str) -> None:
    for suffix in ("a", "b", "c"):
        kafka.create(f"{topic}-{suffix}")
        kafka.produce(f"{topic}-{suffix}", [suffix])
    assert values_of(read(spark, kafka.servers, subscribePattern=f"{topic}-[ab]")) == ["a", "b"]
    assert values_of(read(spark, kafka.servers, subscribe=f"{topic}-a,{topic}-c")) == ["a", "c"]


def test_assign_reads_only_the_named_partitions(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 3)
    kafka.produce_spread(topic, 3, 9)
    df = read(spark, kafka.servers, assign=json.dumps({topic: [0, 2]}))
    assert sorted({r.partition for r in df.collect()}) == [0, 2]
    assert df.count() == 6


def test_starting_and_ending_offsets_json(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    kafka.produce(topic, [f"p0-{i}" for i in range(10)], partition=0)
    kafka.produce(topic, [f"p1-{i}" for i in range(10)], partition=1)
    df = read(
        spark,
        kafka.servers,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 5, "1": -1}}),
    )
    got = values_of(df)
    assert got == sorted(["p0-3", "p0-4", *[f"p1-{i}" for i in range(10)]])
    latest_only = read(spark, kafka.servers, subscribe=topic, endingOffsets="latest", startingOffsets="earliest")
    assert latest_only.count() == 20


def test_timestamps_bound_batch_reads(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    base = recent_ms()
    for i in range(6):
        kafka.produce(topic, [f"t{i}"], partition=i % 2, timestamp_ms=base + i * 1000)
    # startingTimestamp: one timestamp for every partition; endingTimestamp likewise.
    df = read(spark, kafka.servers, subscribe=topic, startingTimestamp=str(base + 2000))
    assert values_of(df) == ["t2", "t3", "t4", "t5"]
    df = read(
        spark, kafka.servers, subscribe=topic, startingTimestamp=str(base + 1000), endingTimestamp=str(base + 4000)
    )
    assert values_of(df) == ["t1", "t2", "t3"]
    # Per-partition timestamps.
    df = read(
        spark,
        kafka.servers,
        subscribe=topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 4000, "1": base}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 10_000, "1": base + 3000}}),
    )
    assert values_of(df) == ["t1", "t4"]
    # The timestamp column is the record's CreateTime (UTC), type 0.
    rows = read(
        spark,
        kafka.servers,
        subscribe=topic,
        startingTimestamp=str(base + 4000),
        startingOffsetsByTimestampStrategy="latest",
    ).collect()
    row = next(r for r in rows if r.value == b"t4")
    assert row.timestamp.replace(tzinfo=dt.UTC) == dt.datetime.fromtimestamp((base + 4000) / 1000, dt.UTC)
    assert row.timestampType == 0


def test_starting_timestamp_strategy(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    base = recent_ms()
    kafka.produce(topic, ["early"], partition=0, timestamp_ms=base)
    kafka.produce(topic, ["late"], partition=1, timestamp_ms=base + 10_000)
    future = str(base + 5000)
    with pytest.raises(Exception, match="startingTimestamp") as err:
        read(spark, kafka.servers, subscribe=topic, startingTimestamp=future).collect()
    assert "startingOffsetsByTimestampStrategy" in str(err.value)
    df = read(
        spark,
        kafka.servers,
        subscribe=topic,
        startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert values_of(df) == ["late"]  # partition 0 starts at its latest offset: nothing from it


def test_log_append_time_topic(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    kafka.produce(topic, ["x"], timestamp_ms=recent_ms())
    row = read(spark, kafka.servers, subscribe=topic).collect()[0]
    assert row.timestampType == 1
    assert row.timestamp.replace(tzinfo=dt.UTC) > before


def test_headers(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic)
    kafka.produce(topic, ["h"], headers=[("trace", b"abc"), ("empty", None), ("trace", b"second")])
    kafka.produce(topic, ["none"])
    without = read(spark, kafka.servers, subscribe=topic)
    assert "headers" not in without.columns
    rows = read(spark, kafka.servers, subscribe=topic, includeHeaders="true").orderBy("offset").collect()
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in rows[0].headers] == [
        ("trace", b"abc"),
        ("empty", None),
        ("trace", b"second"),
    ]
    assert rows[1].headers is None  # no headers: null, as Spark's Kafka connector gives it


def test_min_partitions_and_max_records_per_partition_split_ranges(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    kafka.produce(topic, [f"a{i}" for i in range(100)], partition=0)
    kafka.produce(topic, [f"b{i}" for i in range(10)], partition=1)
    plain = read(spark, kafka.servers, subscribe=topic)
    assert plain.rdd.getNumPartitions() == 2
    split = read(spark, kafka.servers, subscribe=topic, minPartitions="6")
    assert split.rdd.getNumPartitions() >= 6
    assert split.count() == 110
    assert sorted(values_of(split)) == sorted(values_of(plain))
    capped = read(spark, kafka.servers, subscribe=topic, maxRecordsPerPartition="25")
    assert capped.rdd.getNumPartitions() == 5  # 100 -> 4 ranges of 25, 10 -> 1
    counts = capped.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert max(counts) <= 25
    assert sum(counts) == 110


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_isolation_levels_read_plain_records(spark, kafka: Kafka, topic: str, level: str) -> None:
    """Without transactions both levels see every record (LSO == high watermark)."""
    kafka.create(topic)
    kafka.produce(topic, ["x", "y"])
    assert values_of(read(spark, kafka.servers, subscribe=topic, isolationLevel=level)) == ["x", "y"]
    assert values_of(read(spark, kafka.servers, subscribe=topic, **{"kafka.isolation.level": level})) == ["x", "y"]


def test_empty_topic_and_missing_subscribed_topic_read_nothing(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic)
    assert read(spark, kafka.servers, subscribe=topic).count() == 0
    assert read(spark, kafka.servers, subscribe=f"{topic}-never-created").count() == 0


def test_values_survive_sql(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 3)
    kafka.produce_spread(topic, 3, 300)
    df = read(spark, kafka.servers, subscribe=topic)
    df.createOrReplaceTempView("batch_view")
    row = spark.sql(
        "SELECT count(*) AS n, count(DISTINCT partition, offset) AS d, sum(length(value)) AS bytes FROM batch_view"
    ).collect()[0]
    assert (row.n, row.d) == (300, 300)
    assert row.bytes == sum(len(f"v{i}") for i in range(300))
