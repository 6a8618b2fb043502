"""Executor data path: fetched record-batch bytes of one offset range -> pyarrow RecordBatches.

Decoding is ``pyspark_log.records.columnar.decode_arrow`` (whole batches, records outside
``[start, end)`` cut, control batches dropped, and with ``read_committed`` aborted transactions
dropped by Kafka's consumer rules from each chunk's aborted-transaction list). It decodes straight
into the source's schema, ``pyspark_log.records.fetched.arrow_schema`` (the Kafka connector's
columns with the Arrow types PySpark checks a Python source's batches against), so the batches go
to Spark as they are.

``read_range`` drives ``BrokerAccess.fetch`` for one ``OffsetRange`` and yields one RecordBatch
per fetched chunk that has records in range. Missing offsets inside the range (compaction,
transaction markers, aborted data) are normal. Out-of-range fetches are judged by
``planning.judge_read`` and the loss reported with ``report_data_loss``: with failOnDataLoss=false
reading resumes at the log start offset (retention) or stops (log truncated or reset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from pyspark_log.records.columnar import decode_arrow
from pyspark_log.spark.access import (
    BrokerAccess,
    FetchedChunk,
    IsolationLevel,
    OffsetOutOfRangeError,
    UnknownPartitionError,
)
from pyspark_log.spark.planning import DataLoss, LossKind, OffsetRange, judge_read, report_data_loss
from pyspark_log.spark.specs import SourceOptions


def decode_chunk(
    chunk: FetchedChunk, r: OffsetRange, *, read_committed: bool, include_headers: bool
) -> pa.RecordBatch | None:
    """The records of one fetched chunk with offsets in ``r``, as one RecordBatch (None if none)."""
    aborted = [(t.producer_id, t.first_offset) for t in chunk.aborted_transactions] if read_committed else None
    decoded = decode_arrow(
        chunk.records,
        topic=r.tp.topic,
        partition=r.tp.partition,
        start_offset=r.start,
        end_offset=r.end,
        aborted_transactions=aborted,
        include_headers=include_headers,
    ).batch
    return decoded if decoded.num_rows else None


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
            # the access already gave a short log its grace: decide now
            loss = judge_read(r.tp, exc.offset, end=r.end, earliest=exc.log_start_offset, latest=exc.log_end_offset)
            if loss is None:
                raise  # out of range, yet the log holds the whole range: the broker contradicts itself
            report_data_loss([loss], fail_on_data_loss)
            if loss.kind is LossKind.RESET:
                return
            if exc.log_start_offset <= position:
                raise  # no progress possible: the broker contradicts itself
            position = exc.log_start_offset  # resume at the earliest available offset


def read_through_broker(
    factory: Callable[[SourceOptions], BrokerAccess], options: SourceOptions, r: OffsetRange
) -> Iterator[pa.RecordBatch]:
    """``read_range`` of ``r`` with the source's options, through a broker access the task opens
    with ``factory`` and closes when the range is read (or the reader stops): the broker path of
    the reader and the direct reader's fallback (direct_read.py)."""
    access = factory(options)
    try:
        yield from read_range(
            access,
            r,
            isolation_level=options.isolation_level,
            max_bytes=options.max_partition_fetch_bytes,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
        )
    finally:
        access.close()
