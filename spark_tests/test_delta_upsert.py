"""Changelogs into Delta (issue 13): upsert mode mirrors a keyed topic, exactly once; compacted
topics read by Spark.

Kafka documentation §4.8 "Log Compaction": a message with a key and a null payload is treated as a delete of
that key — a
tombstone deletes its key's row; every other record replaces it. The expected table is computed
here by applying the produced records in offset order, key by key.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pyspark_log.delta import delta_sink, load_to_delta
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.spark.available_now import run_available_now
from spark_tests.helpers import Kafka, batch_sizes, read, recent_ms, stream, wait_until
from tests.on_disk import disk_batches

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("stop_queries")]

Change = tuple[str, dict[str, object] | None]

# The cleaner of this module's broker looks for work every 50 ms and cleans at any dirty ratio.
CLEANER_OVERRIDES = {
    "log.retention.check.interval.ms": "200",
    "log.cleaner.backoff.ms": "50",
    "log.cleaner.min.cleanable.ratio": "0.01",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), python=sys.executable, overrides=CLEANER_OVERRIDES) as b:
        yield b


def send(kafka: Kafka, topic: str, changes: list[Change]) -> None:
    """Each change in order, keyed, one partition per key (the default partitioner); a None row
    is a tombstone."""
    futures = [
        kafka.producer.send(topic, None if row is None else json.dumps(row).encode(), key=key.encode())
        for key, row in changes
    ]
    kafka.producer.flush(30_000)
    for fut in futures:
        fut.result(30)


def apply(state: dict[str, dict[str, object]], changes: list[Change]) -> None:
    for key, row in changes:
        if row is None:
            state.pop(key, None)
        else:
            state[key] = row


def history(round_: int, keys: range, deleted: range) -> list[Change]:
    """Round ``round_``: every key of ``keys`` gets a new version, then ``deleted`` keys a tombstone."""
    changes: list[Change] = [(f"c{k}", {"name": f"customer {k}", "version": round_}) for k in keys]
    return changes + [(f"c{k}", None) for k in deleted]


def parse(df):
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    row = F.from_json(F.col("value").cast("string"), "name string, version int")
    key = F.col("key").cast("string").alias("id")
    return df.select(key, row["name"].alias("name"), row["version"].alias("version"))


def table_rows(path: Path) -> list[tuple[str, str, int]]:
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["id", "name", "version"]).to_pylist()
    return sorted((r["id"], r["name"], r["version"]) for r in rows)


def expected_rows(state: dict[str, dict[str, object]]) -> list[tuple[str, str, int]]:
    return sorted((k, str(v["name"]), int(v["version"])) for k, v in state.items())  # type: ignore[call-overload]


def start_upsert(
    spark, kafka: Kafka, topic: str, table: Path, chk: Path, *, trigger: dict, engine: str = "delta-rs", **options: str
):
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", **options)
    sink = delta_sink(str(table), mode="upsert", key_columns=["id"], transform=parse, engine=engine)  # type: ignore[arg-type]
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(chk)).trigger(**trigger).start()


def test_upsert_mirrors_a_changelog_exactly_once_across_a_restart(
    spark, kafka: Kafka, topic: str, tmp_path: Path, caplog, delta_engine: str
) -> None:
    """Either engine writes (delta-spark: SQL MERGE INTO under the session's txnAppId/txnVersion);
    the table is read back with delta-rs."""
    kafka.create(topic, 2)
    state: dict[str, dict[str, object]] = {}
    # Inserts of 30 keys, updates of 20 of them, deletes of 5: several versions of a key fall in
    # one micro-batch (maxOffsetsPerTrigger 17), where the highest offset must win.
    first = history(1, range(30), range(0)) + history(2, range(10, 30), range(25, 30))
    send(kafka, topic, first)
    apply(state, first)
    table, chk = tmp_path / "table", tmp_path / "chk"

    query = start_upsert(
        spark, kafka, topic, table, chk, trigger={"processingTime": "200 milliseconds"}, maxOffsetsPerTrigger="17",
        engine=delta_engine,
    )  # fmt: skip
    wait_until(lambda: not query.isActive or len(batch_sizes(query)) >= 2, 90, "two micro-batches")
    assert query.exception() is None, query.exception()
    query.stop()
    assert DeltaTable(str(table)).version() >= 0

    # While the query is down: updates, deletes, and keys deleted before come back.
    second = history(3, range(8), range(3, 6)) + history(4, range(25, 28), range(0))
    send(kafka, topic, second)
    apply(state, second)

    # several limited micro-batches (PySpark 4.0/4.1: one per Trigger.AvailableNow run)
    drain = {"trigger": {"availableNow": True}, "maxOffsetsPerTrigger": "17", "engine": delta_engine}
    run_available_now(lambda: start_upsert(spark, kafka, topic, table, chk, **drain), timeout_s=180)
    rows = table_rows(table)
    assert len({r[0] for r in rows}) == len(rows), "a key has two rows"
    assert rows == expected_rows(state)

    # A crash between the Delta commit and Spark's commit log: Spark replays the last batch
    # with the same id, and the sink skips it (the app transaction is in the table).
    commits = [p for p in (chk / "commits").iterdir() if p.name.isdigit()]
    last = max(commits, key=lambda p: int(p.name))
    last.unlink()
    (chk / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    version_before = DeltaTable(str(table)).version()
    with caplog.at_level(logging.WARNING, logger="pyspark_log.delta"):
        query = start_upsert(spark, kafka, topic, table, chk, trigger={"availableNow": True}, engine=delta_engine)
        assert query.awaitTermination(120)
    if delta_engine == "delta-rs":  # delta-spark skips inside Delta, silently; the version shows it
        assert any("already in" in r.getMessage() for r in caplog.records), "the replayed batch was not skipped"
    assert DeltaTable(str(table)).version() == version_before
    assert table_rows(table) == expected_rows(state)


def test_offline_upsert_load_mirrors_the_topic(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    kafka.create(topic, 2)
    state: dict[str, dict[str, object]] = {}
    first = history(1, range(12), range(0)) + history(2, range(6), range(2))
    send(kafka, topic, first)
    apply(state, first)
    table = tmp_path / "table"
    options = {"bootstrap.servers": kafka.servers, "subscribe": topic}

    def load(**extra):
        return load_to_delta(
            spark, options, str(table), app_id="mirror", mode="upsert", key_columns="id", transform=parse, **extra
        )

    result = load()
    assert result.load_number == 0
    assert table_rows(table) == expected_rows(state)
    assert not load().loaded  # nothing new: no commit

    second = [*history(3, range(8, 12), range(9, 11)), ("c0", {"name": "back", "version": 3})]
    send(kafka, topic, second)
    apply(state, second)
    result = load(max_offsets_per_load=3)
    assert result.load_number is not None
    assert result.load_number >= 2  # several loads, each merged in its own commit
    assert table_rows(table) == expected_rows(state)
    assert DeltaTable(str(table)).transaction_version("mirror") == result.load_number


def test_upsert_without_transform_keys_by_the_record_key(spark, tmp_path: Path, delta_engine: str) -> None:
    """The source's own columns, keyed by ``key``: a batch holding two versions and a tombstone
    (read back with delta-rs whichever engine wrote)."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    schema = "key binary, value binary, topic string, partition int, offset long"
    rows = [
        (b"a", b"1", "t", 0, 0), (b"b", b"1", "t", 0, 1), (b"a", b"2", "t", 0, 2), (b"b", None, "t", 0, 3),
        (None, b"no key", "t", 0, 4),
    ]  # fmt: skip
    table = tmp_path / "table"
    sink = delta_sink(str(table), mode="upsert", app_id="raw", engine=delta_engine)
    assert sink.write(spark.createDataFrame(rows, schema), 0) is True
    got = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [(b"a", b"2", 2)]
    more = spark.createDataFrame([(b"a", None, "t", 0, 5), (b"c", b"3", "t", 1, 0)], schema)
    assert sink.write(more.withColumn("partition", F.col("partition").cast("int")), 1) is True
    got = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert [(r["key"], r["value"]) for r in got] == [(b"c", b"3")]
    version = DeltaTable(str(table)).version()
    # replayed: delta-rs's helper skips it (False); delta-spark hands it to Delta, which skips it
    assert sink.write(more, 1) is (delta_engine == "delta-spark")
    assert DeltaTable(str(table)).version() == version


def test_bad_upsert_options_name_the_fix(spark, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode='upsert'"):
        delta_sink(str(tmp_path / "t"), key_columns=["id"])
    with pytest.raises(ValueError, match="append or upsert"):
        delta_sink(str(tmp_path / "t"), mode="merge")  # type: ignore[arg-type]
    sink = delta_sink(str(tmp_path / "t"), mode="upsert", key_columns=["id"], app_id="x")
    df = spark.createDataFrame([(b"a", b"1", 0, 0)], "key binary, value binary, partition int, offset long")
    with pytest.raises(ValueError, match="key_columns"):
        sink.write(df, 0)


def test_batch_read_of_a_compacted_topic_counts_the_surviving_records(
    spark, broker: EmbeddedBroker, kafka: Kafka, topic: str
) -> None:
    """§4.8 offsets never change: after the cleaner ran, a batch read sees the
    latest record of every key at its original offset and timestamp — a tombstone too, whose
    batch the clean stamped with a delete horizon (KIP-534); the gaps the cleaner left are not
    data loss (failOnDataLoss stays true)."""
    kafka.create(
        topic, 1, **{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
    )
    base_ms = recent_ms()
    latest: dict[str, tuple[int, bool, int]] = {}  # key -> (offset, is a tombstone, timestamp)
    for round_ in range(8):
        keys = [k for k in range(10) if not (k == 9 and round_ > 2)]  # k9 is deleted in round 2
        sent = []
        for k in keys:
            tombstone = k == 9 and round_ == 2
            value = None if tombstone else f"{round_}-{k}-{'x' * 60}".encode()
            ts = base_ms + round_ * 100 + k
            sent.append((k, tombstone, ts, kafka.producer.send(topic, value, key=f"k{k}".encode(), timestamp_ms=ts)))
        kafka.producer.flush(30_000)
        for k, tombstone, ts, fut in sent:
            latest[f"k{k}"] = (fut.result(30).offset, tombstone, ts)
    end = kafka.latest(topic)
    assert end == 75  # 8 rounds of 10 keys, but k9 only in rounds 0-2

    def surviving() -> int:
        return read(spark, kafka.servers, subscribe=topic).count()

    # The active segment is never cleaned, so the count never falls to the number of keys; poll
    # until the cleaner removed most overwritten records.
    wait_until(lambda: surviving() < 40, 90, "the cleaner to remove overwritten records")
    rows = read(spark, kafka.servers, subscribe=topic).select("key", "value", "offset", "timestamp").collect()
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets)
    assert len(rows) == surviving()
    by_key = {
        bytes(r["key"]).decode(): (r["offset"], r["value"] is None, round(r["timestamp"].timestamp() * 1000))
        for r in rows
    }
    assert by_key == latest  # the latest record of every key, at its original offset and timestamp
    assert offsets[-1] == end - 1
    tombstone_batches = [h for h, recs in disk_batches(broker, topic) if any(r.value is None for r in recs)]
    assert [h.has_delete_horizon for h in tombstone_batches] == [True]


def test_stream_over_a_cleaned_topic_finishes_ranges_the_cleaner_emptied(spark, kafka: Kafka, topic: str, chk) -> None:
    """Issue 13: a planned range whose records the cleaner removed is read as empty and the query
    goes on (offset gaps inside the log are not data loss); maxOffsetsPerTrigger counts offsets,
    as the connector does, so most micro-batches of the cleaned head hold few or no records."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    kafka.create(
        topic, 1, **{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
    )
    latest: dict[str, int] = {}
    for round_ in range(8):
        sent = [kafka.producer.send(topic, f"{round_}-{'y' * 60}".encode(), key=f"k{k}".encode()) for k in range(10)]
        kafka.producer.flush(30_000)
        for k, fut in enumerate(sent):
            latest[f"k{k}"] = fut.result(30).offset
    wait_until(lambda: read(spark, kafka.servers, subscribe=topic).count() < 40, 90, "the cleaner")
    surviving = read(spark, kafka.servers, subscribe=topic).count()

    rows: list = []
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    runs = run_available_now(  # PySpark 4.0/4.1: a run per micro-batch
        lambda: (
            df.select(F.col("key").cast("string").alias("key"), "offset")
            .writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
            .option("checkpointLocation", str(chk))
            .trigger(availableNow=True)
            .start()
        ),
        timeout_s=240,
    )
    offsets = [r["offset"] for r in rows]
    assert sorted(offsets) == sorted(set(offsets))
    assert len(rows) == surviving
    assert {r["key"]: r["offset"] for r in sorted(rows, key=lambda r: r["offset"])} == latest
    planned = [p["numInputRows"] for query in runs for p in query.recentProgress]
    assert len(planned) >= 80 // 5  # a batch per 5 offsets, not per 5 records
