"""Vectorised record encoding from Arrow columns: the encode side of ``columnar_numpy.py``.

Contract: for rows ``[lo, hi)`` of an ``ArrowRecords`` (key, value, headers, timestamps), the
records section ``encode_sections`` returns for that range is byte-identical to the records
section ``batch.encode_batch`` writes for the same records as ``ProducerRecord`` s (record layout
in ``record.py``, Kafka documentation §5.3.2 "Record": length, attributes, timestampDelta, offsetDelta, key,
value, headers). Null keys and values are length -1, a null header value is length -1, a null
header list is no headers; header keys are never null (``ValueError``).

How, for many batches at once (no Python object per record):

1. Every field length is an Arrow compute kernel over the column (``binary_length``); sizes of
   the zig-zag varints are a few numpy comparisons per varint byte (``varint_sizes``).
2. Each batch's offsetDelta is the row number minus the batch's first row, its timestampDelta
   the timestamp minus the batch's first timestamp (``encode_batch`` takes baseTimestamp from
   the first record), so all batches are encoded in one pass.
3. The varint runs between the byte fields (``length attributes tsDelta offDelta keyLen``,
   ``valueLen``, ``headerCount``, and per header ``keyLen`` and ``valueLen``) are written into
   small Arrow binary arrays by numpy scatter (``pack_varints``).
4. Arrow's element-wise ``binary_join_element_wise`` concatenates, per record, ``head key
   valueLen value headerCount headers`` (each header's four pieces joined the same way, then a
   record's headers by ``binary_join`` over the header lists); the data buffer of the result
   *is* the records section, each byte copied once.

``estimate_bytes`` is the accumulator's per-record upper bound (``estimate_record_bytes``) over a
whole column, used to cut batches at ``batch.size`` and to reserve ``buffer.memory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_log.records import speedups
from pyspark_log.records.batch import RecordFields

_BINARY = pa.large_binary()
_EMPTY = pa.scalar(b"", _BINARY)
# Same bound as accumulator.RECORD_OVERHEAD_BYTES / HEADER_OVERHEAD_BYTES (kept equal by a test).
RECORD_OVERHEAD_BYTES = 36
HEADER_OVERHEAD_BYTES = 10
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_PER_MS = {"us": 1000, "ns": 1_000_000}
_VARINT_LIMITS = [np.uint64(1) << np.uint64(7 * k) for k in range(1, 10)]
_Ints = Any  # numpy int64 arrays


def _one_array(array: pa.ChunkedArray) -> pa.Array:
    """The chunks as one array: a single chunk as it is (``combine_chunks`` copies even one)."""
    return array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()


def _as_binary(array: pa.Array | pa.ChunkedArray | None, n: int, what: str) -> pa.Array:
    """A ``large_binary`` array of ``n`` values (all null when ``array`` is None)."""
    if array is None:
        return pa.nulls(n, _BINARY)
    if isinstance(array, pa.ChunkedArray):
        array = _one_array(array)
    if len(array) != n:
        raise ValueError(f"{what} has {len(array)} values, expected {n}")
    t = array.type
    if pa.types.is_null(t):
        return pa.nulls(n, _BINARY)
    if not (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_string_view(t)
    ):
        raise TypeError(f"{what} must be a binary or string column, not {t}")
    return array.cast(_BINARY)


def _as_timestamps_ms(array: pa.Array | pa.ChunkedArray | np.ndarray | int, n: int) -> _Ints:
    if isinstance(array, int):
        return np.full(n, array, np.int64)
    if isinstance(array, np.ndarray):
        out = array.astype(np.int64, copy=False)
    else:
        if isinstance(array, pa.ChunkedArray):
            array = _one_array(array)
        if array.null_count:
            raise ValueError("timestamps must not be null")
        unit = array.type.unit if pa.types.is_timestamp(array.type) else "ms"
        if pa.types.is_timestamp(array.type):
            array = array.cast(pa.int64())
        out = array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if unit != "ms":  # floor to whole milliseconds, as the row path does
            out = out * 1000 if unit == "s" else out // _PER_MS[unit]
    if len(out) != n:
        raise ValueError(f"timestamps have {len(out)} values, expected {n}")
    if n and out.min() < 0:
        raise ValueError("timestamps must be >= 0")
    return out


@dataclass(frozen=True, slots=True)
class ArrowRecords:
    """Records as columns: ``key``/``value`` ``large_binary`` (null allowed), ``headers`` a
    ``list<struct<key: string, value: binary>>`` or None, ``timestamp_ms`` int64 numpy."""

    key: pa.Array
    value: pa.Array
    headers: pa.Array | None
    timestamp_ms: _Ints

    @classmethod
    def build(
        cls,
        *,
        value: pa.Array | pa.ChunkedArray | None,
        key: pa.Array | pa.ChunkedArray | None = None,
        headers: pa.Array | pa.ChunkedArray | None = None,
        timestamp_ms: pa.Array | pa.ChunkedArray | np.ndarray | int,
        num_rows: int | None = None,
    ) -> ArrowRecords:
        """Normalise columns (strings become their UTF-8 bytes; ``timestamp`` types become ms)."""
        n = num_rows if num_rows is not None else len(value if value is not None else key)  # type: ignore[arg-type]
        if isinstance(headers, pa.ChunkedArray):
            headers = _one_array(headers)
        if headers is not None:
            if pa.types.is_null(headers.type):
                headers = None
            elif len(headers) != n:
                raise ValueError(f"headers has {len(headers)} values, expected {n}")
        return cls(
            _as_binary(key, n, "key"), _as_binary(value, n, "value"), headers, _as_timestamps_ms(timestamp_ms, n)
        )

    def __len__(self) -> int:
        return len(self.value)

    def slice(self, lo: int, hi: int) -> ArrowRecords:
        headers = None if self.headers is None else self.headers.slice(lo, hi - lo)
        return ArrowRecords(
            self.key.slice(lo, hi - lo), self.value.slice(lo, hi - lo), headers, self.timestamp_ms[lo:hi]
        )

    def take(self, indices: _Ints) -> ArrowRecords:
        idx = pa.array(indices, pa.int64())
        headers = None if self.headers is None else self.headers.take(idx)
        return ArrowRecords(self.key.take(idx), self.value.take(idx), headers, self.timestamp_ms[indices])


def _lengths(array: pa.Array) -> _Ints:
    """Byte length of each value, -1 for null."""
    return pc.binary_length(array).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


@dataclass(frozen=True, slots=True)
class _Headers:
    count: _Ints  # per record
    first: _Ints  # per record: index of its first header in the flat arrays
    keys: pa.Array  # flat, large_binary
    values: pa.Array  # flat, large_binary, null allowed
    key_len: _Ints
    value_len: _Ints


def _flat_headers(headers: pa.Array | None, n: int) -> _Headers | None:
    if headers is None or n == 0:
        return None
    if isinstance(headers, pa.ListArray | pa.LargeListArray):
        count = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        raise TypeError(f"headers must be a list<struct<key: string, value: binary>> column, not {headers.type}")
    if not count.any():
        return None
    structs = pc.list_flatten(headers)  # null lists contribute nothing
    if structs.null_count:
        raise ValueError("a header is null: every header needs a string key")
    keys = _as_binary(structs.field("key"), len(structs), "header key")
    if keys.null_count:
        raise ValueError("a header key is null: every header needs a string key")
    values = _as_binary(structs.field("value"), len(structs), "header value")
    first = np.zeros(n, np.int64)
    np.cumsum(count[:-1], out=first[1:])
    return _Headers(count, first, keys, values, _lengths(keys), _lengths(values))


def estimate_bytes(records: ArrowRecords) -> _Ints:
    """Per record, the accumulator's upper bound of its encoded size (``estimate_record_bytes``)."""
    n = len(records)
    size = RECORD_OVERHEAD_BYTES + np.maximum(_lengths(records.key), 0) + np.maximum(_lengths(records.value), 0)
    headers = _flat_headers(records.headers, n)
    if headers is not None:
        per_header = HEADER_OVERHEAD_BYTES + headers.key_len + np.maximum(headers.value_len, 0)
        size = size + _per_record_sum(per_header, headers)
    return size


