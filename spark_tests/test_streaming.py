"""Streaming reads, ``spark.readStream.format("pylog")``: starting offsets, admission control
(maxOffsetsPerTrigger, minOffsetsPerTrigger/maxTriggerDelay), Trigger.AvailableNow, splitting,
pattern subscriptions that discover new topics and partitions, headers and timestamps."""

from __future__ import annotations

import ast
import json
import time
from datetime import datetime

import pytest
from pyspark.sql.streaming import StreamingQueryListener

from pyspark_log.spark import compat
from pyspark_log.spark.available_now import run_available_now as pylog_available_now
from spark_tests.helpers import Kafka, batch_sizes, recent_ms, stream, to_memory, values_of, wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


def memory_values(spark, table: str) -> list[str]:
    return values_of(spark.table(table))


def iso_ms(timestamp: str) -> int:
    """Milliseconds since the epoch of a Spark progress/event timestamp (``2026-01-02T03:04:05.678Z``)."""
    return int(datetime.fromisoformat(timestamp).timestamp() * 1000)


class IdleTriggers(StreamingQueryListener):
    """Records the start time of every trigger that ran without a batch (``onQueryIdle``, posted at
    most once per ``spark.sql.streaming.noDataProgressEventInterval``)."""

    def __init__(self) -> None:
        self.started_ms: list[tuple[str, int]] = []

    def onQueryStarted(self, event) -> None:  # noqa: N802  (Spark names it)
        pass

    def onQueryProgress(self, event) -> None:  # noqa: N802  (Spark names it)
        pass

    def onQueryIdle(self, event) -> None:  # noqa: N802  (Spark names it)
        self.started_ms.append((str(event.id), iso_ms(event.timestamp)))

    def onQueryTerminated(self, event) -> None:  # noqa: N802  (Spark names it)
        pass

    def since(self, query_id: str, after_ms: int) -> bool:
        """Whether a trigger of ``query_id`` that started after ``after_ms`` ran idle."""
        return any(q == str(query_id) and ms > after_ms for q, ms in self.started_ms)


def batch_progress(query, count: int) -> list | None:
    """The progress of the first ``count`` batches that read rows, once the query reported them."""
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    return batches[:count] if len(batches) >= count else None


def run_available_now(df, checkpoint) -> tuple[object, list]:
    """Run ``df`` with Trigger.AvailableNow into a list (foreachBatch); returns (query, rows)."""
    rows: list = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None
    return query, rows


def test_starting_offsets_earliest_json_and_latest(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 10, "old")
    _, rows = run_available_now(
        stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest"), tmp_path / "a"
    )
    assert values_of(rows) == sorted(f"old{i}" for i in range(10))

    spec = json.dumps({topic: {"0": 3, "1": -2}})  # partition 0 holds old0, old2, ... old8
    _, rows = run_available_now(stream(spark, kafka.servers, subscribe=topic, startingOffsets=spec), tmp_path / "b")
    assert values_of(rows) == sorted(["old6", "old8", "old1", "old3", "old5", "old7", "old9"])

    latest = stream(spark, kafka.servers, subscribe=topic)  # the default for streams
    query, table = to_memory(latest, tmp_path / "c")
    query.processAllAvailable()
    assert memory_values(spark, table) == []
    kafka.produce_spread(topic, 2, 4, "new")
    query.processAllAvailable()
    assert memory_values(spark, table) == sorted(f"new{i}" for i in range(4))
    query.stop()


def test_starting_timestamp_in_a_stream(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    base = recent_ms()
    for i in range(6):
        kafka.produce(topic, [f"t{i}"], partition=i % 2, timestamp_ms=base + i * 1000)
    df = stream(spark, kafka.servers, subscribe=topic, startingTimestamp=str(base + 3000))
    _, rows = run_available_now(df, tmp_path / "a")
    assert values_of(rows) == ["t3", "t4", "t5"]
    by_ts = json.dumps({topic: {"0": base, "1": base + 5000}})
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsetsByTimestamp=by_ts)
    _, rows = run_available_now(df, tmp_path / "b")
    assert values_of(rows) == ["t0", "t2", "t4", "t5"]


def test_available_now_with_max_offsets_per_trigger(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    """The backlog in several limited micro-batches: one run on PySpark 4.2+, one run per batch
    on 4.0/4.1 (``run_available_now``; Spark runs one batch per AvailableNow run of a Python
    source there)."""
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 200)
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    rows: list = []

    def start():
        return (
            df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
            .option("checkpointLocation", str(tmp_path / "a"))
            .trigger(availableNow=True)
            .start()
        )

    runs = pylog_available_now(start, timeout_s=180)
    sizes = [size for query in runs for size in batch_sizes(query)]
    assert sum(sizes) == 200
    assert len(sizes) >= 4
    assert max(sizes) <= 52  # the limit, plus at most one offset per partition
    assert len(rows) == 200
    assert len({(r.partition, r.offset) for r in rows}) == 200
    if compat.HAS_TRIGGER_AVAILABLE_NOW:
        # Data produced after the AvailableNow run started is left for the next run.
        kafka.produce_spread(topic, 2, 10, "later")
        _, rows = run_available_now(df, tmp_path / "a")
        assert values_of(rows) == sorted(f"later{i}" for i in range(10))
    else:
        assert len(runs) == len(sizes) + 1  # one batch per run, then a run that finds nothing


