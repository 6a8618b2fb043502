"""A nightly offline load into Delta: each run appends what arrived since the last run, once.

``pyspark_log.delta.load_to_delta`` reads ``[previous end, latest)`` with a batch query and
commits it together with the end offsets (in the Delta commit's metadata and as the table's app
transaction version), so a failed run is simply run again and a finished one is never repeated.
Schedule this script (cron, a Databricks job); here it runs three "nights" in a row.

    python examples/nightly_load.py [TABLE_PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import broker, create_topic, produce_page_views, spark_session, workdir

from pyspark_log.delta import load_to_delta

TOPIC = "orders"
APP_ID = "nightly-orders-load"  # one per (table, topic) pipeline; keep it stable


def main() -> None:
    work = workdir("nightly")
    table = Path(sys.argv[1]) if len(sys.argv) > 1 else work / "orders"
    with broker(work) as servers:
        create_topic(servers, TOPIC, 2)
        spark = spark_session("pylog-nightly")
        options = {"bootstrap.servers": servers, "subscribe": TOPIC, "includeHeaders": "true"}
        for night, new_events in enumerate((800, 0, 350), start=1):
            if new_events:
                produce_page_views(servers, TOPIC, new_events, seed=night)
            result = load_to_delta(spark, options, str(table), app_id=APP_ID, max_offsets_per_load=100_000)
            if result.loaded:
                print(f"night {night}: load {result.load_number} wrote {result.rows} rows, now at {result.end_offsets}")
            else:
                print(f"night {night}: nothing new since {result.end_offsets}")
        spark.stop()


if __name__ == "__main__":
    main()
