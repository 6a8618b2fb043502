"""Topic to topic, exactly once: read page views, keep the checkout ones, write them to another
topic with ``writeStream.format("pylog")``, and read the result back as a ``read_committed``
reader would.

The query runs twice on one checkpoint (Trigger.AvailableNow), with new page views in between;
the output holds each checkout view once. See README "Writing to pylog" for the guarantee.

    python examples/streaming_to_pylog.py           (PYLOG_BOOTSTRAP=host:port to use your broker)
"""

from __future__ import annotations

from common import broker, create_topic, produce_page_views, spark_session, workdir

SOURCE = "page-views-for-checkout"
SINK = "checkouts"
CHECKOUT = "get_json_object(CAST(value AS STRING), '$.page') = '/checkout'"


def main() -> None:
    work = workdir("to-pylog")
    with broker(work) as servers:
        create_topic(servers, SOURCE, 2)
        create_topic(servers, SINK, 2)
        spark = spark_session("pylog-to-pylog")
        checkouts = (
            spark.readStream.format("pylog")
            .option("bootstrap.servers", servers)
            .option("subscribe", SOURCE)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
            .where(CHECKOUT)
            .select("key", "value", "headers")
        )
        for seed in (1, 2):
            produce_page_views(servers, SOURCE, 500, seed=seed)
            query = (
                checkouts.writeStream.format("pylog")
                .option("bootstrap.servers", servers)
                .option("topic", SINK)
                .option("checkpointLocation", str(work / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()

        def read(topic: str):
            reader = spark.read.format("pylog").option("bootstrap.servers", servers).option("subscribe", topic)
            return reader.option("isolationLevel", "read_committed").load()

        source_count = read(SOURCE).where(CHECKOUT).count()
        written = read(SINK)
        print(f"{written.count()} checkout views in {SINK!r}, {source_count} in {SOURCE!r}:")
        written.selectExpr("CAST(key AS STRING) AS user", "CAST(value AS STRING) AS view").show(5, truncate=False)
        spark.stop()


if __name__ == "__main__":
    main()
