"""Spark Connect scenarios, run in a process of their own by ``test_spark_connect.py``.

    python -m spark_tests.connect_scenarios <bootstrap servers> <input topic> <work dir>

Spark Connect (``SparkSession.builder.remote("local[2]")``: PySpark starts a Connect server in a
JVM of its own and the session is a gRPC client, as on Databricks serverless) cannot share a
Python process with the classic session of the other spark tests: a Connect session marks the
whole process as Connect (``SPARK_CONNECT_MODE_ENABLED``). So the scenarios run here, each doing
its Spark work through Connect only, and print one JSON line per scenario
(``{"scenario": name, "ok": bool, "result": ..., "error": str}``); the test checks their results
and what they wrote with readers that do not go through Spark (pylog's consumer, delta-rs).

The input topic holds ``INPUT_RECORDS`` records (``k<i>`` / ``v<i>``) on its partitions.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

INPUT_RECORDS = 120
PER_TRIGGER = 40  # maxOffsetsPerTrigger of the AvailableNow scenarios: several micro-batches


def main(servers: str, topic: str, work: Path) -> None:
    from pyspark.sql import SparkSession

    import pyspark_log

    # the local Connect server's Python workers connect back over a Unix socket (spark_tests/conftest.py)
    builder = SparkSession.builder.remote("local[2]").config("spark.python.unix.domain.socket.enabled", "true")
    spark = builder.getOrCreate()
    pyspark_log.register(spark)
    scenarios: dict[str, Callable[[Any, str, str, Path], Any]] = {
        "source_batch": source_batch,
        "source_available_now": source_available_now,
        "sink_batch": sink_batch,
        "sink_stream": sink_stream,
        "delta_sink": delta_sink_twice,
        "delta_sink_without_app_id": delta_sink_without_app_id,
        "load_to_delta": load_to_delta_twice,
    }
    try:
        for name, scenario in scenarios.items():
            try:
                result = scenario(spark, servers, topic, work / name)
                line = {"scenario": name, "ok": True, "result": result, "session": type(spark).__module__}
            except Exception as exc:  # reported to the test, which fails on it
                line = {"scenario": name, "ok": False, "error": f"{exc}\n{traceback.format_exc()}"}
            print("SCENARIO " + json.dumps(line), flush=True)
    finally:
        spark.stop()


def _source(spark: Any, servers: str, topic: str, **options: str) -> Any:
    reader = spark.read if options.pop("_batch", "") else spark.readStream
    return reader.format("pylog").option("bootstrap.servers", servers).option("subscribe", topic).options(**options)


def source_batch(spark: Any, servers: str, topic: str, work: Path) -> Any:
    df = _source(spark, servers, topic, _batch="1").load()
    return sorted(
        [r.key.decode(), r.value.decode(), r.partition, r.offset]
        for r in df.select("key", "value", "partition", "offset").collect()
    )


def source_available_now(spark: Any, servers: str, topic: str, work: Path) -> Any:
    """AvailableNow with maxOffsetsPerTrigger: each micro-batch's values are written to a file by
    ``foreachBatch`` (run by Connect's server-side Python worker)."""
    batches = work / "batches"
    batches.mkdir(parents=True)

    def record(df: Any, batch_id: int) -> None:
        values = [r.value for r in df.selectExpr("CAST(value AS STRING) AS value").collect()]
        (batches / f"{batch_id}.json").write_text(json.dumps(values))

    df = _source(spark, servers, topic, startingOffsets="earliest", maxOffsetsPerTrigger=str(PER_TRIGGER)).load()
    query = (
        df.writeStream.foreachBatch(record)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seen = [json.loads(f.read_text()) for f in sorted(batches.glob("*.json"), key=lambda f: int(f.stem))]
    return {"values": sorted(v for batch in seen for v in batch), "batches": [len(b) for b in seen if b]}


def sink_batch(spark: Any, servers: str, topic: str, work: Path) -> Any:
    out = f"{topic}-connect-batch"
    rows = spark.createDataFrame([(f"k{i}", f"w{i}") for i in range(50)], ["key", "value"])
    rows.write.format("pylog").mode("append").option("bootstrap.servers", servers).option("topic", out).save()
    return out


def sink_stream(spark: Any, servers: str, topic: str, work: Path) -> Any:
    """The input topic to another topic, exactly once, run twice on the same checkpoint: the
    second run finds nothing new and writes nothing."""
    out = f"{topic}-connect-stream"
    for _ in range(2):
        query = (
            _source(spark, servers, topic, startingOffsets="earliest", maxOffsetsPerTrigger=str(PER_TRIGGER))
            .load()
            .selectExpr("key", "value")
            .writeStream.format("pylog")
            .option("bootstrap.servers", servers)
            .option("topic", out)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return out


def delta_sink_twice(spark: Any, servers: str, topic: str, work: Path) -> Any:
    from pyspark_log.delta import delta_sink

    table = str(work / "table")
    for _ in range(2):
        query = (
            _source(spark, servers, topic, startingOffsets="earliest", maxOffsetsPerTrigger=str(PER_TRIGGER))
            .load()
            .writeStream.foreachBatch(delta_sink(table, app_id="connect-delta-sink"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return table


def delta_sink_without_app_id(spark: Any, servers: str, topic: str, work: Path) -> Any:
    from pyspark_log.delta import delta_sink

    query = (
        _source(spark, servers, topic, startingOffsets="earliest")
        .load()
        .writeStream.foreachBatch(delta_sink(str(work / "table")))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    except Exception as exc:  # the error is the result
        return str(exc)
    return None


def load_to_delta_twice(spark: Any, servers: str, topic: str, work: Path) -> Any:
    from pyspark_log.delta import load_to_delta

    table = str(work / "table")
    options = {"bootstrap.servers": servers, "subscribe": topic}
    first = load_to_delta(spark, options, table, app_id="connect-load", max_offsets_per_load=PER_TRIGGER)
    second = load_to_delta(spark, options, table, app_id="connect-load")
    return {"table": table, "first_rows": first.rows, "second_rows": second.rows}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
