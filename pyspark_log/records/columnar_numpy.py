"""Vectorised record decoding for ``columnar.decode_arrow``: numpy kernels over whole fetches.

Contract: ``decode_plan(plan, …)`` returns the same ``pyarrow.RecordBatch`` as
``columnar.columns_from_plan(plan, …).to_arrow()`` (or None where binary views cannot hold the
bytes) and raises CorruptRecordError on the same inputs (record layout in ``record.py``, Kafka documentation
§5.3.2 "Record"). How:

1. The planned records sections are put in one byte array (no copy when they all live in the
   fetch buffer). A Python loop walks each section's records by their length varints only and
   notes where each record begins: the one step that is inherently sequential.
2. Every field of every record is then decoded at once: a zig-zag varint at N positions is a
   few numpy operations per byte of varint (``_varints``), and key/value lengths move the
   positions forward. Headers are read the same way, one round per header index.
3. Keys, values and header fields become Arrow *binary views* — 16 bytes per value giving its
   length and either its bytes inline (<= 12) or a prefix and its offset in the byte array —
   so no per-record bytes objects are made; Arrow's cast to ``binary`` then gathers them.

Every record is validated as ``read_records`` validates it: lengths of at least 6, no negative
lengths other than -1 (null; header keys are never null), and fields that end exactly at the
record's end.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.fetched import Plan, arrow_schema, record_batch
from pyspark_log.records.record import MIN_RECORD_BODY_BYTES
from pyspark_log.records.varint import read_varint

_INLINE = 12  # Arrow binary views hold values of up to 12 bytes inline
_ARANGE_INLINE = np.arange(_INLINE, dtype=np.int64)
_MAX_VIEW_OFFSET = 2**31 - 1
# A numpy step over every batch costs about as much as this many per-record Python steps.
VECTOR_STEP_COST = 64
_NullableInts = Any  # numpy int64 arrays (numpy's typing is too loose to be worth spelling out)


@functools.cache
def available() -> bool:
    """Whether this pyarrow can build binary views and cast them to binary (pyarrow >= 16)."""
    try:
        views = np.zeros((1, 4), np.int32)
        views[0, 0] = 1
        views.view(np.uint8)[0, 4] = ord("x")
        array = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(views), pa.py_buffer(b"")])
        return bool(array.cast(pa.binary()).to_pylist() == [b"x"])
    except (AttributeError, NotImplementedError, pa.ArrowException):
        return False


def _varints(arr: np.ndarray, pos: _NullableInts, last: int) -> tuple[_NullableInts, _NullableInts]:
    """Zig-zag varints starting at each of ``pos``: ``(values, positions after them)``.

    Reads are clamped to the array, so corrupt input yields garbage positions that the
    callers' checks reject rather than an IndexError.
    """
    b = arr[np.minimum(pos, last)]
    raw = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), np.int64)
    idx = np.flatnonzero(b & 0x80)
    shift = 7
    while idx.size:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        bk = arr[np.minimum(pos[idx] + size[idx], last)]
        raw[idx] |= (bk & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[idx] += 1
        idx = idx[(bk & 0x80).astype(bool)]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -((raw & np.uint64(1)).astype(np.int64))
    return values, pos + size


def _check(bad: Any, what: str) -> None:
    if bad.any():
        raise CorruptRecordError(f"{what} (record {int(np.flatnonzero(bad)[0])} of the fetch)")


def _windows(arr: np.ndarray) -> np.ndarray:
    """Overlapping read-only 12-byte windows of ``arr``: row ``i`` is ``arr[i : i + 12]``.

    Gathering rows of this view copies 12 bytes per index, several times faster than fancy
    indexing with an N x 12 index matrix.
    """
    return as_strided(arr, shape=(len(arr) - _INLINE + 1, _INLINE), strides=(1, 1), writeable=False)


def _binary(
    arr: np.ndarray, windows: np.ndarray, buffer: pa.Buffer, start: Any, length: Any, *, target: pa.DataType
) -> pa.Array:
    """An Arrow array of ``target`` (binary/string) of the byte ranges ``[start, start+length)``.

    ``length`` -1 means null. ``windows`` is ``_windows(arr)``.
    """
    n = len(start)
    null = length < 0
    lengths = np.where(null, 0, length).astype(np.int32)
    views = np.zeros((n, 4), np.int32)
    if n:
        limit = len(windows) - 1
        inline = windows[np.minimum(start, limit)]
        short = lengths < _INLINE
        if short.any():
            inline[short] *= lengths[short][:, None] > _ARANGE_INLINE
            for row in np.flatnonzero(start > limit):  # the last few bytes of the array
                a = int(start[row])
                inline[row] = 0
                inline[row, : lengths[row]] = arr[a : a + lengths[row]]
        views.view(np.uint8)[:, 4:] = inline
        views[:, 0] = lengths
        long_values = lengths > _INLINE
        if long_values.any():
            views[long_values, 2] = 0  # data buffer index
            views[long_values, 3] = start[long_values]
    null_count = int(null.sum())
    validity = pa.py_buffer(np.packbits(~null, bitorder="little")) if null_count else None
    array = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), buffer], null_count=null_count
    ).cast(pa.binary())
    if target == pa.binary():
        return array
    try:
        return array.cast(target)  # binary -> string checks UTF-8 (string_view -> string would not)
    except pa.ArrowInvalid as exc:
        raise CorruptRecordError(f"header key is not UTF-8: {exc}") from exc


def _gather(plan: Plan) -> tuple[bytes, list[int]]:
    """One byte array holding every segment's data, and each segment's start within it."""
    distinct: dict[int, bytes] = {}
    for seg in plan.segments:
        distinct.setdefault(id(seg.data), seg.data)
    if len(distinct) == 1:
        return plan.segments[0].data, [seg.start for seg in plan.segments]
    shifts: dict[int, int] = {}
    at = 0
    for key, chunk in distinct.items():
        shifts[key] = at
        at += len(chunk)
    return b"".join(distinct.values()), [seg.start + shifts[id(seg.data)] for seg in plan.segments]


def _begins_python(data: bytes, plan: Plan, seg_starts: list[int]) -> Any:
    """Where each record's length varint begins: one Python step per record."""
    begins: list[int] = []
    add = begins.append
    try:
        for seg, pos in zip(plan.segments, seg_starts, strict=True):
            end = pos + seg.end - seg.start
            for _ in range(seg.count):
                add(pos)
                b = data[pos]
                if b < 0x80:
                    pos += 1 + ((b >> 1) ^ -(b & 1))
                else:
                    b2 = data[pos + 1]
                    if b2 < 0x80:
                        v = (b & 0x7F) | (b2 << 7)
                        pos += 2 + ((v >> 1) ^ -(v & 1))
                    else:
                        length, pos = read_varint(data, pos)
                        pos += length
            if pos != end:
                raise CorruptRecordError(
                    f"records of the batch at offset {seg.base_offset} do not fill its records section"
                )
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of its batch") from exc
    return np.array(begins, np.int64)


