"""Executor data path: fetched record-batch bytes of one offset range -> pyarrow RecordBatches.

Decoding is ``pyspark_log.records.columnar.decode_arrow`` (whole batches, records outside
``[start, end)`` cut, control batches dropped, and with ``read_committed`` aborted transactions
dropped by Kafka's consumer rules from each chunk's aborted-transaction list). This module adapts
its columns to exactly what Spark expects for the Kafka connector's schema (PySpark checks a
Python source's first RecordBatch against ``to_arrow_schema(schema, timezone="UTC")``)::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, tz=UTC], timestampType int32
    [, headers list<element: struct<key: string, value: binary>>]   (includeHeaders=true)

``read_range`` drives ``BrokerAccess.fetch`` for one ``OffsetRange`` and yields one RecordBatch
per fetched chunk that has records in range. Missing offsets inside the range (compaction,
transaction markers, aborted data) are normal. Out-of-range fetches are data loss, reported with
``report_data_loss``: with failOnDataLoss=false reading resumes at the log start offset
(retention) or stops (log truncated or reset).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from pyspark_log.records.columnar import decode_arrow
from pyspark_log.spark.access import (
    BrokerAccess,
    FetchedChunk,
    IsolationLevel,
    OffsetOutOfRangeError,
    UnknownPartitionError,
)
from pyspark_log.spark.planning import DataLoss, LossKind, OffsetRange, report_data_loss

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
_HEADERS_FIELD = pa.field("headers", pa.list_(pa.field("element", HEADER_TYPE)))


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The source's Arrow schema (see module docstring)."""
    return pa.schema([*_BASE_FIELDS, _HEADERS_FIELD] if include_headers else _BASE_FIELDS)


def decode_chunk(
    chunk: FetchedChunk, r: OffsetRange, *, read_committed: bool, include_headers: bool
) -> pa.RecordBatch | None:
    """The records of one fetched chunk with offsets in ``r``, as one RecordBatch (None if none)."""
    aborted = [(t.producer_id, t.first_offset) for t in chunk.aborted_transactions] if read_committed else None
    decoded = decode_arrow(
        chunk.records,
        start_offset=r.start,
        end_offset=r.end,
        aborted_transactions=aborted,
        include_headers=include_headers,
    ).batch
    n = decoded.num_rows
    if n == 0:
        return None
    schema = arrow_schema(include_headers)
    columns = {
        "key": decoded.column("key"),
        "value": decoded.column("value"),
        "topic": pa.repeat(pa.scalar(r.tp.topic, pa.string()), n),  # C++ fill, not a list of n strs
        "partition": pa.repeat(pa.scalar(r.tp.partition, pa.int32()), n),
        "offset": decoded.column("offset"),
        "timestamp": decoded.column("timestamp"),
        "timestampType": decoded.column("timestampType"),
    }
    if include_headers:
        columns["headers"] = decoded.column("headers")
    arrays = [columns[f.name].cast(f.type) for f in schema]  # ms -> us, list item -> element, views -> binary
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(
    access: BrokerAccess,
    r: OffsetRange,
    *,
    isolation_level: IsolationLevel,
    max_bytes: int,
    include_headers: bool,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``r`` as RecordBatches (see module docstring for data loss)."""
    read_committed = isolation_level == "read_committed"
    position = r.start
    while position < r.end:
        current = OffsetRange(r.tp, position, r.end)
        try:
            for chunk in access.fetch(r.tp, position, r.end, isolation_level=isolation_level, max_bytes=max_bytes):
                batch = decode_chunk(chunk, current, read_committed=read_committed, include_headers=include_headers)
                if batch is not None:
                    yield batch
                position = max(position, chunk.next_offset)
            return
        except UnknownPartitionError:
            report_data_loss([DataLoss(r.tp, LossKind.DELETED, position)], fail_on_data_loss)
            return
        except OffsetOutOfRangeError as exc:
            if exc.offset >= exc.log_start_offset:
                loss = DataLoss(r.tp, LossKind.RESET, exc.offset, exc.log_start_offset, exc.log_end_offset)
                report_data_loss([loss], fail_on_data_loss)
                return
            report_data_loss([DataLoss(r.tp, LossKind.RETENTION, exc.offset, exc.log_start_offset)], fail_on_data_loss)
            if exc.log_start_offset <= position:
                raise  # no progress possible: the broker contradicts itself
            position = exc.log_start_offset  # resume at the earliest available offset
