"""Records sections straight from row tuples: the producer's ``send()`` batches at drain time.

Contract: ``encode_rows(rows, starts)`` returns the same ``columnar_encode.Sections`` as
``columnar_encode.encode_rows`` — for every batch ``rows[starts[b]:starts[b+1]]`` the records
section ``batch.encode_batch`` writes for those records (record layout in ``record.py``, seed
002 §5.3.2: length, attributes, timestampDelta, offsetDelta, key, value, headers), byte for byte.

Rows whose keys and values are all bytes and that carry no headers (what a keyed ``send()``
stream is) take ``encode_plain_rows``: the varint fields of every record are computed with numpy
(``columnar_encode.pack_varints``), cut into one small ``bytes`` per record, and one
``b"".join`` interleaves them with the keys and values, so each key and value byte is copied
once and no Arrow array of the values is built. Any other rows (a null key or value, headers)
go through the Arrow encoder (``columnar_encode.encode_sections``).

Each record's fields are laid out as ``head key valueLen value 0x00``: ``head`` is
``length attributes(0) timestampDelta offsetDelta keyLen`` and the trailing zero byte is the
record's header count. The zero of record ``i`` is written at the front of record ``i+1``'s head,
so the join takes four pieces per record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from pyspark_log.records import columnar_encode as ce
from pyspark_log.records.batch import RecordFields
from pyspark_log.records.varint import encode_varint

_ROW_FIELDS: tuple[Callable[[Any], Any], ...] = tuple(map(itemgetter, range(4)))
_FIELDS: tuple[Callable[[Any], Any], ...] = tuple(map(attrgetter, ("key", "value", "timestamp", "headers")))
_BYTES = {bytes}
# struct format fields of a head's size (at most 1 + 5 + 1 + 10 + 5 + 5 bytes)
_BYTES_FORMATS = [f"{size}s" for size in range(64)]


def encode_rows(rows: Sequence[RecordFields] | Sequence[tuple[Any, ...]], starts: Sequence[int]) -> ce.Sections:
    """The records sections of ``rows`` cut into batches at ``starts`` (from 0 to ``len(rows)``,
    strictly rising): ``encode_plain_rows`` when it applies, else the Arrow encoder."""
    out = encode_plain_rows(rows, starts)
    if out is None:
        out = ce.encode_sections(ce.records_of_rows(rows), starts)
    return out


def encode_plain_rows(
    rows: Sequence[RecordFields] | Sequence[tuple[Any, ...]], starts: Sequence[int]
) -> ce.Sections | None:
    """The sections of rows with ``bytes`` keys and values and no headers, or None for rows
    that have anything else (the caller then uses the Arrow encoder)."""
    n = len(rows)
    bounds = np.asarray(starts, np.int64)
    if n == 0 or len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != n or (np.diff(bounds) <= 0).any():
        raise ValueError("starts must rise strictly from 0 to the number of records (at least one record)")
    getters = _ROW_FIELDS if rows[0].__class__ is tuple else _FIELDS
    if any(map(getters[3], rows)):  # headers
        return None
    keys, values, stamps = (list(map(get, rows)) for get in getters[:3])
    if set(map(type, keys)) != _BYTES or set(map(type, values)) != _BYTES:
        return None
    key_len = np.fromiter(map(len, keys), np.int64, n)
    value_lens = list(map(len, values))
    value_len = np.array(value_lens, np.int64)
    ts = np.fromiter(stamps, np.int64, n)
    counts = np.diff(bounds)
    firsts = bounds[:-1]
    batch_of = np.repeat(np.arange(len(counts)), counts)
    base_ts = ts[firsts]
    max_ts = np.maximum.reduceat(ts, firsts)
    ts_delta = ce._varint_field(ts - base_ts[batch_of])
    off_delta = ce._varint_field(np.arange(n, dtype=np.int64) - firsts[batch_of])
    klen = ce._varint_field(key_len)
    vlen = ce._varint_field(value_len)
    # attributes(1) + headerCount(1, zero headers)
    body = 2 + ts_delta[1] + off_delta[1] + klen[1] + vlen[1] + key_len + value_len
    length = ce._varint_field(body)
    record_cum = np.zeros(n + 1, np.int64)
    np.cumsum(length[1] + body, out=record_cum[1:])

    # Every head starts with the previous record's header count (0); the first one's is cut off.
    packed = ce.pack_varints([None, length, None, ts_delta, off_delta, klen])
    head_sizes = np.diff(np.frombuffer(packed.buffers()[1], np.int64))
    head_sizes[0] -= 1
    blob = packed.buffers()[2].to_pybytes()
    # all heads cut out by one struct format of ``<size>s`` fields (half the cost of slicing)
    head_bytes = struct.Struct("<" + "".join(map(_BYTES_FORMATS.__getitem__, head_sizes.tolist()))).unpack_from(blob, 1)
    varints = {size: encode_varint(size) for size in set(value_lens)}
    parts: list[bytes] = [b""] * (4 * n)
    parts[0::4] = head_bytes
    parts[1::4] = keys
    parts[2::4] = list(map(varints.__getitem__, value_lens))
    parts[3::4] = values
    parts.append(b"\x00")
    data = b"".join(parts)
    if len(data) != record_cum[-1]:  # the sizes above and the bytes written disagree: a bug
        raise AssertionError(f"records section of {len(data)} bytes, expected {int(record_cum[-1])}")
    return ce.Sections(data, bounds, record_cum[bounds], base_ts, max_ts)