def _begins_vectorized(arr: np.ndarray, plan: Plan, seg_starts: list[int]) -> Any:
    """Where each record's length varint begins: one numpy step per record *index*.

    Step ``i`` advances every batch with more than ``i`` records past its ``i``-th record, so
    many small batches (Java's 16 KiB default) cost as many steps as the largest one has records.
    """
    counts = np.array([seg.count for seg in plan.segments], np.int64)
    order = np.argsort(-counts, kind="stable")  # the batches still stepping are a prefix
    sorted_counts = counts[order]
    first_out = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=first_out[1:])
    out_base = first_out[order]
    pos = np.array(seg_starts, np.int64)[order]
    ends = pos + np.array([seg.end - seg.start for seg in plan.segments], np.int64)[order]
    begins = np.empty(int(counts.sum()), np.int64)
    last = len(arr) - 1
    pairs = as_strided(arr, shape=(len(arr) - 1, 2), strides=(1, 1), writeable=False).view("<u2")[:, 0]
    active = len(counts)
    for i in range(int(sorted_counts[0])):
        while sorted_counts[active - 1] <= i:
            active -= 1
        p = pos[:active]
        begins[out_base[:active] + i] = p
        # Lengths are validated later, when every record's length is decoded again.
        two = pairs[np.minimum(p, last - 1)].astype(np.int64)  # b0 | b1 << 8
        if (two & 0x8080 == 0x80).all():  # all two-byte varints (records of 64 B to 8 KiB)
            raw = (two & 0x7F) | ((two >> 1) & 0x3F80)
            pos[:active] = p + 2 + ((raw >> 1) ^ -(raw & 1))
        elif not (two & 0x80).any():  # all one-byte varints
            raw = two & 0x7F
            pos[:active] = p + 1 + ((raw >> 1) ^ -(raw & 1))
        else:
            length, after = _varints(arr, p, last)
            pos[:active] = after + length
    bad = pos != ends
    if bad.any():
        seg = plan.segments[int(order[np.flatnonzero(bad)[0]])]
        raise CorruptRecordError(f"records of the batch at offset {seg.base_offset} do not fill its records section")
    return begins


def _record_begins(plan: Plan) -> tuple[bytes, Any]:
    """The byte array holding every segment, and where each record's length varint begins."""
    data, seg_starts = _gather(plan)
    counts = [seg.count for seg in plan.segments]
    if max(counts) * VECTOR_STEP_COST <= sum(counts):
        return data, _begins_vectorized(np.frombuffer(data, np.uint8), plan, seg_starts)
    return data, _begins_python(data, plan, seg_starts)


