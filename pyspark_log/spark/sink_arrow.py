"""The pylog sink's Arrow path: a task's ``pyarrow.RecordBatch`` es go to the producer's batch API.

``write_task_arrow`` is ``sink.write_task`` for PySpark's ``DataSourceArrowWriter`` /
``DataSourceStreamArrowWriter`` (``writer.py`` picks them where PySpark has them): the same
transaction protocol (``sink.run_task``: per-task transactional id, batch mark, prepare, driver
commit), the same columns and the same records, but no Python object per row. The task's
batches are coalesced up to ``COALESCE_ROWS`` rows / ``COALESCE_BYTES`` bytes (a batch at or
above either goes as it is, without a copy: Spark's Arrow batches of big values) and handed to
``Producer.send_batch``, which partitions them (explicit ``partition``, murmur2 of ``key``,
sticky for null keys) and encodes Kafka RecordBatches from the columns in bulk
(``client/columnar_send.py``, ``records/columnar_encode.py``).

Checks and errors are the row path's: a null topic (without the topic option), a null header or
header key raise ``PylogSinkError`` naming the task's row number and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_log.spark.sink import (
    DEFAULT_CLIENTS,
    BaseSender,
    Clients,
    Columns,
    PylogSinkError,
    TaskInfo,
    TaskResult,
    run_task,
)
from pyspark_log.spark.sink_options import SinkOptions

__all__ = ["COALESCE_BYTES", "COALESCE_ROWS", "write_task_arrow"]

COALESCE_ROWS = 200_000
COALESCE_BYTES = 8 * 1024 * 1024


def _bad_row(row_number: int, problem: str, fix: str) -> PylogSinkError:
    return PylogSinkError(f"row {row_number} of this task {problem}: {fix}")


def _first_true(mask: Any) -> int:
    return int(np.flatnonzero(np.asarray(mask, bool))[0])


class _ArrowSender(BaseSender):
    """Sends record batches through ``send_batch`` (``BaseSender`` keeps the first delivery
    failure and the first row's topic)."""

    def send_all(self, items: Iterable[pa.RecordBatch]) -> None:
        pending: list[pa.RecordBatch] = []
        rows = size = 0
        for batch in items:
            if batch.num_rows == 0:
                continue
            if batch.num_rows >= COALESCE_ROWS or batch.nbytes >= COALESCE_BYTES:
                if pending:
                    self._send(pending)
                    pending, rows, size = [], 0, 0
                self._send([batch])
                continue
            pending.append(batch)
            rows += batch.num_rows
            size += batch.nbytes
            if rows >= COALESCE_ROWS or size >= COALESCE_BYTES:
                self._send(pending)
                pending, rows, size = [], 0, 0
        if pending:
            self._send(pending)

    def _send(self, batches: list[pa.RecordBatch]) -> None:
        c = self._columns
        base = self.rows
        self.rows += sum(b.num_rows for b in batches)

        def column(index: int | None) -> Any:
            # One batch: its column as it is (no copy); several: one concatenation per column.
            if index is None:
                return None
            if len(batches) == 1:
                return batches[0].column(index)
            return pa.concat_arrays([b.column(index) for b in batches])

        headers = column(c.headers)
        if headers is not None:
            _check_headers(headers, base)
        data = {
            "value": column(c.value),
            "key": column(c.key),
            "headers": headers,
            "partition": column(c.partition),
            "timestamp": column(c.timestamp),
        }
        data = {k: v for k, v in data.items() if v is not None}
        if self._topic is not None:
            groups: list[tuple[str, dict[str, Any]]] = [(self._topic, data)]
        else:
            groups = _by_topic(column(c.topic), data, base)
        if self.first_topic is None:
            self.first_topic = groups[0][0]
        for topic, part in groups:
            self._producer.send_batch(topic, part, on_delivery=self._delivered)
            if self.failure is not None:
                raise self.failure


def _check_headers(headers: Any, base: int) -> None:
    structs = pc.list_flatten(headers)
    if not len(structs):
        return
    bad = pc.or_(pc.is_null(structs), pc.is_null(structs.field("key"))).to_numpy(zero_copy_only=False)
    if bad.any():
        parent = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        row = int(parent[_first_true(bad)])
        raise _bad_row(base + row + 1, "has a null header or header key", "give every header a string key")


def _by_topic(topics: Any, data: dict[str, Any], base: int) -> list[tuple[str, dict[str, Any]]]:
    """Split the columns by the topic column, topics in order of their first row."""
    assert topics is not None
    if topics.null_count:
        row = _first_true(topics.is_null().to_numpy(zero_copy_only=False))
        raise _bad_row(
            base + row + 1, "has a null topic", "set the topic option, or fill the topic column in every row"
        )
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        return [(distinct[0], data)]
    out = []
    for topic in distinct:
        mask = pc.equal(topics, topic)
        out.append((topic, {k: pc.filter(v, mask) for k, v in data.items()}))
    return out


def _count(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> int:
    return first.num_rows + sum(b.num_rows for b in rest)


def write_task_arrow(
    options: SinkOptions,
    columns: Columns,
    batches: Iterable[pa.RecordBatch],
    task: TaskInfo,
    clients: Clients = DEFAULT_CLIENTS,
) -> TaskResult:
    """``sink.write_task`` for Arrow record batches (see the module docstring)."""
    non_empty = (b for b in batches if b.num_rows)
    return run_task(
        options,
        task,
        non_empty,
        lambda producer: _ArrowSender(producer, columns, options.topic),
        _count,
        clients,
    )
