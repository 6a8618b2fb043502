"""Exactly-once loads of ``format("pylog")`` data into Delta tables: streaming and offline.

Two engines, one behaviour:

* **delta-spark** (Delta's JVM jars on Spark's classpath, e.g. Databricks): the micro-batch is
  written with ``df.write.format("delta").option("txnAppId", app_id).option("txnVersion", n)``;
  Delta itself skips an ``(app_id, n)`` it has already committed.
* **delta-rs** (the ``deltalake`` package; everywhere else): the micro-batch becomes Arrow
  (``df.toArrow()``), and is appended with ``write_deltalake(..., commit_properties=
  CommitProperties(app_transactions=[Transaction(app_id, n)]))``, which records ``n`` in the
  table's log in the same atomic commit as the data. delta-rs does not skip duplicates itself,
  so the helper reads ``DeltaTable.transaction_version(app_id)`` first and skips ``n <=`` it.

``engine="auto"`` picks delta-spark when Delta's classes load in Spark's JVM (or on Databricks),
detected without importing delta-spark's Python package, and delta-rs otherwise.

Streaming (``foreachBatch``)::

    query = (df.writeStream
               .foreachBatch(delta_sink("/data/events"))          # app_id: the query's id
               .option("checkpointLocation", "/chk/events")
               .start())

Spark replays the last micro-batch after a crash between the table commit and the checkpoint
commit; the replay carries the same batch id and is skipped, so every record lands once. The
``app_id`` defaults to the streaming query's id, which lives in the checkpoint: a new
checkpoint gets a new id (as Delta requires), a restart keeps it. Give ``app_id`` explicitly to
keep writing the same table from a *new* checkpoint only if you know the batch ids go on
increasing; otherwise its batches are skipped as already written (the helper logs each skip).

Offline (a nightly job; ``load_to_delta``): each run reads ``[previous end, latest)`` with a batch
query and appends it in one Delta commit that also records, atomically,

* the app transaction ``(app_id, load_number)``, and
* the commit metadata ``pylog.appId`` / ``pylog.loadNumber`` / ``pylog.endOffsets`` (the
  ``{"topic": {"partition": next_offset}}`` JSON the load read up to): delta-rs
  ``custom_metadata``, delta-spark ``userMetadata``.

The next run reads them back from the table's history, so there is no state beside the table to
keep in step: a run that dies before its commit leaves nothing and is repeated whole; a run
that commits is never repeated. Run one loader per ``app_id`` at a time.

Upsert (changelog) mode, ``mode="upsert"`` of ``delta_sink`` and ``load_to_delta``: instead of
appending every record, the batch is applied to the table by key with one MERGE — the latest
record of each key in the batch (by offset) updates or inserts its row, a tombstone (null value)
deletes it — so the table mirrors a compacted or CDC topic. Exactly once by the same app
transaction; see ``pyspark_log.delta_upsert``::

    query = (df.writeStream
               .foreachBatch(delta_sink("/data/customers", mode="upsert", key_columns=["id"],
                                        transform=parse_customers))
               .option("checkpointLocation", "/chk/customers")
               .start())
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyspark_log.delta_upsert import USER_METADATA_CONF, UpsertSpec, changes, rs_merge, session_confs, spark_merge

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pyspark_log.client.types import TopicPartition

__all__ = [
    "DeltaBatchWriter",
    "Engine",
    "LoadResult",
    "LoadState",
    "Mode",
    "choose_engine",
    "delta_sink",
    "delta_spark_available",
    "last_load",
    "load_to_delta",
]

log = logging.getLogger(__name__)

Engine = Literal["auto", "delta-spark", "delta-rs"]
Mode = Literal["append", "upsert"]
META_APP_ID = "pylog.appId"
META_LOAD_NUMBER = "pylog.loadNumber"
META_END_OFFSETS = "pylog.endOffsets"
USER_METADATA = "userMetadata"  # commitInfo.userMetadata (Delta PROTOCOL.md, "Commit Provenance Information")
_DELTA_CLASS = "org.apache.spark.sql.delta.DeltaLog"
# How delta-spark says a path holds no table (DESCRIBE DETAIL / HISTORY on it).
_NO_TABLE = ("not a Delta table", "DELTA_MISSING_DELTA_TABLE", "DELTA_PATH_DOES_NOT_EXIST", "PATH_NOT_FOUND")


# ---------------------------------------------------------------------------------------------
# Engine choice


def is_spark_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM access)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def delta_spark_available(spark: SparkSession) -> bool:
    """Whether Delta's JVM classes are on ``spark``'s classpath (no delta-spark Python import)."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    if not is_spark_connect(spark):  # Spark Connect has no JVM access: the conf decides
        try:
            jvm = getattr(spark, "_jvm", None)
            if jvm is not None:
                return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(_DELTA_CLASS))
        except Exception as exc:  # noqa: BLE001 - fall back to the conf
            log.debug("pylog: no JVM access to look for Delta (%s); checking spark.sql.extensions", exc)
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # noqa: BLE001 - a conf lookup must not decide the engine by crashing
        return False
    return "io.delta.sql.DeltaSparkSessionExtension" in extensions


