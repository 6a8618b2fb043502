"""What a ``format("pylog")`` stream reports in Spark's query progress (issue #32): the latest
offsets per micro-batch (``sources[].latestOffset``, through ``reportLatestOffset``) and the
offsets behind latest, Kafka's ``min/max/avgOffsetsBehindLatest``, derived from the progress by
``pyspark_log.spark.progress`` (a Python source cannot fill ``sources[].metrics``: see there)."""

from __future__ import annotations

import pytest

from pyspark_log.spark import compat
from pyspark_log.spark.progress import OffsetsBehindLatest, offsets_behind_latest
from spark_tests.helpers import Kafka, stream

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


@pytest.mark.skipif(not compat.HAS_READ_LIMITS, reason="PySpark < 4.2 has no reportLatestOffset")
def test_progress_carries_latest_offset_and_offsets_behind_latest(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 20)  # 10 records in each partition
    listener = OffsetsBehindLatest()
    spark.streams.addListener(listener)
    try:
        df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="8")
        query = (
            df.writeStream.foreachBatch(lambda batch, _id: batch.count())
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        assert query.exception() is None
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        # 20 records, at most 8 a batch: 8, 8, 4
        assert [p["numInputRows"] for p in progress] == [8, 8, 4]
        first, last = progress[0]["sources"][0], progress[-1]["sources"][0]
        assert offsets_behind_latest(first) == {
            "minOffsetsBehindLatest": "6",
            "maxOffsetsBehindLatest": "6",
            "avgOffsetsBehindLatest": "6.0",
        }
        assert offsets_behind_latest(last) == {
            "minOffsetsBehindLatest": "0",
            "maxOffsetsBehindLatest": "0",
            "avgOffsetsBehindLatest": "0.0",
        }
        latest = first["latestOffset"]
        assert latest is not None
        assert offsets_behind_latest({"latestOffset": latest, "endOffset": latest})["maxOffsetsBehindLatest"] == "0"
        assert first["metrics"] == {}  # what a Python source cannot fill (progress.py)
        # the listener saw the same progress events (delivered asynchronously: the last one is
        # there once the listener bus has caught up)
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
        assert listener.last[str(query.id)] == [offsets_behind_latest(last)]
    finally:
        spark.streams.removeListener(listener)