def _per_record_sum(per_header: _Ints, headers: _Headers) -> _Ints:
    cum = np.zeros(len(per_header) + 1, np.int64)
    np.cumsum(per_header, out=cum[1:])
    return cum[headers.first + headers.count] - cum[headers.first]


def batch_bounds(estimates: _Ints, max_bytes: int, overhead_bytes: int) -> _Ints:
    """Row numbers where batches start, plus the end: the accumulator's greedy rule (a record
    joins a batch while ``overhead + sizes <= max_bytes``; a batch holds at least one record)."""
    n = len(estimates)
    cum = np.zeros(n + 1, np.int64)
    np.cumsum(estimates, out=cum[1:])
    room = max_bytes - overhead_bytes
    starts = [0]
    i = 0
    while i < n:
        j = int(np.searchsorted(cum, cum[i] + room, side="right")) - 1
        i = max(j, i + 1)
        starts.append(i)
    return np.array(starts, np.int64)


def zigzag(values: _Ints) -> Any:
    """Zig-zag map int64 values to the uint64 values whose 7-bit groups a varint writes."""
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varint_sizes(z: Any) -> _Ints:
    """Bytes of the varint of each zig-zagged value."""
    size = np.ones(len(z), np.int64)
    if len(z) == 0:
        return size
    top = z.max()
    for limit in _VARINT_LIMITS:
        if top < limit:
            break
        size += z >= limit
    return size