def choose_engine(spark: SparkSession, engine: Engine) -> Literal["delta-spark", "delta-rs"]:
    if engine == "auto":
        return "delta-spark" if delta_spark_available(spark) else "delta-rs"
    if engine not in ("delta-spark", "delta-rs"):
        raise ValueError(f"engine must be auto, delta-spark or delta-rs, not {engine!r}")
    return engine


# ---------------------------------------------------------------------------------------------
# Table target


@dataclass(frozen=True, slots=True)
class _Target:
    """A Delta table by path/URI, or (delta-spark only) by catalog name."""

    path: str | None
    table_name: str | None
    partition_by: tuple[str, ...]
    storage_options: Mapping[str, str] | None
    schema_mode: Literal["merge", "overwrite"] | None

    @staticmethod
    def of(
        path: str | os.PathLike[str] | None,
        table_name: str | None,
        partition_by: Sequence[str] | str | None,
        storage_options: Mapping[str, str] | None,
        schema_mode: Literal["merge", "overwrite"] | None,
    ) -> _Target:
        if (path is None) == (table_name is None):
            raise ValueError("give exactly one of path (a Delta table path or URI) and table_name (a catalog table)")
        cols = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by or ())
        return _Target(None if path is None else os.fspath(path), table_name, cols, storage_options, schema_mode)

    def describe(self) -> str:
        return self.path if self.path is not None else f"table {self.table_name}"

    def need_path(self) -> str:
        if self.path is None:
            raise ValueError(
                f"the delta-rs engine writes tables by path; {self.table_name!r} is a catalog name: give path=, "
                "or run where Delta is on Spark's classpath (engine='delta-spark')"
            )
        return self.path

    # -- delta-rs ------------------------------------------------------------------------------

    def rs_table(self) -> Any | None:
        from deltalake import DeltaTable

        path = self.need_path()
        if not DeltaTable.is_deltatable(path, storage_options=dict(self.storage_options or {})):
            return None
        return DeltaTable(path, storage_options=dict(self.storage_options or {}))

    def rs_append(self, data: pa.Table, app_id: str, version: int, metadata: Mapping[str, str]) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        write_deltalake(
            self.need_path(),
            _utc_timestamps(data),
            mode="append",
            partition_by=list(self.partition_by) or None,
            schema_mode=self.schema_mode,
            storage_options=dict(self.storage_options) if self.storage_options else None,
            commit_properties=CommitProperties(
                custom_metadata=dict(metadata), app_transactions=[Transaction(app_id, version)]
            ),
        )

    # -- delta-spark ---------------------------------------------------------------------------

    def spark_append(self, df: DataFrame, app_id: str, version: int, user_metadata: str | None) -> None:
        writer = df.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", version)
        if user_metadata is not None:
            writer = writer.option("userMetadata", user_metadata)
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.schema_mode == "merge":
            writer = writer.option("mergeSchema", "true")
        elif self.schema_mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        for key, value in (self.storage_options or {}).items():
            writer = writer.option(key, value)
        # userMetadata also as the session conf: Delta 4.0 drops the write option when
        # saveAsTable creates the table (its first commit would then lack the load's offsets)
        confs = {} if user_metadata is None else {USER_METADATA_CONF: user_metadata}
        with session_confs(df.sparkSession, confs):
            if self.path is not None:
                writer.save(self.path)
            else:
                assert self.table_name is not None
                writer.saveAsTable(self.table_name)

    def spark_exists(self, spark: SparkSession) -> bool:
        """Whether the table exists (delta-spark; no delta-spark Python import)."""
        if self.table_name is not None:
            return bool(spark.catalog.tableExists(self.table_name))
        try:
            spark.sql(f"DESCRIBE DETAIL {self.spark_history_name()}").collect()
        except Exception as exc:
            text = str(exc)
            if any(sign in text for sign in _NO_TABLE):
                return False
            raise
        return True

    def rs_upsert(
        self, data: pa.Table, spec: UpsertSpec, app_id: str, version: int, metadata: Mapping[str, str]
    ) -> dict[str, int]:
        return rs_merge(
            self.need_path(), self.storage_options, self.partition_by, _utc_timestamps(data), spec, app_id, version,
            metadata,
        )  # fmt: skip

    def spark_upsert(
        self, changed: DataFrame, spec: UpsertSpec, app_id: str, version: int, user_metadata: str | None
    ) -> None:
        spark_merge(
            self.spark_history_name(),
            lambda rows: self.spark_append(rows, app_id, version, user_metadata),
            self.spark_exists(changed.sparkSession),
            changed,
            spec,
            app_id=app_id,
            version=version,
            user_metadata=user_metadata,
        )

    def spark_history_name(self) -> str:
        if self.path is not None:
            return "delta.`" + self.path.replace("`", "``") + "`"
        assert self.table_name is not None
        return self.table_name


