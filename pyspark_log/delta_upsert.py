"""Upsert (changelog) mode of the Delta loads: a keyed topic mirrored by a Delta table (issue 13).

A changelog topic (a compacted topic, a CDC stream) says with each record "the row of key k is
now v", and with a tombstone, a record whose value is null, "the row of key k is gone" (Kafka documentation
§4.8 "Log Compaction": a message with a key and a null payload is treated as a delete of that key). Upsert mode
applies each micro-batch (or offline load) to a Delta table with one MERGE:

1. ``changes`` (Spark, lazy) keeps the latest record of each record key in the batch: the
   highest offset. Kafka's keyed partitioning puts a key in one partition, where offsets order
   its records; should a key appear in several partitions of one batch, the highest
   ``(offset, partition)`` wins. Records without a key address no row and are dropped
   (a compacted topic refuses them anyway, KIP-467).
2. ``transform`` maps the surviving records to the table's columns (parse the value). It is
   applied to the upserts, and to the tombstones of which only ``key_columns`` are kept — so
   the key columns must be computed from the record ``key`` (a tombstone has nothing else), and
   ``transform`` must not drop rows whose value is null. A ``_pylog_op`` column says
   ``upsert`` or ``delete``; it is not written.
3. One MERGE on ``key_columns`` (equality; changes whose key columns hold a null are dropped, as
   they could never match a row): matched deletes delete the row, matched upserts update every
   column, unmatched upserts are inserted, unmatched deletes do nothing. A batch that finds no
   table creates it from its upserts.

Exactly once, as in append mode: the MERGE's commit also records the app transaction
``(app_id, n)``, and a batch whose ``n`` the table already holds is skipped.

* **delta-rs** (``deltalake``): ``DeltaTable.merge(...)`` with ``CommitProperties(app_transactions
  =[Transaction(app_id, n)], custom_metadata=...)``; the caller checks
  ``transaction_version(app_id)`` first (delta-rs does not skip by itself).
* **delta-spark** (Delta's jars on the classpath): SQL ``MERGE INTO`` with the session confs
  ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` (Delta ≥ 2.3 applies them to MERGE
  and skips a version already committed) and ``spark.databricks.delta.commitInfo.userMetadata``;
  set around the one statement and restored after. Tested with delta-spark 4.0.1 on PySpark
  4.0 (``spark_tests/test_delta_engines.py`` in the oldest-PySpark venv).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

OP_COLUMN = "_pylog_op"
UPSERT = "upsert"
DELETE = "delete"
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@dataclass(frozen=True, slots=True)
class UpsertSpec:
    """How records become rows: ``key_columns`` identify a row of the table; ``transform`` maps
    the source's columns to the table's (None: the source's columns as they are, keyed by
    ``key``)."""

    key_columns: tuple[str, ...]
    transform: Callable[[DataFrame], DataFrame] | None

    @staticmethod
    def of(key_columns: Sequence[str] | str | None, transform: Callable[[DataFrame], DataFrame] | None) -> UpsertSpec:
        cols = (key_columns,) if isinstance(key_columns, str) else tuple(key_columns or ())
        if not cols:
            raise ValueError("upsert mode needs key_columns: the table columns that identify a row, e.g. ['key']")
        if OP_COLUMN in cols:
            raise ValueError(f"{OP_COLUMN} is the upsert mode's own column; choose other key_columns")
        return UpsertSpec(cols, transform)


def changes(df: DataFrame, spec: UpsertSpec) -> DataFrame:
    """The batch's net changes: one row per record key, the latest record's, as the table's
    columns plus ``_pylog_op`` (module docstring, steps 1-2). Lazy."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    missing = [c for c in ("key", "value", "partition", "offset") if c not in df.columns]
    if missing:
        raise ValueError(
            f"upsert mode reads the pylog source's columns and lacks {missing}: give the source DataFrame "
            "itself and put the parsing into transform="
        )
    latest = Window.partitionBy("key").orderBy(F.col("offset").desc(), F.col("partition").desc())
    deduped = (
        df.where(F.col("key").isNotNull())
        .withColumn("_pylog_rank", F.row_number().over(latest))
        .where(F.col("_pylog_rank") == 1)
        .drop("_pylog_rank")
    )
    shape = spec.transform or (lambda frame: frame)
    upserts = shape(deduped.where(F.col("value").isNotNull()))
    deletes = shape(deduped.where(F.col("value").isNull()))
    absent = [c for c in spec.key_columns if c not in upserts.columns]
    if absent:
        raise ValueError(
            f"key_columns {absent} are not columns of the transformed batch ({upserts.columns}): "
            "make transform keep them, or name the right key_columns"
        )
    deletes = deletes.select(*spec.key_columns).withColumn(OP_COLUMN, F.lit(DELETE))
    merged = upserts.withColumn(OP_COLUMN, F.lit(UPSERT)).unionByName(deletes, allowMissingColumns=True)
    return merged.dropna(how="any", subset=list(spec.key_columns))


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def match_predicate(key_columns: Sequence[str], target: str = "t", source: str = "s") -> str:
    """``t.`k1` = s.`k1` AND ...``: a row matches a change of the same key."""
    return " AND ".join(f"{target}.{_quote(c)} = {source}.{_quote(c)}" for c in key_columns)


