"""Parse JSON values with ``from_json`` and aggregate them: a batch read and a stream.

Values are bytes; cast them to string and parse with a DDL schema. The batch query counts views
per page; the streaming query keeps a running count per country (complete output mode, memory sink).

    python examples/json_values.py
"""

from __future__ import annotations

from common import broker, create_topic, produce_page_views, spark_session, workdir
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

TOPIC = "page-views-json"
SCHEMA = "user_id string, page string, country string, duration_ms long, ts long"


def parsed(df):
    return df.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("v"), "timestamp").select(
        "v.*", "timestamp"
    )


def main() -> None:
    with broker(workdir("json")) as servers:
        create_topic(servers, TOPIC, 2)
        produce_page_views(servers, TOPIC, 1000)
        spark = spark_session("pylog-json")

        batch = spark.read.format("pylog").option("bootstrap.servers", servers).option("subscribe", TOPIC).load()
        print("views and average time per page (batch):")
        parsed(batch).groupBy("page").agg(
            F.count("*").alias("views"), F.round(F.avg("duration_ms") / 1000, 1).alias("avg_s")
        ).orderBy(F.desc("views")).show(truncate=False)

        stream = (
            spark.readStream.format("pylog")
            .option("bootstrap.servers", servers)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
        )
        query = (
            parsed(stream)
            .groupBy("country")
            .count()
            .writeStream.outputMode("complete")
            .format("memory")
            .queryName("views_by_country")
            .start()
        )
        query.processAllAvailable()
        produce_page_views(servers, TOPIC, 500, seed=9)
        query.processAllAvailable()
        print("views per country (streaming, after 1,500 events):")
        spark.table("views_by_country").orderBy(F.desc("count")).show()
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
