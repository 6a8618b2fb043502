"""Exactly-once into Delta with both engines (``delta_sink(..., engine=...)``, ``load_to_delta``):
delta-rs (the ``deltalake`` package) and delta-spark (Delta's JVM jars, on the Spark series they
are built for: the oldest-PySpark venv that ``./dev test`` runs; on newer PySpark the
delta-spark cases skip with the reason, see ``spark_tests.jars``).

Each case writes with one engine and reads the table back with every engine the session has, so
a table written by one engine is read by the other; ``test_engines_share_one_app_transaction``
alternates engines on one table under one app id.

Delta's contract (PROTOCOL.md, "Transaction Identifiers"): a commit carrying ``txn(appId,
version)`` is applied at most once; delta-spark skips a ``txnVersion`` it holds already
(``txnAppId``/``txnVersion`` write options, and the ``spark.databricks.delta.write.txnAppId``/
``txnVersion`` session confs for MERGE), delta-rs's helper checks ``transaction_version``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pyspark_log.delta import delta_sink, last_load, load_to_delta
from pyspark_log.spark.available_now import run_available_now
from spark_tests.conftest import DELTA_SPARK_SKIP
from spark_tests.helpers import Kafka, batch_sizes, stream, wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]

OFFSET_COLUMNS = ("topic", "partition", "offset")


def readers() -> list[str]:
    return ["delta-rs"] + ([] if DELTA_SPARK_SKIP else ["delta-spark"])


def rows_of(spark, where: str, engine: str, columns: tuple[str, ...], *, name: bool = False) -> list[tuple]:
    """The table's rows (``columns``), read with ``engine``; ``name``: ``where`` is a catalog name."""
    if engine == "delta-rs":
        data = DeltaTable(where).to_pyarrow_table(columns=list(columns)).to_pylist()
        return sorted(tuple(r[c] for c in columns) for r in data)
    df = spark.table(where) if name else spark.read.format("delta").load(where)
    return sorted(tuple(r[c] for c in columns) for r in df.select(*columns).collect())


def table_version(spark, path: str) -> int:
    """The table's latest version (delta-spark's DESCRIBE HISTORY where it runs, else delta-rs)."""
    if DELTA_SPARK_SKIP:
        return DeltaTable(path).version()
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).collect()[0][0])


def assert_exactly(spark, path: str, expected: dict[tuple[str, int], int]) -> None:
    """Every reader sees offsets 0..n-1 of each (topic, partition), each exactly once."""
    want = sorted((t, p, o) for (t, p), n in expected.items() for o in range(n))
    for reader in readers():
        assert rows_of(spark, path, reader, OFFSET_COLUMNS) == want, f"read with {reader}"


def start_to_delta(spark, kafka: Kafka, topic: str, table: str, chk: Path, engine: str, *, trigger: dict, **options):
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", **options)
    sink = delta_sink(table, engine=engine)
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(chk)).trigger(**trigger).start()


