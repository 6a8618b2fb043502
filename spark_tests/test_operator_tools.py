"""What Spark's pylog source sees of the operator tools: DeleteRecords and aborting a hanging
transaction.

* DeleteRecords moves a partition's log start offset inside a segment; a query asked to read
  below it meets data loss as after retention (failOnDataLoss=true fails naming the partition,
  false reads from the new start), in batch queries and in a streaming query restarted from a
  checkpoint that planned deleted offsets; ``earliest`` means the new start.
* A transaction left open by a SIGKILLed producer process holds the LSO at its first record, so
  a read_committed batch query (the source's default) sees nothing written after it; once
  ``pylog transactions abort`` writes the ABORT marker the same query reads the committed records and none of the
  aborted ones.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pyspark_log.client import TopicPartition
from spark_tests.helpers import Kafka, read, stream, values_of, wait_until
from tests.killed_producer import leave_open_transaction

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


def test_delete_records_is_data_loss_below_the_new_start(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 1)
    kafka.produce(topic, [f"v{i}" for i in range(30)])
    tp = TopicPartition(topic, 0)
    assert kafka.admin.delete_records({tp: 20}) == {tp: 20}
    assert kafka.earliest(topic) == 20

    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="data loss") as err:
        read(spark, kafka.servers, subscribe=topic, startingOffsets=from_zero).collect()
    assert f"{topic}-0" in str(err.value)
    rows = read(spark, kafka.servers, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert values_of(rows) == sorted(f"v{i}" for i in range(20, 30))
    earliest = read(spark, kafka.servers, subscribe=topic).select("offset").collect()
    assert sorted(r["offset"] for r in earliest) == list(range(20, 30))


def test_a_streaming_query_whose_planned_offsets_were_deleted(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    """The checkpoint planned [10, 20) and committed only [0, 10); DeleteRecords then moves the
    start to 25: on restart failOnDataLoss=true stops the query, false goes on from 25."""
    kafka.create(topic, 1)
    kafka.produce(topic, [f"a{i}" for i in range(20)])
    chk = tmp_path / "chk"

    def run(**options: str):
        rows: list = []
        df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", **options)
        query = (
            df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
            .option("checkpointLocation", str(chk))
            .trigger(availableNow=True)
            .start()
        )
        return query, rows

    query, rows = run(maxOffsetsPerTrigger="10")
    assert query.awaitTermination(120)
    assert len(rows) == 20
    (chk / "commits" / "1").unlink()  # batch 1 ([10, 20)) will be replayed
    (chk / "commits" / ".1.crc").unlink(missing_ok=True)
    kafka.produce(topic, [f"b{i}" for i in range(10)])
    tp = TopicPartition(topic, 0)
    assert kafka.admin.delete_records({tp: 25}) == {tp: 25}

    query, rows = run()
    with pytest.raises(Exception, match="data loss"):
        query.awaitTermination(120)
    assert rows == []
    query, rows = run(failOnDataLoss="false")
    assert query.awaitTermination(120)
    assert values_of(rows) == sorted(f"b{i}" for i in range(5, 10))


def test_a_read_committed_query_passes_an_aborted_hanging_transaction(spark, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 1)
    kafka.produce(topic, ["before"])
    leave_open_transaction(kafka.servers, topic, "spark-killed", 4)
    kafka.produce(topic, ["after-0", "after-1"])

    # The open transaction starts at offset 1: read_committed stops there.
    assert values_of(read(spark, kafka.servers, subscribe=topic)) == ["before"]
    uncommitted = read(spark, kafka.servers, subscribe=topic, isolationLevel="read_uncommitted")
    assert len(values_of(uncommitted)) == 7

    tp = TopicPartition(topic, 0)
    (open_one,) = [p for p in kafka.admin.describe_producers([tp])[tp] if p.current_transaction_start_offset >= 0]
    assert open_one.current_transaction_start_offset == 1
    abort = [sys.executable, "-m", "pyspark_log.cli", "transactions", "abort", "--bootstrap-server", kafka.servers,
             "--topic", topic, "--partition", "0", "--start-offset", "1"]  # fmt: skip
    done = subprocess.run(abort, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr

    def passed() -> list[str] | None:
        values = values_of(read(spark, kafka.servers, subscribe=topic))
        return values if len(values) == 3 else None

    assert wait_until(passed, 60, "the read_committed query to pass the aborted transaction") == [
        "after-0",
        "after-1",
        "before",
    ]
