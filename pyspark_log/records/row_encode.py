"""Records sections straight from row tuples: the producer's ``send()`` batches at drain time.

Contract: ``encode_rows(rows, starts)`` returns the same ``columnar_encode.Sections`` as
``columnar_encode.encode_rows`` — for every batch ``rows[starts[b]:starts[b+1]]`` the records
section ``batch.encode_batch`` writes for those records (record layout in ``record.py``, Kafka documentation
§5.3.2 "Record": length, attributes, timestampDelta, offsetDelta, key, value, headers), byte for byte.

Rows whose values are all ``bytes``, whose keys are all ``bytes`` or all None and that carry no
headers (what a ``send()`` stream is) take ``encode_plain_rows``; any other rows (a null value,
some keys null and some not, headers) go through the Arrow encoder
(``columnar_encode.encode_sections``). Each record is laid out as
``head key valueLen value 0x00``: ``head`` is ``length attributes(0) timestampDelta offsetDelta
keyLen`` and the trailing zero byte is the record's header count. The zero of record ``i`` is
written at the front of record ``i+1``'s head, so one ``b"".join`` of four pieces a record
writes the section, each key and value byte copied once.

The heads take a fixed number of numpy calls per call (some 30, a few microseconds each) and
no Python-level work per record beyond the C-level passes that read the rows (flatten, type and
length of keys and values, timestamps) and the join:

1. Each varint field is one uint64 per record holding its bytes, little-endian, continuation
   bits set (``_pack``: a table for values below 2**14, the offset deltas from slices of it).
2. A record's whole head (at most 16 bytes, else the Arrow encoder) is one 128-bit slot, two
   uint64s, the fields shifted into place one after the other.
3. The slots are cut into ``bytes`` by a numpy ``V<size>`` view with a 16-byte stride per run of
   heads of equal size (a view's ``tolist``), or by one ``struct`` format when runs are short.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import chain, pairwise
from operator import attrgetter
from typing import Any

import numpy as np

from pyspark_log.records import columnar_encode as ce
from pyspark_log.records import speedups
from pyspark_log.records.batch import RecordFields
from pyspark_log.records.varint import encode_varint

_FIELDS: Callable[[Any], tuple[Any, ...]] = attrgetter("key", "value", "timestamp", "headers")
_U64 = np.uint64
_TABLE_SIZE = 1 << 14  # zig-zagged values with varints of at most two bytes
_Z = np.arange(_TABLE_SIZE, dtype=_U64)
_TABLE_WORDS = np.where(_Z < 128, _Z, (_Z & 0x7F) | 0x80 | ((_Z >> 7) << 8))
_TABLE_SIZES = np.where(_Z < 128, 1, 2).astype(_U64)
# offset delta d is zig-zagged 2d
_OFFSET_WORDS = _TABLE_WORDS[0::2]
_OFFSET_SIZES = _TABLE_SIZES[0::2]
# continuation bits of a varint of s bytes: 0x80 on bytes 0 .. s-2
_CONTINUATION = np.array([sum(0x80 << (8 * j) for j in range(s - 1)) for s in range(9)], _U64)
_SLOT = 16  # bytes a head may take (two uint64s)
# struct format of a head of ``s`` bytes in its slot
_SLOT_FORMATS = [f"{s}s{_SLOT - s}x" for s in range(_SLOT + 1)]
_VOIDS = [np.dtype(f"V{s}") for s in range(1, _SLOT + 1)]
# Heads are cut run by run of equal size when runs hold this many records on average.
_RECORDS_PER_RUN = 16


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
    """The sections of rows with ``bytes`` values, ``bytes`` keys or no keys at all (all None)
    and no headers, or None for rows that have anything else, or whose record heads would take
    more than 16 bytes (timestamps hours apart in one batch with huge keys or values: the caller
    then uses the Arrow encoder). A row is a ``(key, value, timestamp, headers)`` tuple or a
    ``RecordFields``. Where the compiled ``speedups.native`` is built, a list of tuples is encoded
    by its ``encode_records`` (the same bytes; it also takes null values, some keys null and
    heads of any size)."""
    n = len(rows)
    bounds = starts.tolist() if isinstance(starts, np.ndarray) else list(starts)
    if n == 0 or len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != n or any(b <= a for a, b in pairwise(bounds)):
        raise ValueError("starts must rise strictly from 0 to the number of records (at least one record)")
    if speedups.native is not None and rows.__class__ is list:
        # compiled: one pass over the rows (it also takes null values and mixed null keys)
        encoded = speedups.native.encode_records(rows, bounds)
        if encoded is not None:
            data, byte_starts, base, top = encoded
            return ce.Sections(data, np.array(bounds, np.int64), np.array(byte_starts, np.int64), *_int64s(base, top))
    try:
        flat = list(chain.from_iterable(rows))  # type: ignore[arg-type]  # (the rows' fields in order)
    except TypeError:  # RecordFields objects among the tuples
        flat = list(chain.from_iterable(row if row.__class__ is tuple else _FIELDS(row) for row in rows))
    # (headers are tuples, equal to () when empty)
    if len(flat) != 4 * n or flat[3::4].count(()) != n:
        return None
    keys = flat[0::4]
    values = flat[1::4]
    # (each column's type and length passes back to back, while its objects are in cache)
    # the sticky partitioner's records: keyLen -1, no key bytes (keyed rows skip the count)
    null_keys = keys[0] is None and keys.count(None) == n
    if not null_keys and list(map(type, keys)).count(bytes) != n:
        return None
    key_lens = [0] if null_keys else list(map(len, keys))
    if list(map(type, values)).count(bytes) != n:
        return None
    value_lens = list(map(len, values))
    firsts = bounds[:-1]
    counts = [b - a for a, b in pairwise(bounds)]
    ts = np.fromiter(flat[2::4], np.int64, n)
    base_ts = ts[firsts]
    max_ts = np.maximum.reduceat(ts, firsts)
    ts_delta = ts - np.repeat(base_ts, counts)
    key_len: Any = key_lens[0] if null_keys or key_lens.count(key_lens[0]) == n else np.fromiter(key_lens, _U64, n)
    if value_lens.count(value_lens[0]) == n:
        value_len: Any = value_lens[0]
        value_varints = [encode_varint(value_len)] * n
        value_len_size: Any = len(value_varints[0])
    else:
        value_len = np.array(value_lens, _U64)
        value_len_size = _pack(value_len << 1)[1]
        varint_of = {size: encode_varint(size) for size in set(value_lens)}
        value_varints = list(map(varint_of.__getitem__, value_lens))
    ts_word, ts_size, ts_widest = _pack(((ts_delta << 1) ^ (ts_delta >> 63)).view(_U64))
    if null_keys:
        key_word, key_size, key_widest = _one(-1)
    else:
        key_word, key_size, key_widest = _one(key_len) if isinstance(key_len, int) else _pack(key_len << 1)
    off_word, off_size, off_widest = _offset_deltas(counts)
    # attributes, tsDelta, offDelta, keyLen, key, valueLen, value, headerCount
    body = 2 + ts_size + off_size + key_size + key_len + value_len_size + value_len
    len_word, len_size, len_widest = _pack(body << 1)
    back_widest = len_widest + 2 + ts_widest  # where offsetDelta starts, at most
    if back_widest + off_widest + key_widest > _SLOT or off_widest + key_widest > 8:
        return None
    record_cum = np.zeros(n + 1, _U64)
    np.cumsum(len_size + body, out=record_cum[1:])

    # head: 0 (previous record's headerCount), length, 0 (attributes), tsDelta | offDelta, keyLen
    slots = np.empty((n, 2), _U64)
    front = len_size + 2
    back_at = front + ts_size
    back = off_word | (key_word << 8 * off_size)
    np.bitwise_or((len_word << 8) | (ts_word << 8 * front), back << 8 * back_at, out=slots[:, 0])
    # (numpy shifts of 64 bits or more give 0; front is 3 to 7 bytes)
    if back_widest <= 8:
        np.bitwise_or(ts_word >> 64 - 8 * front, back >> 64 - 8 * back_at, out=slots[:, 1])
    else:
        upper = (back >> 64 - 8 * np.minimum(back_at, 8)) << 8 * (np.maximum(back_at, 8) - 8)
        np.bitwise_or(ts_word >> 64 - 8 * front, upper, out=slots[:, 1])
    head_size = back_at + off_size + key_size  # (an array: off_size is one)
    heads = _cut(slots, head_size)
    heads[0] = heads[0][1:]  # the first record has no previous header count

    parts: list[bytes] = [b""] * (4 * n)
    parts[0::4] = heads
    if not null_keys:
        parts[1::4] = keys
    parts[2::4] = value_varints
    parts[3::4] = values
    parts.append(b"\x00")
    data = b"".join(parts)
    if len(data) != record_cum[-1]:  # the sizes above and the bytes written disagree: a bug
        raise AssertionError(f"records section of {len(data)} bytes, expected {int(record_cum[-1])}")
    return ce.Sections(data, np.array(bounds, np.int64), record_cum[bounds].astype(np.int64), base_ts, max_ts)


def _int64s(*columns: list[int]) -> list[Any]:
    return [np.array(c, np.int64) for c in columns]


def _pack(z: Any) -> tuple[Any, Any, int]:
    """The varints of zig-zagged values ``z`` (uint64): uint64 words of their bytes
    (little-endian), their sizes (the int 1 when all are one byte) and the largest size. A
    varint over 8 bytes (a timestamp delta of 2**55 ms) counts as 17 bytes: it does not fit."""
    top = int(z.max())
    if top < 128:
        return z, 1, 1
    if top < _TABLE_SIZE:
        return _TABLE_WORDS[z], _TABLE_SIZES[z], 2
    if top >= 1 << 56:
        return z, 1, _SLOT + 1
    size = np.ones(len(z), _U64)
    word = z & 0x7F
    k = 1
    while top >> 7 * k:
        size += z >= 1 << 7 * k
        word |= ((z >> 7 * k) & 0x7F) << 8 * k
        k += 1
    return word | _CONTINUATION[size], size, k


def _one(length: int) -> tuple[int, int, int]:
    """``_pack`` of one length shared by all records."""
    varint = encode_varint(length)
    return int.from_bytes(varint, "little"), len(varint), len(varint)


def _offset_deltas(counts: list[int]) -> tuple[Any, Any, int]:
    """``_pack`` of the offset deltas of batches of ``counts`` records."""
    widest = max(counts)
    if widest <= len(_OFFSET_WORDS):
        widest = 1 if widest <= 64 else 2
        if len(counts) == 1:
            return _OFFSET_WORDS[: counts[0]], _OFFSET_SIZES[: counts[0]], widest
        words = np.concatenate([_OFFSET_WORDS[:c] for c in counts])
        return words, np.concatenate([_OFFSET_SIZES[:c] for c in counts]), widest
    firsts = np.cumsum([0, *counts[:-1]]).astype(_U64)
    return _pack((np.arange(sum(counts), dtype=_U64) - np.repeat(firsts, counts)) << 1)


def _cut(slots: Any, sizes: Any) -> list[bytes]:
    """The first ``sizes[i]`` bytes of each 16-byte row of ``slots``, as ``bytes``."""
    n = len(sizes)
    run_starts = np.flatnonzero(sizes[1:] != sizes[:-1]) + 1
    if len(run_starts) * _RECORDS_PER_RUN > n:
        fmt = "<" + "".join(map(_SLOT_FORMATS.__getitem__, sizes.tolist()))
        return list(struct.unpack_from(fmt, slots))
    out: list[bytes] = []
    lo = 0
    for hi in (*run_starts.tolist(), n):
        out += np.ndarray((hi - lo,), _VOIDS[int(sizes[lo]) - 1], slots, lo * _SLOT, (_SLOT,)).tolist()
        lo = hi
    return out