def decode_plan(  # noqa: PLR0917 - the arguments of columnar.decode_arrow, passed on
    plan: Plan, start_offset: int, end_offset: int | None, include_headers: bool, topic: str, partition: int
) -> pa.RecordBatch | None:
    """Decode the planned segments into a record batch with ``fetched.arrow_schema``; None when
    the records are too few or too many bytes for binary views (then the caller decodes them
    with the per-record Python loop)."""
    schema = arrow_schema(include_headers)
    if not plan.segments:
        return pa.RecordBatch.from_pylist([], schema=schema)
    data, begins = _record_begins(plan)
    if len(data) > _MAX_VIEW_OFFSET or len(data) < _INLINE:
        return None
    arr = np.frombuffer(data, np.uint8)
    last = len(arr) - 1

    length, start = _varints(arr, begins, last)
    _check(length < MIN_RECORD_BODY_BYTES, "record length below 6 bytes")
    end = start + length
    ts_delta, p = _varints(arr, start + 1, last)  # + 1: attributes
    off_delta, p = _varints(arr, p, last)
    key_len, p = _varints(arr, p, last)
    _check((key_len < -1) | (key_len > end - p), "invalid key length")
    key_start = p
    value_len, p = _varints(arr, p + np.maximum(key_len, 0), last)
    _check((value_len < -1) | (value_len > end - p), "invalid value length")
    value_start = p
    header_count, p = _varints(arr, p + np.maximum(value_len, 0), last)
    _check((header_count < 0) | (header_count > end - p), "invalid header count")
    headers = _headers(arr, p, end, header_count, last) if header_count.any() else None
    if headers is not None:
        p = headers[0]
    _check(p != end, "record fields do not fill the record")

    counts = [seg.count for seg in plan.segments]
    per_record = functools.partial(np.repeat, repeats=counts)
    offsets = per_record(np.array([seg.base_offset for seg in plan.segments], np.int64)) + off_delta
    ts_type = per_record(np.array([seg.timestamp_type for seg in plan.segments], np.int32))
    timestamps = np.where(
        ts_type == 1,
        per_record(np.array([seg.max_timestamp for seg in plan.segments], np.int64)),
        per_record(np.array([seg.base_timestamp for seg in plan.segments], np.int64)) + ts_delta,
    )

    buffer = pa.py_buffer(data)
    windows = _windows(arr)
    header_column = None
    if include_headers:
        list_type = schema.field("headers").type
        header_column = _header_column(arr, windows, buffer, count=header_count, headers=headers, list_type=list_type)
    batch = record_batch(
        schema,
        topic=topic,
        partition=partition,
        key=_binary(arr, windows, buffer, key_start, key_len, target=pa.binary()),
        value=_binary(arr, windows, buffer, value_start, value_len, target=pa.binary()),
        offset=pa.array(offsets, pa.int64()),
        timestamp_ms=pa.array(timestamps, pa.int64()),
        timestamp_type=pa.array(ts_type, pa.int32()),
        headers=header_column,
    )
    upper = end_offset if end_offset is not None else 2**63 - 1
    keep = (offsets >= start_offset) & (offsets < upper)
    if not keep.all():
        batch = batch.filter(pa.array(keep))
    return batch


_Headers = tuple[Any, Any, Any, Any, Any, Any]


def _headers(arr: np.ndarray, p: Any, end: Any, count: Any, last: int) -> _Headers:
    """Walk every record's headers, one round per header index.

    Returns ``(positions after the headers, record of each header, key starts, key lengths,
    value starts, value lengths)``, headers in record order.
    """
    p = p.copy()
    rows = np.flatnonzero(count)
    hp = p[rows]
    left = count[rows]
    parts: list[tuple[Any, ...]] = []
    while rows.size:
        klen, hp = _varints(arr, hp, last)
        _check((klen < 0) | (klen > end[rows] - hp), "invalid header key length")
        kstart = hp
        vlen, hp = _varints(arr, hp + klen, last)
        _check((vlen < -1) | (vlen > end[rows] - hp), "invalid header value length")
        vstart = hp
        hp = hp + np.maximum(vlen, 0)
        parts.append((rows, kstart, klen, vstart, vlen))
        left = left - 1
        done = left == 0
        p[rows[done]] = hp[done]
        keep = ~done
        rows, hp, left = rows[keep], hp[keep], left[keep]
    row, kstart, klen, vstart, vlen = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.argsort(row, kind="stable")  # rounds are header-index major; make it record major
    return p, row[order], kstart[order], klen[order], vstart[order], vlen[order]


def _header_column(
    arr: np.ndarray,
    windows: np.ndarray,
    buffer: pa.Buffer,
    *,
    count: Any,
    headers: _Headers | None,
    list_type: pa.DataType,
) -> pa.Array:
    struct_type = list_type.value_type
    list_offsets = np.zeros(len(count) + 1, np.int32)
    np.cumsum(count, out=list_offsets[1:])
    if headers is None:
        empty = np.zeros(0, np.int64)
        headers = (None, empty, empty, empty, empty, empty)
    _, _, kstart, klen, vstart, vlen = headers
    keys = _binary(arr, windows, buffer, kstart, klen, target=pa.string())
    values = _binary(arr, windows, buffer, vstart, vlen, target=pa.binary())
    struct = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
    # a record without headers: null, not an empty list (Spark's Kafka connector)
    no_headers = count == 0
    mask = pa.array(no_headers) if no_headers.any() else None
    return pa.ListArray.from_arrays(pa.array(list_offsets, pa.int32()), struct, type=list_type, mask=mask)
