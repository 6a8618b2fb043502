"""``df.write.format("pylog")`` and ``df.writeStream.format("pylog")``: exactly-once writers.

Columns as Spark's Kafka sink: ``value`` (binary or string, required; null = tombstone), ``key``
(binary or string), ``headers`` (``array<struct<key:string,value:binary>>``), ``topic`` (string;
the ``topic`` option overrides it, as in Spark), ``partition`` (int; null or absent = the
producer's partitioner). Other columns are ignored, as Spark does. A missing or mistyped column
raises ``PylogOptionError`` naming it and the fix when the write starts.

``timestamp`` (timestamp), when present, is each record's CreateTime (pylog's addition; Spark's
Kafka sink ignores it, see docs/compatibility.md); without it records get the send time.

Where PySpark has ``DataSourceArrowWriter`` (4.0+) and ``DataSourceStreamArrowWriter`` (4.1+)
the writers are Arrow writers: a task receives ``pyarrow.RecordBatch`` es and writes them through
the producer's batch API (``sink_arrow.py``) instead of one ``send`` per row; otherwise they are
row writers (``PylogBatchRowWriter`` / ``PylogStreamRowWriter``, always available). Both write
the same records under the same protocol.

Each task writes its rows in one Kafka transaction and reports a ``PylogCommitMessage`` holding
its ``TransactionHandle``; the driver commits them all in ``commit`` and aborts them in
``abort``. ``sink.py`` has the protocol, its guarantee and its preconditions. The micro-batch id
and the streaming query id reach the tasks as Spark's local properties
(``streaming.sql.batchId``, ``sql.streaming.queryId``), read through ``TaskContext``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import datasource as _ds
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import DataType, StructType

from pyspark_log.spark.sink import (
    Columns,
    PylogSinkError,
    TaskInfo,
    TaskResult,
    complete_all,
    fence,
    transactional_id,
    write_task,
)
from pyspark_log.spark.sink_options import SinkOptions, parse_sink_options
from pyspark_log.spark.specs import PylogOptionError

__all__ = [
    "HAS_ARROW_BATCH_WRITER",
    "HAS_ARROW_STREAM_WRITER",
    "PylogBatchRowWriter",
    "PylogBatchWriter",
    "PylogCommitMessage",
    "PylogStreamRowWriter",
    "PylogStreamWriter",
    "sink_columns",
]

# Detected by attribute, not version, so back-ports count (DataSourceArrowWriter: 4.0,
# DataSourceStreamArrowWriter: 4.1).
_ArrowBatchBase: Any = getattr(_ds, "DataSourceArrowWriter", None)
_ArrowStreamBase: Any = getattr(_ds, "DataSourceStreamArrowWriter", None)
HAS_ARROW_BATCH_WRITER = _ArrowBatchBase is not None
HAS_ARROW_STREAM_WRITER = _ArrowStreamBase is not None

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY

_TEXT_OR_BINARY = ("string", "binary")
_HEADERS = "array<struct<key:string,value:binary>>"


def _type_name(data_type: DataType) -> str:
    return data_type.simpleString()  # nullability is not part of it


def sink_columns(schema: StructType, options: SinkOptions) -> Columns:
    """Where value/key/topic/partition/headers are in ``schema``; raises ``PylogOptionError``."""
    names = schema.fieldNames()
    position = {name: i for i, name in enumerate(names)}
    shown = ", ".join(names) or "none"

    def check(name: str, allowed: Sequence[str], example: str) -> int | None:
        index = position.get(name)
        if index is None:
            return None
        actual = _type_name(schema.fields[index].dataType)
        if actual not in allowed:
            raise PylogOptionError(
                f"column {name} is {actual}, but the pylog sink needs {' or '.join(allowed)}: "
                f"cast or build it, e.g. {example}"
            )
        return index

    value = check("value", _TEXT_OR_BINARY, "CAST(value AS STRING) AS value")
    if value is None:
        similar = [n for n in names if n.lower() == "value"]
        hint = f" (column names are case-sensitive: rename {similar[0]} to value)" if similar else ""
        raise PylogOptionError(
            f"the DataFrame has no value column (columns: {shown}){hint}: select the record value as a string "
            'or binary column named value, e.g. df.selectExpr("CAST(id AS STRING) AS value")'
        )
    topic = check("topic", ("string",), "CAST(t AS STRING) AS topic")
    if topic is None and options.topic is None:
        raise PylogOptionError(
            f'no output topic: set the topic option, e.g. .option("topic", "events"), or add a string '
            f"column named topic (columns: {shown})"
        )
    return Columns(
        value=value,
        key=check("key", _TEXT_OR_BINARY, "CAST(k AS STRING) AS key"),
        topic=None if options.topic is not None else topic,
        partition=check("partition", ("int",), "CAST(p AS INT) AS partition"),
        headers=check("headers", (_HEADERS,), "array(struct('h' AS key, CAST('v' AS BINARY) AS value)) AS headers"),
        timestamp=check("timestamp", ("timestamp",), "CAST(t AS TIMESTAMP) AS timestamp"),
    )


@dataclass(frozen=True, slots=True)
class PylogCommitMessage(WriterCommitMessage):
    """What one task reports: its partition id and ``TaskResult`` (picklable)."""

    partition_id: int
    result: TaskResult


def _task_context() -> TaskContext:
    ctx = TaskContext.get()
    if ctx is None:
        raise PylogSinkError("the pylog sink's write() ran outside a Spark task")
    return ctx


def _results(messages: Sequence[WriterCommitMessage | None]) -> list[TaskResult]:
    return [m.result for m in messages if isinstance(m, PylogCommitMessage)]


def _fence_missing(options: SinkOptions, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Fence the transactional ids of the tasks that reported nothing (they failed): a failed
    attempt may have left a transaction open, which holds read_committed readers back."""
    results = _results(messages)
    prefix = options.transactional_id_prefix or (results[0].prefix if results else None)
    reported = {r.partition_id for r in results}
    missing = [p for p in range(len(messages)) if p not in reported]
    if prefix is not None and missing:
        fence(options, [transactional_id(prefix, p) for p in missing])