def test_stream_append_exactly_once_across_restart_and_replay(
    spark, kafka: Kafka, topic: str, tmp_path: Path, delta_engine: str
) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 120)
    table, chk = str(tmp_path / "table"), tmp_path / "chk"

    # Run 1: rate-limited micro-batches, stopped mid-stream.
    query = start_to_delta(
        spark, kafka, topic, table, chk, delta_engine, trigger={"processingTime": "200 milliseconds"},
        maxOffsetsPerTrigger="40",
    )  # fmt: skip
    wait_until(lambda: len(batch_sizes(query)) >= 2 or query.exception() is not None, 90, "two micro-batches")
    assert query.exception() is None, query.exception()
    query.stop()

    # More data while the query is down; Trigger.AvailableNow resumes from the checkpoint (the
    # batch stopped mid-way first) and drains it (PySpark 4.0/4.1: a run per micro-batch).
    kafka.produce_spread(topic, 2, 40, "late")
    drain = {"trigger": {"availableNow": True}, "maxOffsetsPerTrigger": "40"}
    run_available_now(lambda: start_to_delta(spark, kafka, topic, table, chk, delta_engine, **drain), timeout_s=180)
    assert_exactly(spark, table, {(topic, 0): 80, (topic, 1): 80})

    # A crash between the Delta commit and Spark's commit log: Spark replays the last batch with
    # the same id (the same app transaction version), and it lands no second time.
    last = max((p for p in (chk / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()
    (chk / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    version_before = table_version(spark, table)
    query = start_to_delta(spark, kafka, topic, table, chk, delta_engine, trigger={"availableNow": True})
    assert query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert table_version(spark, table) == version_before
    assert_exactly(spark, table, {(topic, 0): 80, (topic, 1): 80})


def changelog(spark, rows: list[tuple[bytes, bytes | None, int]]):
    """A batch shaped like the pylog source's (key, value, partition, offset)."""
    schema = "key binary, value binary, topic string, partition int, offset long"
    return spark.createDataFrame([(k, v, "t", 0, o) for k, v, o in rows], schema)


def parse(df):
    return df.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS name", "offset")


def test_upsert_merges_inserts_updates_and_tombstones_once(spark, tmp_path: Path, delta_engine: str) -> None:
    table = str(tmp_path / "table")
    sink = delta_sink(table, mode="upsert", key_columns="id", transform=parse, app_id="cdc", engine=delta_engine)
    sink.write(changelog(spark, [(b"a", b"A1", 0), (b"b", b"B1", 1), (b"c", b"C1", 2), (b"a", b"A2", 3)]), 0)
    expected = [("a", "A2"), ("b", "B1"), ("c", "C1")]
    for reader in readers():
        assert rows_of(spark, table, reader, ("id", "name")) == expected, f"read with {reader}"

    # Batch 1 (MERGE under the app transaction): update a, delete b (tombstone), insert d, and a
    # tombstone of a key that never existed.
    batch1 = changelog(spark, [(b"a", b"A3", 4), (b"b", None, 5), (b"d", b"D1", 6), (b"z", None, 7)])
    sink.write(batch1, 1)
    expected = [("a", "A3"), ("c", "C1"), ("d", "D1")]
    version = table_version(spark, table)
    # The replay of batch 1 with other rows is skipped: the table holds version 1 of "cdc".
    sink.write(changelog(spark, [(b"c", None, 8), (b"e", b"E1", 9)]), 1)
    assert table_version(spark, table) == version
    for reader in readers():
        assert rows_of(spark, table, reader, ("id", "name")) == expected, f"read with {reader}"
    assert DeltaTable(table).transaction_version("cdc") == 1


def test_offline_load_resumes_from_the_tables_history(
    spark, kafka: Kafka, topic: str, tmp_path: Path, delta_engine: str
) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 40)
    table = str(tmp_path / "table")
    options = {"bootstrap.servers": kafka.servers, "subscribe": topic}

    first = load_to_delta(spark, options, table, app_id="nightly", engine=delta_engine)
    assert (first.load_number, first.end_offsets, first.engine) == (0, {topic: {"0": 20, "1": 20}}, delta_engine)
    assert not load_to_delta(spark, options, table, app_id="nightly", engine=delta_engine).loaded

    kafka.produce_spread(topic, 2, 20, "more")
    second = load_to_delta(spark, options, table, app_id="nightly", engine=delta_engine, max_offsets_per_load=8)
    assert second.start_offsets == {topic: {"0": 20, "1": 20}}
    assert second.load_number is not None
    assert second.load_number >= 3  # split into several commits, each with its offsets
    assert_exactly(spark, table, {(topic, 0): 30, (topic, 1): 30})
    for reader in readers():  # the resume state, read from the history by either engine
        state = last_load(spark, "nightly", table, engine=reader)  # type: ignore[arg-type]
        assert state is not None, f"read with {reader}"
        assert (state.load_number, state.end_offsets) == (second.load_number, {topic: {"0": 30, "1": 30}})
    assert DeltaTable(table).transaction_version("nightly") == second.load_number


def test_table_by_name_in_the_sessions_catalog(spark, kafka: Kafka, topic: str, delta_engine: str) -> None:
    name = "pylog_" + topic.replace("-", "_")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id int, name string")
    sink = delta_sink(table_name=name, app_id="by-name", engine=delta_engine)
    if delta_engine == "delta-rs":  # delta-rs writes by path only: the error says what to do
        with pytest.raises(ValueError, match="path="):
            sink.write(df, 0)
        return
    sink.write(df, 0)
    sink.write(df, 0)  # replayed: skipped by Delta
    sink.write(df.selectExpr("id + 10 AS id", "name"), 1)
    assert rows_of(spark, name, "delta-spark", ("id", "name"), name=True) == [(1, "a"), (2, "b"), (11, "a"), (12, "b")]

    kafka.create(topic)
    kafka.produce(topic, [f"v{i}" for i in range(5)])
    loads = f"{name}_loads"
    options = {"bootstrap.servers": kafka.servers, "subscribe": topic}
    result = load_to_delta(spark, options, table_name=loads, app_id="nightly", engine="delta-spark")
    assert result.load_number == 0
    kafka.produce(topic, ["v5"])
    again = load_to_delta(spark, options, table_name=loads, app_id="nightly", engine="delta-spark")
    assert (again.load_number, again.start_offsets) == (1, {topic: {"0": 5}})
    assert rows_of(spark, loads, "delta-spark", ("offset",), name=True) == [(o,) for o in range(6)]
    history = spark.sql(f"DESCRIBE HISTORY {loads}").select("userMetadata").collect()
    assert {json.loads(r[0])["pylog.loadNumber"] for r in history if r[0]} == {"0", "1"}


def test_engines_share_one_app_transaction(spark, tmp_path: Path, delta_engine: str) -> None:
    """Batches of one app id written alternately by the two engines: each engine sees the other's
    app transaction and skips a batch it already holds."""
    if DELTA_SPARK_SKIP:
        pytest.skip(DELTA_SPARK_SKIP[0])
    other = "delta-rs" if delta_engine == "delta-spark" else "delta-spark"
    table = str(tmp_path / "table")
    df = spark.createDataFrame([(1, "a")], "id int, name string")
    delta_sink(table, app_id="shared", engine=delta_engine).write(df, 0)
    delta_sink(table, app_id="shared", engine=other).write(df.selectExpr("2 AS id", "name"), 1)
    version = table_version(spark, table)
    delta_sink(table, app_id="shared", engine=delta_engine).write(df.selectExpr("3 AS id", "name"), 1)  # replay
    delta_sink(table, app_id="shared", engine=other).write(df.selectExpr("4 AS id", "name"), 0)  # older
    assert table_version(spark, table) == version
    for reader in readers():
        assert rows_of(spark, table, reader, ("id",)) == [(1,), (2,)], f"read with {reader}"
    assert DeltaTable(table).transaction_version("shared") == 1