def _put_varints(data: Any, pos: _Ints, z: Any, size: _Ints) -> None:
    """Write the varint of ``z[i]`` (``size[i]`` bytes) at ``data[pos[i]:]``."""
    widest = int(size.max()) if len(size) else 0
    if widest <= 1:
        data[pos] = z.astype(np.uint8)
        return
    # byte 0 of every varint: whole-array operations, no gather
    first = (z & np.uint64(0x7F)).astype(np.uint8)
    first |= (size > 1).astype(np.uint8) << np.uint8(7)
    data[pos] = first
    for b in range(1, widest):
        sel = np.flatnonzero(size > b)
        group = ((z[sel] >> np.uint64(7 * b)) & np.uint64(0x7F)).astype(np.uint8)
        group |= np.where(size[sel] - 1 > b, 0x80, 0).astype(np.uint8)
        data[pos[sel] + b] = group


def pack_varints(fields: list[tuple[Any, _Ints] | None]) -> pa.Array:
    """A ``large_binary`` array whose value ``i`` is the varints ``fields[k][i]`` back to back;
    a None field is the single byte 0 (a record's attributes)."""
    sizes = [np.ones(1, np.int64) if f is None else f[1] for f in fields]
    n = max(len(s) for s in sizes)
    total = np.zeros(n, np.int64)
    for s in sizes:
        total += s
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(total, out=offsets[1:])
    data = np.zeros(int(offsets[-1]), np.uint8)
    pos = offsets[:-1].copy()
    for f, s in zip(fields, sizes, strict=True):
        if f is not None:
            _put_varints(data, pos, f[0], f[1])
        pos += s
    return pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _join(*arrays: pa.Array) -> pa.Array:
    """Element-wise concatenation of binary arrays, a null being no bytes."""
    return pc.binary_join_element_wise(*arrays, _EMPTY, null_handling="replace", null_replacement=b"")


def _varint_field(values: _Ints) -> tuple[Any, _Ints]:
    z = zigzag(values)
    return z, varint_sizes(z)


@dataclass(frozen=True, slots=True)
class Sections:
    """The records sections of consecutive batches in one buffer: batch ``b`` holds rows
    ``starts[b]:starts[b+1]`` and bytes ``byte_starts[b]:byte_starts[b+1]`` of ``data``."""

    data: pa.Buffer | bytes
    starts: _Ints
    byte_starts: _Ints
    base_timestamp: _Ints
    max_timestamp: _Ints

    def section(self, b: int) -> memoryview:
        return memoryview(self.data)[int(self.byte_starts[b]) : int(self.byte_starts[b + 1])]


