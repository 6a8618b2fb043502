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
    """The schema of ``decode_arrow``'s record batches."""
    import pyarrow as pa

    fields = [
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)
