"""The Arrow sink (``DataSourceArrowWriter`` / ``DataSourceStreamArrowWriter`` → ``send_batch``)
writes the same records as the row sink for the same input (issue #14): keys, values, headers,
partitions and timestamps, with null keys and values, empty values, headers with null values,
explicit partitions and a timestamp column; for batch writes and for streaming micro-batches.

Null-key rows without a partition go to sticky partitions, which are random by design (Kafka documentation
§4.4 "The Producer" and §3.3 "Producer Configs", KIP-480); their records are compared without the partition.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from spark_tests.helpers import Kafka, read, stream, wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("stop_queries")]

PARTITIONS = 3
SCHEMA = "key string, value binary, partition int, headers array<struct<key:string,value:binary>>, timestamp timestamp"
# Recent: the tier's broker checks retention every 200 ms, and older records would be deleted.
T0 = datetime.datetime.now(datetime.UTC).replace(microsecond=0) - datetime.timedelta(minutes=10)


def row_source() -> type:
    """``format("pylog_rows")``: the pylog sink with the row writers (the reference)."""
    from pyspark_log.spark.source import PylogDataSource
    from pyspark_log.spark.writer import PylogBatchRowWriter, PylogStreamRowWriter, batch_writer, stream_writer

    class RowSource(PylogDataSource):
        @classmethod
        def name(cls) -> str:
            return "pylog_rows"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            plain = batch_writer(self.options, schema, overwrite)
            return PylogBatchRowWriter(plain.options, plain.columns)

        def streamWriter(self, schema, overwrite):  # type: ignore[no-untyped-def]  # noqa: N802
            plain = stream_writer(self.options, schema)
            return PylogStreamRowWriter(plain.options, plain.columns)

    return RowSource


def input_rows(n: int) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i % 17}"
        value = None if i % 11 == 0 else (b"" if i % 11 == 1 else f"value-{i}".encode() * (1 + i % 4))
        partition = i % PARTITIONS if i % 6 == 0 else None
        headers = None if i % 4 == 0 else [("h", f"{i}".encode()), ("null", None)][: 1 + i % 2]
        rows.append((key, value, partition, headers, T0 + datetime.timedelta(milliseconds=i)))
    return rows


def records(spark: Any, kafka: Kafka, topic: str) -> list[tuple[Any, ...]]:
    got = read(spark, kafka.servers, subscribe=topic, includeHeaders="true").collect()
    out = []
    for r in got:
        headers = tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers or [])
        sticky = r.key is None and r.partition is not None
        out.append(
            (
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                headers,
                r.timestamp.replace(tzinfo=datetime.UTC) if r.timestamp.tzinfo is None else r.timestamp,
                r.partition,
                sticky,
            )
        )
    return out


def comparable(recs: list[tuple[Any, ...]], explicit_rows: set[int]) -> list[tuple[Any, ...]]:
    """Records sorted; the partition of a sticky record (null key, no explicit partition) dropped."""
    out = []
    for key, value, headers, ts, partition, null_key in recs:
        row = (ts - T0) // datetime.timedelta(milliseconds=1)
        keep = not null_key or row in explicit_rows
        out.append((row, key, value, headers, ts, partition if keep else None))
    return sorted(out, key=repr)


def test_the_writers_are_arrow_writers() -> None:
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

    from pyspark_log.spark import writer

    assert issubclass(writer.PylogBatchWriter, DataSourceArrowWriter)
    assert issubclass(writer.PylogStreamWriter, DataSourceStreamArrowWriter)


def test_arrow_batch_write_equals_row_batch_write(spark: Any, kafka: Kafka, topic: str) -> None:
    spark.dataSource.register(row_source())
    rows = input_rows(3000)
    explicit = {i for i, r in enumerate(rows) if r[2] is not None}
    df = spark.createDataFrame(rows, SCHEMA).repartition(2)
    arrow_topic, row_topic = kafka.create(f"{topic}-a", PARTITIONS), kafka.create(f"{topic}-r", PARTITIONS)
    for fmt, out in (("pylog", arrow_topic), ("pylog_rows", row_topic)):
        df.write.format(fmt).mode("append").option("bootstrap.servers", kafka.servers).option("topic", out).save()
    wait_until(lambda: read(spark, kafka.servers, subscribe=arrow_topic).count() == len(rows), 60, "arrow rows")
    wait_until(lambda: read(spark, kafka.servers, subscribe=row_topic).count() == len(rows), 60, "row rows")
    a = comparable(records(spark, kafka, arrow_topic), explicit)
    r = comparable(records(spark, kafka, row_topic), explicit)
    assert a == r
    assert len({x[0] for x in a}) == len(rows)


def test_arrow_stream_write_equals_row_stream_write(spark: Any, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    """A topic → topic stream (key, value, headers, timestamp and partition of the input)."""
    spark.dataSource.register(row_source())
    source = kafka.create(f"{topic}-in", PARTITIONS)
    rows = input_rows(600)
    for i, (key, value, _partition, headers, ts) in enumerate(rows):
        kafka.producer.send(
            source,
            value,
            key=None if key is None else key.encode(),
            headers=headers,
            partition=i % PARTITIONS,
            timestamp_ms=int(ts.timestamp() * 1000),
        )
    kafka.producer.flush(30_000)
    explicit = set(range(len(rows)))
    outputs = {}
    for fmt in ("pylog", "pylog_rows"):
        out = kafka.create(f"{topic}-{fmt}", PARTITIONS)
        df = stream(spark, kafka.servers, subscribe=source, startingOffsets="earliest", includeHeaders="true")
        df = df.selectExpr("key", "value", "headers", "timestamp", "partition")
        query = (
            df.writeStream.format(fmt)
            .option("bootstrap.servers", kafka.servers)
            .option("topic", out)
            .option("checkpointLocation", str(tmp_path / fmt))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the AvailableNow query did not finish"
        assert query.exception() is None
        wait_until(lambda out=out: read(spark, kafka.servers, subscribe=out).count() == len(rows), 60, "the output")
        outputs[fmt] = comparable(records(spark, kafka, out), explicit)
    assert outputs["pylog"] == outputs["pylog_rows"]
    assert [x[5] for x in outputs["pylog"]] == [
        x[0] % PARTITIONS for x in outputs["pylog"]
    ]  # the partition column was kept
