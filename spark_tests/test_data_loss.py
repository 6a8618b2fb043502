"""failOnDataLoss, both ways, after retention deleted records a query had planned to read.

The topic has small segments; retention is switched on (``retention.ms=100``) once the query has
checkpointed a plan, and off again once everything older is deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyspark_log.client import AlterConfigOp, AlterOp, ConfigResource, ResourceType
from spark_tests.helpers import Kafka, read, stream, values_of, wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


def run(spark, kafka: Kafka, topic: str, chk: Path, **options: str):
    """Trigger.AvailableNow into a list; returns (query, rows) once it ended (or failed)."""
    rows: list = []
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", **options)
    query = (
        df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
        .option("checkpointLocation", str(chk))
        .trigger(availableNow=True)
        .start()
    )
    return query, rows


def set_retention(kafka: Kafka, topic: str, value: str | None) -> None:
    op = AlterConfigOp("retention.ms", value, AlterOp.SET if value is not None else AlterOp.DELETE)
    kafka.admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, topic): [op]})


@pytest.fixture
def lossy_topic(spark, kafka: Kafka, topic: str, tmp_path: Path) -> tuple[str, Path]:
    """A topic whose offsets 0..69 are deleted by retention after a query planned [15, 30) and
    committed only [0, 15); offsets 70..79 remain. Returns (topic, checkpoint)."""
    chk = tmp_path / "chk"
    kafka.create(topic, 1, **{"segment.bytes": "1000"})
    kafka.produce(topic, [f"a{i}" for i in range(30)], batch=False)
    query, rows = run(spark, kafka, topic, chk, maxOffsetsPerTrigger="15")
    assert query.awaitTermination(120)
    assert len(rows) == 30
    # Forget that batch 1 ([15, 30)) was committed: Spark will replay it on restart.
    (chk / "commits" / "1").unlink()
    (chk / "commits" / ".1.crc").unlink(missing_ok=True)

    kafka.produce(topic, [f"b{i}" for i in range(40)], batch=False)
    set_retention(kafka, topic, "100")
    wait_until(lambda: kafka.earliest(topic) == 70, 30, "retention to delete offsets 0..69")
    set_retention(kafka, topic, None)
    kafka.produce(topic, [f"c{i}" for i in range(10)])
    return topic, chk


def test_fail_on_data_loss_true_stops_the_query(spark, kafka: Kafka, lossy_topic) -> None:
    topic, chk = lossy_topic
    query, rows = run(spark, kafka, topic, chk)
    with pytest.raises(Exception, match="data loss") as err:
        query.awaitTermination(120)
    text = str(err.value)
    assert "failOnDataLoss=false" in text
    assert f"{topic}-0" in text
    assert rows == []


def test_fail_on_data_loss_false_skips_to_the_earliest_offset(spark, kafka: Kafka, lossy_topic, caplog) -> None:
    topic, chk = lossy_topic
    query, rows = run(spark, kafka, topic, chk, failOnDataLoss="false")
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert values_of(rows) == sorted(f"c{i}" for i in range(10))
    # The same checkpoint goes on from 80.
    kafka.produce(topic, ["d0"])
    query, rows = run(spark, kafka, topic, chk, failOnDataLoss="false")
    assert query.awaitTermination(120)
    assert values_of(rows) == ["d0"]


def test_batch_read_below_the_log_start(spark, kafka: Kafka, lossy_topic) -> None:
    topic, _ = lossy_topic
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="data loss"):
        read(spark, kafka.servers, subscribe=topic, startingOffsets=from_zero).collect()
    rows = read(spark, kafka.servers, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert values_of(rows) == sorted(f"c{i}" for i in range(10))
    assert read(spark, kafka.servers, subscribe=topic).count() == 10  # earliest is the log start
