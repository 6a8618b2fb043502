"""Bad options fail when the query starts (defining the DataFrame, or its first step), before
any data is read, with a message naming the option and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tests.helpers import Kafka, read, stream

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("stop_queries")]


@pytest.fixture(scope="module")
def existing(kafka: Kafka) -> str:
    name = "bad-options-topic"
    kafka.create(name, 2)
    kafka.produce(name, ["x"], partition=0)
    return name


def stream_error(spark, kafka: Kafka, chk: Path, **options: str) -> str:
    """Start a stream with ``options``; return the error text of defining, starting or running it."""
    try:
        df = stream(spark, kafka.servers, **options)
        query = df.writeStream.format("noop").option("checkpointLocation", str(chk)).start()
        query.awaitTermination(60)
        error = query.exception()
        query.stop()
    except Exception as exc:
        return str(exc)
    assert error is not None, "the query did not fail"
    return str(error)


def batch_error(spark, kafka: Kafka, **options: str) -> str:
    with pytest.raises(Exception) as err:  # noqa: PT011 - PySpark wraps the PylogOptionError
        read(spark, kafka.servers, **options).collect()
    return str(err.value)


CASES = [
    ({"subscribe": "{t}", "assign": '{{"{t}":[0]}}'}, "exactly one of assign, subscribe, subscribePattern"),
    ({}, "exactly one of assign, subscribe, subscribePattern"),
    ({"subscribe": "{t}", "startingOffset": "earliest"}, "did you mean startingOffsets"),
    ({"subscribe": "{t}", "startingOffsets": "first"}, "startingOffsets"),
    ({"subscribe": "{t}", "startingOffsets": '{{"other":{{"0":1}}}}'}, "not subscribed"),
    ({"subscribe": "{t}", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "{t}", "minPartitions": "0"}, "minPartitions"),
    ({"subscribe": "{t}", "maxRecordsPerPartition": "-5"}, "maxRecordsPerPartition"),
    ({"subscribe": "{t}", "includeHeaders": "yes"}, "includeHeaders"),
    ({"subscribe": "{t}", "isolationLevel": "serializable"}, "isolationLevel"),
    ({"subscribePattern": "(unclosed"}, "subscribePattern"),
    ({"assign": '{{"{t}":[0, 7]}}'}, "assign names partitions that do not exist"),
    ({"subscribe": "{t}", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({"subscribe": "{t}", "kafka.no.such.setting": "1"}, "no.such.setting"),
    ({"subscribe": "{t}", "startingTimestamp": "yesterday"}, "startingTimestamp"),
]


@pytest.mark.parametrize(("options", "expected"), CASES, ids=[c[1][:30] for c in CASES])
def test_bad_option_in_a_batch_read(spark, kafka: Kafka, existing: str, options: dict, expected: str) -> None:
    resolved = {k: v.format(t=existing) for k, v in options.items()}
    assert expected in batch_error(spark, kafka, **resolved)


STREAM_CASES = [
    ({"subscribe": "{t}", "endingOffsets": "latest"}, "endingOffsets"),
    ({"subscribe": "{t}", "maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "20"}, "minOffsetsPerTrigger"),
    ({"subscribe": "{t}", "maxTriggerDelay": "soon", "minOffsetsPerTrigger": "1"}, "maxTriggerDelay"),
    ({"subscribe": "{t}", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"assign": '{{"{t}":[5]}}'}, "assign names partitions that do not exist"),
    ({"subscribe": "{t}", "startingOffsets": '{{"{t}":{{"0":0}}}}'}, "does not name every partition"),
]


@pytest.mark.parametrize(("options", "expected"), STREAM_CASES, ids=[c[1][:30] for c in STREAM_CASES])
def test_bad_option_in_a_stream(
    spark, kafka: Kafka, existing: str, tmp_path: Path, options: dict, expected: str
) -> None:
    resolved = {k: v.format(t=existing) for k, v in options.items()}
    assert expected in stream_error(spark, kafka, tmp_path / "chk", **resolved)


def test_batch_only_bounds(spark, kafka: Kafka, existing: str) -> None:
    assert "not allowed in a batch query" in batch_error(spark, kafka, subscribe=existing, startingOffsets="latest")
    assert "beyond its latest offset" in batch_error(
        spark, kafka, subscribe=existing, endingOffsets=json.dumps({existing: {"0": 99, "1": -1}})
    )


def test_missing_bootstrap_servers_and_user_schema(spark, kafka: Kafka, existing: str) -> None:
    with pytest.raises(Exception, match=r"bootstrap\.servers"):
        spark.read.format("pylog").option("subscribe", existing).load()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("pylog").schema("value string").option("bootstrap.servers", kafka.servers).option(
            "subscribe", existing
        ).load().collect()


def test_unreachable_broker_fails_clearly(spark, existing: str) -> None:
    options = {"subscribe": existing, "kafka.default.api.timeout.ms": "2000", "kafka.request.timeout.ms": "1000"}
    reader = spark.read.format("pylog").option("bootstrap.servers", "127.0.0.1:1")
    with pytest.raises(Exception, match=r"127\.0\.0\.1:1"):
        reader.options(**options).load().collect()