def encode_sections(records: ArrowRecords, starts: _Ints) -> Sections:
    """Encode all records, batch ``b`` being rows ``starts[b]:starts[b+1]`` (``starts`` ends with
    ``len(records)``); each batch's deltas are relative to its first record."""
    n = len(records)
    starts = np.asarray(starts, np.int64)
    if n == 0 or len(starts) < 2 or starts[0] != 0 or starts[-1] != n or (np.diff(starts) <= 0).any():
        raise ValueError("starts must rise strictly from 0 to the number of records (at least one record)")
    counts = np.diff(starts)
    batch_of = np.repeat(np.arange(len(counts)), counts)
    ts = records.timestamp_ms
    base_ts = ts[starts[:-1]]
    max_ts = np.maximum.reduceat(ts, starts[:-1])
    ts_delta = _varint_field(ts - base_ts[batch_of])
    off_delta = _varint_field(np.arange(n, dtype=np.int64) - starts[:-1][batch_of])
    key_len = _lengths(records.key)
    value_len = _lengths(records.value)
    klen = _varint_field(key_len)
    vlen = _varint_field(value_len)
    headers = _flat_headers(records.headers, n)
    hcount = _varint_field(np.zeros(n, np.int64) if headers is None else headers.count)
    body = 1 + ts_delta[1] + off_delta[1] + klen[1] + vlen[1] + hcount[1]
    body += np.maximum(key_len, 0) + np.maximum(value_len, 0)
    if headers is not None:
        hklen = _varint_field(headers.key_len)
        hvlen = _varint_field(headers.value_len)
        per_header = hklen[1] + headers.key_len + hvlen[1] + np.maximum(headers.value_len, 0)
        body += _per_record_sum(per_header, headers)
    length = _varint_field(body)
    record_bytes = length[1] + body

    tail = pack_varints([hcount])
    if headers is not None:
        per_header = _join(pack_varints([hklen]), headers.keys, pack_varints([hvlen]), headers.values)
        list_offsets = np.append(headers.first, len(headers.keys)).astype(np.int64)
        per_record = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(list_offsets), per_header), _EMPTY)
        tail = _join(tail, per_record)
    ordered = _join(
        pack_varints([length, None, ts_delta, off_delta, klen]), records.key, pack_varints([vlen]), records.value, tail
    )
    data_offsets = np.frombuffer(ordered.buffers()[1], np.int64)
    begin = int(data_offsets[ordered.offset])
    record_cum = np.zeros(n + 1, np.int64)
    np.cumsum(record_bytes, out=record_cum[1:])
    total = int(record_cum[-1])
    data = ordered.buffers()[2]
    if data is None:  # cannot happen: a record is at least 7 bytes
        raise AssertionError("empty records section")
    data = data.slice(begin, total)
    return Sections(data, starts, record_cum[starts], base_ts, max_ts)


