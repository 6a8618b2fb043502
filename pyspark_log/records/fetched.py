"""The shapes both record decoders of ``columnar`` share: the planned records sections of a fetch
(``Plan`` of ``Segment`` s, made by ``columnar.plan_batches``) and the Arrow schema of decoded records.

A lower module than ``columnar`` and ``columnar_numpy`` so that each of them imports it and neither
imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class Segment:
    """The records section of one batch to decode: ``data[start:end]`` holds ``count`` records."""

    data: bytes
    start: int
    end: int
    count: int
    base_offset: int
    base_timestamp: int
    timestamp_type: int
    max_timestamp: int


@dataclass(slots=True)
class Plan:
    """What ``plan_batches`` found: segments to decode and where reading stopped."""

    segments: list[Segment]
    next_offset: int | None
    consumed_bytes: int


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The one declaration of a fetched record's columns: the Spark Kafka connector's schema, in its
    order, with the Arrow types PySpark checks a Python data source's batches against
    (``to_arrow_schema(schema, timezone="UTC")``)::

        key binary, value binary, topic string, partition int32, offset int64,
        timestamp timestamp[us, tz=UTC], timestampType int32 (0 CreateTime, 1 LogAppendTime)
        [, headers list<element: struct<key: string, value: binary>>]   (include_headers;
                                                    null for a record without headers)

    ``pyspark_log.spark.source`` derives the Spark schema from it; both decoders build it directly.
    """
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def record_batch(
    schema: pa.Schema,
    *,
    topic: str,
    partition: int,
    key: pa.Array,
    value: pa.Array,
    offset: pa.Array,
    timestamp_ms: pa.Array,
    timestamp_type: pa.Array,
    headers: pa.Array | None,
) -> pa.RecordBatch:
    """The columns of ``arrow_schema`` put together: ``topic`` and ``partition`` repeated (a C++
    fill), ``timestamp_ms`` (int64 ms) scaled to microseconds (OverflowError-free: Arrow's checked
    multiply raises ``ArrowInvalid`` past year 294247, as the cast it replaces did)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(offset)
    columns = [
        key,
        value,
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        offset,
        pc.multiply_checked(timestamp_ms, 1000).view(schema.field("timestamp").type),
        timestamp_type,
    ]
    if headers is not None:
        columns.append(headers)
    return pa.RecordBatch.from_arrays(columns, schema=schema)