# ---------------------------------------------------------------------------------------------
# delta-rs


def rs_merge(  # noqa: PLR0917 - internal, called from delta.py
    path: str,
    storage_options: Mapping[str, str] | None,
    partition_by: Sequence[str],
    data: pa.Table,
    spec: UpsertSpec,
    app_id: str,
    version: int,
    metadata: Mapping[str, str],
) -> dict[str, int]:
    """Apply ``data`` (``changes`` as Arrow) to the table at ``path`` in one commit recording the
    app transaction ``(app_id, version)``. Returns row counts (inserted/updated/deleted)."""
    import pyarrow.compute as pc
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    commit = CommitProperties(custom_metadata=dict(metadata), app_transactions=[Transaction(app_id, version)])
    options = dict(storage_options) if storage_options else None
    if not DeltaTable.is_deltatable(path, storage_options=options):
        # No table yet: create it from the upserts (deletes of rows that never existed do nothing).
        rows = data.filter(pc.equal(data[OP_COLUMN], UPSERT)).drop_columns([OP_COLUMN])
        write_deltalake(
            path, rows, mode="append", partition_by=list(partition_by) or None, storage_options=options,
            commit_properties=commit,
        )  # fmt: skip
        return {"inserted": rows.num_rows, "updated": 0, "deleted": 0}
    table = DeltaTable(path, storage_options=options)
    is_delete, is_upsert = f"s.{OP_COLUMN} = '{DELETE}'", f"s.{OP_COLUMN} = '{UPSERT}'"
    stats = (
        table.merge(
            data, match_predicate(spec.key_columns), source_alias="s", target_alias="t", commit_properties=commit
        )
        .when_matched_delete(is_delete)
        .when_matched_update_all(is_upsert, except_cols=[OP_COLUMN])
        .when_not_matched_insert_all(is_upsert, except_cols=[OP_COLUMN])
        .execute()
    )
    return {
        "inserted": int(stats.get("num_target_rows_inserted", 0)),
        "updated": int(stats.get("num_target_rows_updated", 0)),
        "deleted": int(stats.get("num_target_rows_deleted", 0)),
    }


# ---------------------------------------------------------------------------------------------
# delta-spark


def spark_merge(
    table_sql: str,
    create: Callable[[DataFrame], None],
    exists: bool,
    data: DataFrame,
    spec: UpsertSpec,
    *,
    app_id: str,
    version: int,
    user_metadata: str | None,
) -> None:
    """Apply ``data`` (``changes``) with Delta's SQL MERGE to ``table_sql`` (``delta.`path``` or
    a catalog name), idempotent by the session's txnAppId/txnVersion confs. ``create(df)``
    writes the first batch's upserts when the table does not ``exists`` (with the txn options)."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    if not exists:
        create(data.where(F.col(OP_COLUMN) == UPSERT).drop(OP_COLUMN))
        return
    session = data.sparkSession
    view = f"pylog_changes_{uuid.uuid4().hex[:12]}"
    columns = [c for c in data.columns if c != OP_COLUMN]
    assign = ", ".join(f"t.{_quote(c)} = s.{_quote(c)}" for c in columns)
    names = ", ".join(_quote(c) for c in columns)
    values = ", ".join(f"s.{_quote(c)}" for c in columns)
    on = match_predicate(spec.key_columns)
    statement = " ".join(
        (
            f"MERGE INTO {table_sql} AS t USING {view} AS s ON {on}",
            f"WHEN MATCHED AND s.{OP_COLUMN} = '{DELETE}' THEN DELETE",
            f"WHEN MATCHED AND s.{OP_COLUMN} = '{UPSERT}' THEN UPDATE SET {assign}",
            f"WHEN NOT MATCHED AND s.{OP_COLUMN} = '{UPSERT}' THEN INSERT ({names}) VALUES ({values})",  # noqa: S608 - quoted names; data via the view
        )
    )
    confs = {_TXN_APP_ID: app_id, _TXN_VERSION: str(version)}
    if user_metadata is not None:
        confs[USER_METADATA_CONF] = user_metadata
    data.createOrReplaceTempView(view)
    try:
        with session_confs(session, confs):
            session.sql(statement)
    finally:
        session.catalog.dropTempView(view)


@contextmanager
def session_confs(session: Any, confs: Mapping[str, str]) -> Iterator[None]:
    """Set ``confs`` on the session for the statements inside, restoring what was there."""
    saved: dict[str, Any] = {key: session.conf.get(key, None) for key in confs}
    try:
        for key, value in confs.items():
            session.conf.set(key, value)
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, old)