def _utc_timestamps(data: pa.Table) -> pa.Table:
    """Delta stores instants in UTC: relabel zoned timestamp columns as UTC (same instants)."""
    import pyarrow as pa

    fields = []
    changed = False
    for f in data.schema:
        if pa.types.is_timestamp(f.type) and f.type.tz not in (None, "UTC"):
            fields.append(f.with_type(pa.timestamp(f.type.unit, tz="UTC")))
            changed = True
        else:
            fields.append(f)
    return data.cast(pa.schema(fields, metadata=data.schema.metadata)) if changed else data


# ---------------------------------------------------------------------------------------------
# Streaming: foreachBatch


class DeltaBatchWriter:
    """A ``foreachBatch`` function applying each micro-batch to a Delta table exactly once:
    appended, or (``upsert`` given) merged by key as a changelog.

    Build it with ``delta_sink``. Calling it returns nothing (as ``foreachBatch`` expects);
    ``write(df, batch_id)`` does the same and returns whether the batch was written (False:
    it was recorded already, or it was empty). With delta-spark it returns True once the batch
    is handed to Delta, which itself skips a ``txnVersion`` the table holds.
    """

    def __init__(
        self,
        target: _Target,
        *,
        app_id: str | None,
        engine: Engine,
        on_written: Callable[[int, int | None], None] | None = None,
        upsert: UpsertSpec | None = None,
        transform: Callable[[DataFrame], DataFrame] | None = None,
    ) -> None:
        """``upsert``: merge by key (its transform applies); ``transform``: append mode's."""
        self._target = target
        self._app_id = app_id
        self._engine = engine
        self._on_written = on_written
        self._upsert = upsert
        self._transform = transform
        self._chosen: Literal["delta-spark", "delta-rs"] | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.write(df, batch_id)

    def app_id_for(self, df: DataFrame) -> str:
        """The app id given to ``delta_sink``, else the streaming query's id (classic Spark sets it
        as a local property of the SparkContext). Spark Connect has no SparkContext and shows
        ``foreachBatch`` no query id: there the app id must be given."""
        if self._app_id is not None:
            return self._app_id
        session = df.sparkSession
        if is_spark_connect(session):
            raise ValueError(
                "delta_sink needs app_id under Spark Connect (Databricks serverless and standard access mode): "
                "foreachBatch is not told the streaming query id there. Pass "
                "delta_sink(..., app_id='<a name unique to this checkpoint>') and keep it with the checkpoint"
            )
        query_id = session.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            raise ValueError(
                "delta_sink needs app_id here (the streaming query id is not available): pass "
                "delta_sink(..., app_id='<a name unique to this checkpoint>')"
            )
        return str(query_id)

    def write(self, df: DataFrame, batch_id: int) -> bool:
        app_id = self.app_id_for(df)
        if self._chosen is None:
            self._chosen = choose_engine(df.sparkSession, self._engine)
            log.info("pylog: writing micro-batches to %s with %s", self._target.describe(), self._chosen)
        if self._upsert is None and self._transform is not None:
            df = self._transform(df)
        if self._chosen == "delta-spark":
            if self._upsert is not None:
                self._target.spark_upsert(changes(df, self._upsert), self._upsert, app_id, batch_id, None)
            else:
                self._target.spark_append(df, app_id, batch_id, None)
            if self._on_written is not None:
                self._on_written(batch_id, None)
            return True
        table = self._target.rs_table()
        recorded = None if table is None else table.transaction_version(app_id)
        if recorded is not None and batch_id <= recorded:
            log.warning(
                "pylog: micro-batch %d is already in %s (app_id %r has version %d): skipped. If this is a new "
                "checkpoint reusing an old app_id, give it a new app_id",
                batch_id,
                self._target.describe(),
                app_id,
                recorded,
            )
            return False
        data = (df if self._upsert is None else changes(df, self._upsert)).toArrow()
        if data.num_rows == 0:
            return False
        if self._upsert is not None:
            counts = self._target.rs_upsert(data, self._upsert, app_id, batch_id, {META_APP_ID: app_id})
            log.info("pylog: micro-batch %d merged into %s: %s", batch_id, self._target.describe(), counts)
        else:
            self._target.rs_append(data, app_id, batch_id, {META_APP_ID: app_id})
        if self._on_written is not None:
            self._on_written(batch_id, data.num_rows)
        return True