def murmur2(keys: pa.Array) -> Any:
    """Kafka's ``Utils.murmur2`` of every value of a binary column (nulls hash as empty),
    as uint32; ``pyspark_log.records.murmur2`` is the per-key reference."""
    keys = _as_binary(keys, len(keys), "key")
    n = len(keys)
    offsets_buf, data_buf = keys.buffers()[1], keys.buffers()[2]
    offsets = np.frombuffer(offsets_buf, np.int64)[keys.offset : keys.offset + n + 1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return _murmur2(data, offsets[:-1], np.diff(offsets))


def murmur2_of_list(keys: list[bytes]) -> Any:
    """``murmur2`` of a list of ``bytes`` keys (no nulls), without building an Arrow array: keys
    of one length (a common key format) are hashed as the rows of a matrix, a few whole-array
    operations per 4 bytes of key; keys of mixed lengths as ``murmur2`` does."""
    n = len(keys)
    # (a list and its count: some 3x cheaper than np.fromiter over the map for a few thousand keys)
    key_lens = list(map(len, keys))
    if n and key_lens.count(key_lens[0]) == n:
        return _murmur2_fixed(np.frombuffer(b"".join(keys) + b"\0\0\0", np.uint8), n, key_lens[0])
    lens = np.array(key_lens, np.int64)
    data = np.frombuffer(b"".join(keys), np.uint8)
    starts = np.zeros(n, np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    return _murmur2(data, starts, lens)


_M = np.uint32(0x5BD1E995)
_S24 = np.uint32(24)
_LE_UINT32 = np.dtype("<u4")
_SEED = 0x9747B28C


def _murmur2(data: Any, starts: _Ints, lens: _Ints) -> Any:
    """murmur2 of the keys ``data[starts[i] : starts[i] + lens[i]]``."""
    n = len(lens)
    m = _M
    h = (np.uint32(_SEED) ^ lens.astype(np.uint32)).astype(np.uint32)
    words = lens // 4
    widest = int(words.max()) if n else 0
    with np.errstate(over="ignore"):
        for w in range(widest):
            idx = np.flatnonzero(words > w)
            p = starts[idx] + 4 * w
            k = (
                data[p].astype(np.uint32)
                | (data[p + 1].astype(np.uint32) << np.uint32(8))
                | (data[p + 2].astype(np.uint32) << np.uint32(16))
                | (data[p + 3].astype(np.uint32) << np.uint32(24))
            )
            k *= m
            k ^= k >> np.uint32(24)
            k *= m
            h[idx] = (h[idx] * m) ^ k
        rest = lens & 3
        tail = starts + (lens & ~3)
        for extra, shift in ((3, 16), (2, 8)):
            sel = np.flatnonzero(rest >= extra)
            h[sel] ^= data[tail[sel] + extra - 1].astype(np.uint32) << np.uint32(shift)
        sel = np.flatnonzero(rest >= 1)
        h[sel] ^= data[tail[sel]].astype(np.uint32)
        h[sel] *= m
        return _murmur2_finish(h)


def _murmur2_fixed(data: Any, n: int, length: int) -> Any:
    """murmur2 of ``n`` keys of ``length`` bytes each, back to back in the contiguous uint8
    array ``data``, which has at least 3 bytes more after the last key (any value)."""
    m = _M
    h = np.full(n, _SEED ^ length, np.uint32)
    words = length // 4
    u4 = _LE_UINT32
    with np.errstate(over="ignore"):
        for w in range(words):
            # word ``w`` of every key, read in place (unaligned, a row every ``length`` bytes)
            k = np.ndarray((n,), u4, data, 4 * w, (length,)) * m
            k ^= k >> _S24
            k *= m
            h *= m
            h ^= k
        rest = length & 3
        if rest:
            # the last 1-3 bytes as the low bytes of a 4-byte read; the bytes read past the key
            # (the next key's, or the padding after the last) are masked off
            h ^= np.ndarray((n,), u4, data, 4 * words, (length,)) & np.uint32((1 << 8 * rest) - 1)
            h *= m
        return _murmur2_finish(h)


def _murmur2_finish(h: Any) -> Any:
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: pa.Array | list[bytes], num_partitions: int) -> _Ints:
    """``toPositive(murmur2(key)) % num_partitions`` per key (meaningless for null keys); the
    keys an Arrow binary column or a list of ``bytes`` (``murmur2_of_list``)."""
    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    if isinstance(keys, list) and speedups.native is not None:
        return np.array(speedups.native.partition_keys(keys, num_partitions), np.int64)
    hashed = murmur2_of_list(keys) if isinstance(keys, list) else murmur2(keys)
    return ((hashed & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int64)


_KEY, _VALUE, _TIMESTAMP, _HEADERS = (attrgetter(name) for name in ("key", "value", "timestamp", "headers"))
_ROW_FIELDS = tuple(map(itemgetter, range(4)))


def records_of_rows(rows: Sequence[RecordFields] | Sequence[tuple[Any, ...]]) -> ArrowRecords:
    """The columns of ``ProducerRecord`` s, or of row tuples ``(key, value, timestamp, headers)``
    (what the producer's ``send()`` batches hold; all rows of one kind), so a batch of them is
    encoded in one pass (``encode_rows``)."""
    # (not ``zip(*rows)``: that makes an iterator per row for the garbage collector to track)
    getters = _ROW_FIELDS if rows and rows[0].__class__ is tuple else (_KEY, _VALUE, _TIMESTAMP, _HEADERS)
    keys, values, stamps, heads = (list(map(get, rows)) for get in getters)  # type: ignore[arg-type]
    timestamps = np.fromiter(stamps, np.int64, len(rows))
    headers = None
    if any(heads):
        headers = pa.array([[{"key": k, "value": v} for k, v in hs] for hs in heads], HEADERS_TYPE)
    return ArrowRecords(pa.array(keys, _BINARY), pa.array(values, _BINARY), headers, timestamps)


def encode_rows(
    rows: Sequence[RecordFields] | Sequence[tuple[Any, ...]], starts: Sequence[int] | None = None
) -> Sections:
    """The records sections ``batch.encode_batch`` writes for ``rows`` cut into batches at
    ``starts`` (default: one batch), encoded from columns in one pass."""
    return encode_sections(records_of_rows(rows), [0, len(rows)] if starts is None else starts)
