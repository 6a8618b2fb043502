"""Exactly-once into Delta (delta-rs engine): a streaming query stopped mid-stream and restarted
from its checkpoint, a replayed micro-batch, and the resumable offline load."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pyspark_log.delta import delta_sink, last_load, load_to_delta
from spark_tests.helpers import Kafka, batch_sizes, stream, wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


def table_keys(path: Path) -> list[tuple[str, int, int]]:
    data = DeltaTable(str(path)).to_pyarrow_table(columns=["topic", "partition", "offset"]).to_pylist()
    return [(r["topic"], r["partition"], r["offset"]) for r in data]


def assert_exactly(path: Path, expected: dict[tuple[str, int], int]) -> None:
    """The table holds offsets 0..n-1 of each (topic, partition), each exactly once."""
    keys = table_keys(path)
    assert len(keys) == len(set(keys)), "duplicates in the Delta table"
    want = {(t, p, o) for (t, p), n in expected.items() for o in range(n)}
    assert set(keys) == want


def start_to_delta(spark, kafka: Kafka, topic: str, table: Path, chk: Path, *, trigger: dict, **options: str):
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", **options)
    return (
        df.writeStream.foreachBatch(delta_sink(str(table)))
        .option("checkpointLocation", str(chk))
        .trigger(**trigger)
        .start()
    )


def test_restart_from_checkpoint_lands_every_record_once(spark, kafka: Kafka, topic: str, tmp_path: Path, caplog):
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 300)
    table, chk = tmp_path / "table", tmp_path / "chk"

    # Run 1: stopped mid-stream after a few rate-limited micro-batches.
    query = start_to_delta(
        spark, kafka, topic, table, chk, trigger={"processingTime": "200 milliseconds"}, maxOffsetsPerTrigger="60"
    )
    wait_until(lambda: len(batch_sizes(query)) >= 2, 60, "two micro-batches")
    query.stop()
    first_run = len(table_keys(table))
    assert 0 < first_run < 300

    # More data arrives while the query is down.
    kafka.produce_spread(topic, 2, 100, "late")

    # Run 2 resumes from the checkpoint and drains everything (Trigger.AvailableNow).
    query = start_to_delta(spark, kafka, topic, table, chk, trigger={"availableNow": True}, maxOffsetsPerTrigger="60")
    assert query.awaitTermination(120)
    assert_exactly(table, {(topic, 0): 200, (topic, 1): 200})

    # A crash between the Delta commit and Spark's commit log: Spark replays the last batch
    # with the same id on restart, and the sink skips it.
    commits = sorted((chk / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (chk / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    version_before = DeltaTable(str(table)).version()
    with caplog.at_level(logging.WARNING, logger="pyspark_log.delta"):
        query = start_to_delta(spark, kafka, topic, table, chk, trigger={"availableNow": True})
        assert query.awaitTermination(120)
    assert any("already in" in r.getMessage() for r in caplog.records), "the replayed batch was not skipped"
    assert DeltaTable(str(table)).version() == version_before
    assert_exactly(table, {(topic, 0): 200, (topic, 1): 200})


def test_sink_skips_a_batch_id_already_recorded(spark, tmp_path: Path) -> None:
    table = tmp_path / "table"
    sink = delta_sink(str(table), app_id="job-1")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id int, name string")
    assert sink.write(df, 0) is True
    assert sink.write(df, 0) is False  # replay of batch 0
    assert sink.write(df, 1) is True
    assert DeltaTable(str(table)).transaction_version("job-1") == 1
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 4
    assert delta_sink(str(table), app_id="job-2").write(df, 0) is True  # another app id writes


def test_offline_load_is_resumable_without_duplicates(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 50)
    table = tmp_path / "table"
    options = {"bootstrap.servers": kafka.servers, "subscribe": topic}

    first = load_to_delta(spark, options, str(table), app_id="nightly", engine="delta-rs")
    assert (first.load_number, first.rows) == (0, 50)
    assert first.end_offsets == {topic: {"0": 25, "1": 25}}
    again = load_to_delta(spark, options, str(table), app_id="nightly", engine="delta-rs")
    assert not again.loaded  # nothing new: no commit, no duplicates

    kafka.produce_spread(topic, 2, 30, "more")
    kafka.add_partitions(topic, 3)
    kafka.produce(topic, ["new-partition"], partition=2)
    second = load_to_delta(spark, options, str(table), app_id="nightly", engine="delta-rs", max_offsets_per_load=12)
    assert second.rows == 31
    assert second.load_number is not None
    assert second.load_number >= 3  # split into several commits
    assert second.start_offsets == {topic: {"0": 25, "1": 25, "2": 0}}
    assert_exactly(table, {(topic, 0): 40, (topic, 1): 40, (topic, 2): 1})

    state = last_load(None, "nightly", str(table))
    assert state is not None
    assert state.end_offsets == {topic: {"0": 40, "1": 40, "2": 1}}
    assert DeltaTable(str(table)).transaction_version("nightly") == state.load_number


def test_offline_load_with_transform_and_first_start(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    kafka.create(topic)
    kafka.produce(topic, [f'{{"n": {i}}}' for i in range(10)])
    table = tmp_path / "table"
    options = {"bootstrap.servers": kafka.servers, "subscribe": topic, "startingOffsets": f'{{"{topic}":{{"0":4}}}}'}

    def parse(df):
        return df.select(F.from_json(F.col("value").cast("string"), "n int").n.alias("n"), "offset")

    result = load_to_delta(spark, options, str(table), app_id="parsed", transform=parse)
    assert result.engine == "delta-rs"
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert sorted(r["n"] for r in rows) == list(range(4, 10))