def delta_sink(
    path: str | os.PathLike[str] | None = None,
    *,
    table_name: str | None = None,
    app_id: str | None = None,
    engine: Engine = "auto",
    partition_by: Sequence[str] | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    schema_mode: Literal["merge", "overwrite"] | None = None,
    on_written: Callable[[int, int | None], None] | None = None,
    mode: Mode = "append",
    key_columns: Sequence[str] | str | None = None,
    transform: Callable[[DataFrame], DataFrame] | None = None,
) -> DeltaBatchWriter:
    """The ``foreachBatch`` function for an exactly-once append to the Delta table at ``path``
    (or the catalog table ``table_name``, delta-spark only). See the module docstring.

    ``mode="upsert"`` merges each batch by ``key_columns`` instead (default ``["key"]``; the
    stream must be the pylog source's DataFrame, ``transform`` shapes its rows; see
    ``pyspark_log.delta_upsert``). ``transform`` in append mode maps each batch before it is
    written. ``on_written(batch_id, rows)`` is called after each batch is committed (rows is
    None with delta-spark; in upsert mode, the rows of net changes)."""
    target = _Target.of(path, table_name, partition_by, storage_options, schema_mode)
    upsert = _upsert_spec(mode, key_columns, transform)
    return DeltaBatchWriter(
        target, app_id=app_id, engine=engine, on_written=on_written, upsert=upsert,
        transform=transform if upsert is None else None,
    )  # fmt: skip


def _upsert_spec(
    mode: Mode, key_columns: Sequence[str] | str | None, transform: Callable[[DataFrame], DataFrame] | None
) -> UpsertSpec | None:
    if mode == "upsert":
        return UpsertSpec.of(key_columns if key_columns is not None else ("key",), transform)
    if mode != "append":
        raise ValueError(f"mode must be append or upsert, not {mode!r}")
    if key_columns is not None:
        raise ValueError("key_columns applies to mode='upsert' only: add mode='upsert' or remove key_columns")
    return None


# ---------------------------------------------------------------------------------------------
# Offline loads