def test_min_offsets_per_trigger_waits_for_max_trigger_delay(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic)
    kafka.produce(topic, [f"a{i}" for i in range(5)])
    df = stream(
        spark,
        kafka.servers,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="20",
        # counted from the last batch, not from the produce below: long enough that a slow first
        # wait still leaves the 2 s quiet check inside the delay
        maxTriggerDelay="20s",
    )
    idle = IdleTriggers()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")  # read at query start
    spark.streams.addListener(idle)
    try:
        query, table = to_memory(df, tmp_path / "a")
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        wait_until(lambda: len(memory_values(spark, table)) == 5, 60, "the first trigger (always runs)")
        kafka.produce(topic, [f"b{i}" for i in range(5)])
        produced_ms = time.time_ns() // 1_000_000
        # A trigger that started after the produce saw 10 < minOffsetsPerTrigger records and ran no batch.
        wait_until(lambda: idle.since(query.id, produced_ms), 60, "an idle trigger after the produce")
        assert len(memory_values(spark, table)) == 5, "10 < minOffsetsPerTrigger records: the trigger waits"
        wait_until(lambda: len(memory_values(spark, table)) == 10, 90, "maxTriggerDelay to release the batch")
        batches = wait_until(lambda: batch_progress(query, 2), 30, "the released batch's progress")
        first, released = batches
        # the delay counts from the first batch (less the moment a trigger takes to ask the source)
        assert iso_ms(released["timestamp"]) - iso_ms(first["timestamp"]) >= 19_000, (first, released)
        kafka.produce(topic, [f"c{i}" for i in range(25)])
        wait_until(lambda: len(memory_values(spark, table)) == 35, 60, "a batch of >= minOffsetsPerTrigger records")
        query.stop()
    finally:
        spark.streams.removeListener(idle)


def test_split_options_in_a_stream(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 120)
    df = stream(
        spark,
        kafka.servers,
        subscribe=topic,
        startingOffsets="earliest",
        minPartitions="5",
        maxRecordsPerPartition="20",
    )
    _, rows = run_available_now(df, tmp_path / "a")
    assert len(rows) == 120
    assert len({(r.partition, r.offset) for r in rows}) == 120


def test_pattern_discovers_new_topics_and_partitions(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    first, second = f"{topic}-a", f"{topic}-b"
    kafka.create(first)
    kafka.produce(first, ["a0", "a1"])
    df = stream(spark, kafka.servers, subscribePattern=f"{topic}-.*", startingOffsets="earliest", includeHeaders="true")
    query, table = to_memory(df, tmp_path / "a")
    query.processAllAvailable()
    assert memory_values(spark, table) == ["a0", "a1"]

    kafka.create(second, 2)
    kafka.produce(second, ["b0"], partition=0, headers=[("source", b"web")])
    kafka.produce(second, ["b1"], partition=1)
    wait_until(lambda: len(memory_values(spark, table)) == 4, 60, "the new topic's records")

    kafka.add_partitions(first, 3)
    kafka.produce(first, ["a2"], partition=2)
    kafka.produce(first, ["a3"], partition=0)
    wait_until(lambda: len(memory_values(spark, table)) == 6, 60, "the added partition's records")
    query.stop()

    rows = spark.table(table).collect()
    assert values_of(rows) == ["a0", "a1", "a2", "a3", "b0", "b1"]
    by_value = {bytes(r.value).decode(): r for r in rows}
    assert (by_value["a2"].topic, by_value["a2"].partition, by_value["a2"].offset) == (first, 2, 0)
    assert [(h.key, bytes(h.value)) for h in by_value["b0"].headers] == [("source", b"web")]
    assert by_value["b1"].headers is None  # no headers: null, as in Spark's Kafka connector


def test_progress_reports_offsets(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 10)
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest")
    query, _ = run_available_now(df, tmp_path / "a")
    source = query.lastProgress["sources"][0]
    end = source["endOffset"]
    if isinstance(end, str):  # PySpark 4.0's lastProgress shows a Python dict's repr, 4.1+ JSON
        end = json.loads(end) if end.startswith('{"') else ast.literal_eval(end)
    assert end == {topic: {"0": 5, "1": 5}}


def test_group_id_commits_do_not_disturb_the_query(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    """With groupId each batch's end offsets are committed to the group (lag tools see them);
    a broker without a group coordinator only costs a warning."""
    kafka.create(topic)
    kafka.produce(topic, ["a", "b"])
    group = f"group-{topic}"
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", groupId=group)
    _, rows = run_available_now(df, tmp_path / "a")
    assert values_of(rows) == ["a", "b"]
    try:
        committed = kafka.admin.list_consumer_group_offsets(group, timeout_ms=3000)
    except Exception:  # no group coordinator on this broker (yet)
        return
    if not compat.HAS_READ_LIMITS:
        # PySpark 4.0/4.1: a batch's end reaches the group when Spark commits it to the source,
        # as the next batch starts; the run's last batch is committed by the next run
        assert committed == {}
        kafka.produce(topic, ["c"])
        run_available_now(df, tmp_path / "a")
        committed = kafka.admin.list_consumer_group_offsets(group, timeout_ms=3000)
    assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 2}
