"""Stream a topic to the console: the smallest ``format("pylog")`` query.

A background thread keeps producing page views for a few seconds while the query prints each
micro-batch (key, value as text, partition, offset, timestamp); then the query stops.

    python examples/streaming_console.py            (PYLOG_BOOTSTRAP=host:port to use your broker)
"""

from __future__ import annotations

import threading
import time

from common import broker, create_topic, produce_page_views, spark_session, workdir

TOPIC = "console-demo"


def main() -> None:
    with broker(workdir("console")) as servers:
        create_topic(servers, TOPIC, 2)
        spark = spark_session("pylog-console")
        df = (
            spark.readStream.format("pylog")
            .option("bootstrap.servers", servers)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr(
                "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset", "timestamp"
            )
        )
        query = (
            df.writeStream.format("console")
            .option("truncate", "false")
            .option("numRows", "5")
            .trigger(processingTime="1 second")
            .start()
        )

        def keep_producing() -> None:
            for round_ in range(4):
                produce_page_views(servers, TOPIC, 20, seed=round_)
                time.sleep(1.0)

        producer = threading.Thread(target=keep_producing)
        producer.start()
        producer.join()
        query.processAllAvailable()
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