@dataclass(frozen=True, slots=True)
class LoadState:
    """What the last committed load of ``app_id`` recorded in the table."""

    load_number: int
    end_offsets: dict[str, dict[str, int]]
    table_version: int


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One ``load_to_delta`` run: the load number committed (None: nothing new to load), the
    offsets read ``[start, end)``, rows written (None when the engine does not say)."""

    load_number: int | None
    start_offsets: dict[str, dict[str, int]]
    end_offsets: dict[str, dict[str, int]]
    rows: int | None
    engine: str

    @property
    def loaded(self) -> bool:
        return self.load_number is not None


def _rs_metadata(meta: Mapping[str, str]) -> dict[str, str]:
    """delta-rs commit metadata: the keys themselves, and the same JSON as the commit's
    ``userMetadata`` (the field delta-spark writes and shows in DESCRIBE HISTORY), so either
    engine finds the load state of a table the other wrote."""
    return {**meta, USER_METADATA: json.dumps(dict(meta))}


def _state_from(meta: Mapping[str, Any], app_id: str, version: int) -> LoadState | None:
    if META_APP_ID not in meta and isinstance(meta.get(USER_METADATA), str):  # a delta-spark commit
        try:
            meta = json.loads(meta[USER_METADATA])
        except json.JSONDecodeError:
            return None
        if not isinstance(meta, dict):
            return None
    if meta.get(META_APP_ID) != app_id or META_LOAD_NUMBER not in meta or META_END_OFFSETS not in meta:
        return None
    offsets = meta[META_END_OFFSETS]
    parsed = json.loads(offsets) if isinstance(offsets, str) else offsets
    return LoadState(int(meta[META_LOAD_NUMBER]), parsed, version)


def last_load(
    spark: SparkSession | None,
    app_id: str,
    path: str | os.PathLike[str] | None = None,
    *,
    table_name: str | None = None,
    engine: Engine = "auto",
    storage_options: Mapping[str, str] | None = None,
) -> LoadState | None:
    """The last load ``app_id`` committed to the table (None: none, or no table yet)."""
    target = _Target.of(path, table_name, None, storage_options, None)
    if spark is None:  # no session: only delta-rs can read the table
        return _last_load_rs(target, app_id)
    if choose_engine(spark, engine) == "delta-rs":
        return _last_load_rs(target, app_id)
    return _last_load_spark(spark, target, app_id)


def _last_load_rs(target: _Target, app_id: str) -> LoadState | None:
    table = target.rs_table()
    if table is None:
        return None
    recorded = table.transaction_version(app_id)
    if recorded is None:
        return None
    for commit in table.history():
        state = _state_from(commit, app_id, int(commit.get("version", -1)))
        if state is not None:
            if state.load_number != recorded:
                break
            return state
    raise RuntimeError(
        f"{target.describe()} records load {recorded} of {app_id!r} but its commit (with the offsets) is no "
        "longer in the table's history (log retention?): start a new app_id with explicit startingOffsets"
    )


def _last_load_spark(spark: SparkSession, target: _Target, app_id: str) -> LoadState | None:
    try:
        rows = spark.sql(f"DESCRIBE HISTORY {target.spark_history_name()}").select("version", "userMetadata").collect()
    except Exception as exc:
        text = str(exc)
        if any(sign in text for sign in (*_NO_TABLE, "TABLE_OR_VIEW_NOT_FOUND")):
            return None
        raise
    best: LoadState | None = None
    for row in rows:
        if not row["userMetadata"]:
            continue
        try:
            meta = json.loads(row["userMetadata"])
        except json.JSONDecodeError:
            continue
        state = _state_from(meta, app_id, int(row["version"])) if isinstance(meta, dict) else None
        if state is not None and (best is None or state.load_number > best.load_number):
            best = state
    return best


def load_to_delta(
    spark: SparkSession,
    options: Mapping[str, str],
    path: str | os.PathLike[str] | None = None,
    *,
    app_id: str,
    table_name: str | None = None,
    engine: Engine = "auto",
    partition_by: Sequence[str] | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    schema_mode: Literal["merge", "overwrite"] | None = None,
    transform: Callable[[DataFrame], DataFrame] | None = None,
    max_offsets_per_load: int | None = None,
    mode: Mode = "append",
    key_columns: Sequence[str] | str | None = None,
) -> LoadResult:
    """Load everything new in the ``pylog`` source described by ``options`` into a Delta table,
    exactly once across runs (see the module docstring).

    ``options`` are the source's options (``bootstrap.servers``, ``subscribe`` …). The first
    run starts at ``startingOffsets`` / ``startingTimestamp`` … (default earliest); later runs
    start where the previous load ended (partitions that appeared since start at earliest). Every
    run ends at ``endingOffsets`` / ``endingTimestamp`` … (default: the latest offsets when the
    run starts). ``transform`` maps the source DataFrame to what is written (parse JSON, select
    columns). ``failOnDataLoss`` applies as in any batch read.

    ``max_offsets_per_load`` splits a large backlog into several loads (each its own commit with
    its own offsets, shared over partitions as maxOffsetsPerTrigger is), bounding what one
    commit holds in memory: the delta-rs engine collects each load on the driver as Arrow.
    The result's ``load_number`` is the last one committed.

    ``mode="upsert"`` merges each load into the table by ``key_columns`` (default ``["key"]``)
    instead of appending: the latest record per key wins, tombstones delete (see
    ``pyspark_log.delta_upsert``); ``transform`` then shapes the records' rows. ``rows`` counts
    the net changes applied.
    """
    from pyspark_log.spark import register
    from pyspark_log.spark.client_access import open_access
    from pyspark_log.spark.offsets import discover_partitions, from_checkpoint, resolve_offsets, to_checkpoint
    from pyspark_log.spark.options import parse_options
    from pyspark_log.spark.planning import rate_limit

    if max_offsets_per_load is not None and max_offsets_per_load <= 0:
        raise ValueError(f"max_offsets_per_load must be positive, not {max_offsets_per_load}")
    target = _Target.of(path, table_name, partition_by, storage_options, schema_mode)
    upsert = _upsert_spec(mode, key_columns, transform)
    chosen = choose_engine(spark, engine)
    opts = parse_options(options, "batch")
    assert opts.ending is not None
    previous = _last_load_rs(target, app_id) if chosen == "delta-rs" else _last_load_spark(spark, target, app_id)

    access = open_access(opts)
    try:
        tps = discover_partitions(opts.subscription, access)
        if previous is None:
            start = resolve_offsets(opts.starting, tps, access, opts.isolation_level, is_starting=True)
        else:
            done = from_checkpoint(previous.end_offsets)
            gone = sorted(str(tp) for tp in set(done) - tps)
            if gone:
                log.warning("pylog: partitions of the previous load no longer exist and are skipped: %s", gone)
            new = [tp for tp in tps if tp not in done]
            start = {tp: done[tp] for tp in tps if tp in done}
            start.update(access.earliest_offsets(new) if new else {})
        end = resolve_offsets(opts.ending, tps, access, opts.isolation_level, is_starting=False)
    finally:
        access.close()
    common = sorted(set(start) & set(end))
    start = {tp: start[tp] for tp in common}
    end = {tp: max(end[tp], start[tp]) for tp in common}
    first_start = to_checkpoint(start)
    if start == end:
        log.info("pylog: nothing new to load into %s for %r", target.describe(), app_id)
        return LoadResult(None, first_start, to_checkpoint(end), 0, chosen)

    register(spark)
    load_number = -1 if previous is None else previous.load_number
    total_rows: int | None = 0
    while start != end:
        upto = rate_limit(start, end, max_offsets_per_load) if max_offsets_per_load is not None else dict(end)
        load_number += 1
        rows = _load_range(spark, options, target, chosen, app_id, load_number, start, upto, transform, upsert)
        total_rows = None if rows is None or total_rows is None else total_rows + rows
        log.info("pylog: load %d of %r committed to %s: %s -> %s", load_number, app_id, target.describe(), start, upto)
        start = upto
    return LoadResult(load_number, first_start, to_checkpoint(end), total_rows, chosen)


def _load_range(  # noqa: PLR0917 - internal, called once
    spark: SparkSession,
    options: Mapping[str, str],
    target: _Target,
    chosen: Literal["delta-spark", "delta-rs"],
    app_id: str,
    load_number: int,
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    transform: Callable[[DataFrame], DataFrame] | None,
    upsert: UpsertSpec | None,
) -> int | None:
    """Read ``[start, end)`` with a batch query and append (or merge) it in one commit recording ``end``."""
    from pyspark_log.spark.offsets import to_checkpoint

    start_json, end_json = to_checkpoint(start), to_checkpoint(end)
    reader = spark.read.format("pylog")
    for key, value in options.items():
        if not key.lower().startswith(("starting", "ending")):
            reader = reader.option(key, value)
    df = reader.option("startingOffsets", json.dumps(start_json)).option("endingOffsets", json.dumps(end_json)).load()
    if upsert is not None:
        df = changes(df, upsert)
    elif transform is not None:
        df = transform(df)
    meta = {META_APP_ID: app_id, META_LOAD_NUMBER: str(load_number), META_END_OFFSETS: json.dumps(end_json)}
    if chosen == "delta-spark":
        if upsert is not None:
            target.spark_upsert(df, upsert, app_id, load_number, json.dumps(meta))
        else:
            target.spark_append(df, app_id, load_number, json.dumps(meta))
        return None
    data = df.toArrow()
    if upsert is not None:
        target.rs_upsert(data, upsert, app_id, load_number, _rs_metadata(meta))
    else:
        target.rs_append(data, app_id, load_number, _rs_metadata(meta))
    return data.num_rows
