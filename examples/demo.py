"""pylog's demo (``./dev demo``): an embedded broker -> page-view events -> a Structured Streaming
query with ``format("pylog")`` -> a Delta table, exactly once, resumed from its checkpoint.

1. starts a broker process on a temporary directory (or uses ``$PYLOG_BOOTSTRAP``);
2. produces 2,000 page views (JSON values, user keys, headers) over 4 partitions;
3. runs the streaming query with Trigger.AvailableNow (at most 800 offsets per micro-batch) into a
   Delta table through ``pyspark_log.delta.delta_sink`` (delta-rs here; delta-spark where Delta
   is on Spark's classpath);
4. produces 1,000 more and runs the query again: it resumes from its checkpoint;
5. checks every record landed exactly once and prints the table's row count and top pages.

    python examples/demo.py [--keep]      (--keep: leave the table and checkpoint on disk)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from common import broker, create_topic, produce_page_views, spark_session, workdir

TOPIC = "page-views"
PARTITIONS = 4
EVENT_SCHEMA = "user_id string, page string, country string, duration_ms long, ts long"


def run_stream(spark, servers: str, table: Path, checkpoint: Path) -> list[tuple[int, int]]:
    """One Trigger.AvailableNow run; returns (batch id, rows) of the batches it wrote."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    from pyspark_log.delta import delta_sink

    written: list[tuple[int, int]] = []
    events = (
        spark.readStream.format("pylog")
        .option("bootstrap.servers", servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "800")
        .option("includeHeaders", "true")
        .load()
        .select(
            F.col("key").cast("string").alias("user_key"),
            F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
            F.expr("filter(headers, h -> h.key = 'source')[0].value").cast("string").alias("source"),
            "topic",
            "partition",
            "offset",
            "timestamp",
        )
        .select("user_key", "e.*", "source", "topic", "partition", "offset", "timestamp")
    )
    query = (
        events.writeStream.foreachBatch(
            delta_sink(str(table), on_written=lambda batch_id, rows: written.append((batch_id, rows or 0)))
        )
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the Delta table and checkpoint")
    args = parser.parse_args()
    started = time.perf_counter()
    work = workdir("demo")
    table, checkpoint = work / "page_views", work / "checkpoint"
    try:
        with broker(work) as servers:
            print(f"pylog demo: broker at {servers}")
            create_topic(servers, TOPIC, PARTITIONS)
            took = produce_page_views(servers, TOPIC, 2000, seed=1)
            print(f"produced 2,000 page views to '{TOPIC}' ({PARTITIONS} partitions) in {took:.1f} s")

            print("starting Spark ...")
            spark = spark_session("pylog-demo")
            print(f"streaming into Delta table {table}")
            for batch_id, rows in run_stream(spark, servers, table, checkpoint):
                print(f"  micro-batch {batch_id}: {rows:,} rows")

            produce_page_views(servers, TOPIC, 1000, seed=2)
            print("produced 1,000 more; the query resumes from its checkpoint")
            for batch_id, rows in run_stream(spark, servers, table, checkpoint):
                print(f"  micro-batch {batch_id}: {rows:,} rows")

            report(spark, table)
            spark.stop()
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def report(spark, table: Path) -> None:
    from deltalake import DeltaTable

    dt = DeltaTable(str(table))
    data = dt.to_pyarrow_table()
    keys = {(r["partition"], r["offset"]) for r in data.select(["partition", "offset"]).to_pylist()}
    if data.num_rows != 3000 or len(keys) != 3000:
        raise SystemExit(f"expected 3,000 distinct records, found {data.num_rows} rows / {len(keys)} distinct")
    print(f"Delta table: {data.num_rows:,} rows, every record exactly once (table version {dt.version()})")
    df = spark.createDataFrame(data.select(["page", "user_id", "source"]).to_pandas())
    print("top pages:")
    for row in df.groupBy("page").count().orderBy("count", ascending=False).limit(5).collect():
        print(f"  {row['page']:<18} {row['count']:>5,}")
    sources = df.groupBy("source").count().orderBy("count", ascending=False).collect()
    print("by source header: " + ", ".join(f"{r['source']} {r['count']:,}" for r in sources))


if __name__ == "__main__":
    sys.exit(main())