class _BatchCommit:
    """Driver side of a batch write: one transaction per task, all committed at job commit or
    all aborted. Only append (the default save mode) is supported, as in Spark's Kafka sink."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    @staticmethod
    def _task() -> TaskInfo:
        ctx = _task_context()
        return TaskInfo(ctx.partitionId(), ctx.attemptNumber())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        complete_all(self.options, _results(messages), commit=True, what="batch write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        complete_all(self.options, _results(messages), commit=False, what="batch write")
        _fence_missing(self.options, messages)


class _StreamCommit:
    """Driver side of a streaming write: exactly-once micro-batches (see ``sink.py``)."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    @staticmethod
    def _task() -> TaskInfo:
        ctx = _task_context()
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
        if batch is None:
            raise PylogSinkError(f"Spark gave this streaming write task no micro-batch id ({BATCH_ID_PROPERTY})")
        return TaskInfo(ctx.partitionId(), ctx.attemptNumber(), int(batch), ctx.getLocalProperty(QUERY_ID_PROPERTY))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        complete_all(self.options, _results(messages), commit=True, what=f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        complete_all(self.options, _results(messages), commit=False, what=f"micro-batch {batchId}")
        _fence_missing(self.options, messages)


class PylogBatchRowWriter(_BatchCommit, DataSourceWriter):
    """``df.write.format("pylog")`` row by row (PySpark without ``DataSourceArrowWriter``)."""

    def write(self, iterator: Iterator[Sequence[object]]) -> PylogCommitMessage:
        task = self._task()
        return PylogCommitMessage(task.partition_id, write_task(self.options, self.columns, iterator, task))


class PylogStreamRowWriter(_StreamCommit, DataSourceStreamWriter):
    """``df.writeStream.format("pylog")`` row by row (PySpark without ``DataSourceStreamArrowWriter``)."""

    def write(self, iterator: Iterator[Sequence[object]]) -> PylogCommitMessage:
        task = self._task()
        return PylogCommitMessage(task.partition_id, write_task(self.options, self.columns, iterator, task))


if HAS_ARROW_BATCH_WRITER:

    class PylogBatchArrowWriter(_BatchCommit, _ArrowBatchBase):
        """``df.write.format("pylog")`` on Arrow record batches (``sink_arrow.py``)."""

        def write(self, iterator: Iterator[Any]) -> PylogCommitMessage:
            from pyspark_log.spark.sink_arrow import write_task_arrow  # pyarrow: only in tasks

            task = self._task()
            return PylogCommitMessage(task.partition_id, write_task_arrow(self.options, self.columns, iterator, task))

    PylogBatchWriter: type[_BatchCommit] = PylogBatchArrowWriter
else:
    PylogBatchWriter = PylogBatchRowWriter

if HAS_ARROW_STREAM_WRITER:

    class PylogStreamArrowWriter(_StreamCommit, _ArrowStreamBase):
        """``df.writeStream.format("pylog")`` on Arrow record batches (``sink_arrow.py``)."""

        def write(self, iterator: Iterator[Any]) -> PylogCommitMessage:
            from pyspark_log.spark.sink_arrow import write_task_arrow  # pyarrow: only in tasks

            task = self._task()
            return PylogCommitMessage(task.partition_id, write_task_arrow(self.options, self.columns, iterator, task))

    PylogStreamWriter: type[_StreamCommit] = PylogStreamArrowWriter
else:
    PylogStreamWriter = PylogStreamRowWriter


def batch_writer(raw_options: object, schema: StructType, overwrite: bool) -> Any:
    """The ``DataSource.writer`` of ``format("pylog")``."""
    if overwrite:
        raise PylogOptionError(
            'save mode overwrite is not supported by the pylog sink (a topic cannot be truncated): use mode("append")'
        )
    options = parse_sink_options(raw_options, "batch")  # type: ignore[arg-type]
    return PylogBatchWriter(options, sink_columns(schema, options))


def stream_writer(raw_options: object, schema: StructType) -> Any:
    """The ``DataSource.streamWriter`` of ``format("pylog")`` (every output mode appends)."""
    options = parse_sink_options(raw_options, "stream")  # type: ignore[arg-type]
    return PylogStreamWriter(options, sink_columns(schema, options))
