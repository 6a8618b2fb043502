"""Streaming into a Delta table exactly once, across restarts.

The query reads a topic with ``format("pylog")`` and appends each micro-batch with
``pyspark_log.delta.delta_sink`` (idempotent per micro-batch: a replay after a crash is skipped).
It runs twice over the same checkpoint, with more data produced in between, and checks that the
table holds every record once.

    python examples/streaming_to_delta.py [TABLE_PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import broker, create_topic, produce_page_views, spark_session, workdir

from pyspark_log.delta import delta_sink

TOPIC = "events"


def run_once(spark, servers: str, table: Path, checkpoint: Path) -> None:
    query = (
        spark.readStream.format("pylog")
        .option("bootstrap.servers", servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")  # only for the first run; later runs resume
        .option("maxOffsetsPerTrigger", "500")
        .load()
        .writeStream.foreachBatch(delta_sink(str(table)))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    work = workdir("to-delta")
    table = Path(sys.argv[1]) if len(sys.argv) > 1 else work / "events"
    checkpoint = work / "checkpoint"
    with broker(work) as servers:
        create_topic(servers, TOPIC, 3)
        spark = spark_session("pylog-to-delta")
        produce_page_views(servers, TOPIC, 1200, seed=1)
        run_once(spark, servers, table, checkpoint)
        produce_page_views(servers, TOPIC, 300, seed=2)
        run_once(spark, servers, table, checkpoint)  # resumes where the first run stopped

        from deltalake import DeltaTable

        data = DeltaTable(str(table)).to_pyarrow_table(columns=["partition", "offset"])
        distinct = len(set(zip(data["partition"].to_pylist(), data["offset"].to_pylist(), strict=True)))
        print(f"{table}: {data.num_rows} rows, {distinct} distinct records (expected 1500)")
        spark.stop()


if __name__ == "__main__":
    main()
