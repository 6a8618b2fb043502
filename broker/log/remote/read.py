"""Serving a fetch from a remote segment (KIP-405 "Consumer fetch from remote storage"), pure:
the offset index of the remote segment positions the read (Kafka's ``RemoteLogManager.read``
looks up ``lookupPositionForOffset`` in the fetched ``.index``), whole v2 batches are then taken
from the ranged segment stream: the batch holding the fetch offset first, then as many as fit
in ``max_bytes`` (the first one whole even when larger, KIP-74), none at or above
``max_offset``. Also the leader-epoch facts a copy records (``segment_leader_epochs`` and the
checkpoint shipped with the segment). The callers pass byte strings or a readable stream.

Offset index layout (Kafka's ``OffsetIndex``): 8-byte entries ``relative offset:int32,
position:int32`` big-endian, relative to the segment's base offset; trailing zero entries (a
preallocated file) end the index. Batch header prefix: ``base offset:int64, length:int32`` and
``last offset delta:int32`` at byte 23.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Protocol

from pyspark_log.records.batch import decode_records

_ENTRY = struct.Struct(">ii")
_HEAD = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23
_HEADER_BYTES = 61


class Readable(Protocol):
    def read(self, n: int = -1) -> bytes: ...


def index_position(index: bytes, base_offset: int, offset: int) -> int:
    """The byte position of the largest indexed offset at or below ``offset`` (0 if none)."""
    position = 0
    for pos in range(0, len(index) - _ENTRY.size + 1, _ENTRY.size):
        relative, where = _ENTRY.unpack_from(index, pos)
        if pos and relative == 0 and where == 0:
            break
        if base_offset + relative > offset:
            break
        position = where
    return position


def read_batches(
    stream: Readable, offset: int, max_bytes: int, max_offset: int | None, *, min_one_batch: bool = True
) -> tuple[bytes, int]:
    """Whole batches from ``stream`` (positioned at a batch boundary at or below ``offset``):
    ``(bytes, next offset)``; ``next offset`` is ``offset`` when nothing was taken. Batches
    ending below ``offset`` are skipped; none starting at or above ``max_offset`` is taken; the
    first one goes whole even above ``max_bytes`` only with ``min_one_batch`` (KIP-74)."""
    out: list[bytes] = []
    size = 0
    next_offset = offset
    while True:
        head = stream.read(_HEAD.size)
        if len(head) < _HEAD.size:
            break
        base, length = _HEAD.unpack(head)
        if length < _HEADER_BYTES - _HEAD.size:
            break  # not a v2 batch: the segment's end (or damage); stop here
        body = stream.read(length)
        if len(body) < length:
            break
        last = base + _LAST_DELTA.unpack_from(body, _LAST_DELTA_AT - _HEAD.size)[0]
        if last < offset:
            continue
        if max_offset is not None and base >= max_offset:
            break
        if (out or not min_one_batch) and size + _HEAD.size + length > max_bytes:
            break
        out.append(head + body)
        size += _HEAD.size + length
        next_offset = last + 1
        if size >= max_bytes:
            break
    return b"".join(out), next_offset


def offset_for_timestamp(stream: Readable, timestamp_ms: int) -> tuple[int, int] | None:
    """ListOffsets by timestamp in a remote segment (Kafka's ``RemoteLogManager.findOffsetByTimestamp``):
    ``(offset, timestamp)`` of the first record of a data batch whose timestamp is at or after
    ``timestamp_ms``, scanning batch headers (their max timestamp) and decoding only the batch
    that holds it; None when the segment has none."""
    while True:
        head = stream.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return None
        _, length = _HEAD.unpack(head)
        if length < _HEADER_BYTES - _HEAD.size:
            return None
        body = stream.read(length)
        if len(body) < length:
            return None
        header, records = decode_records(head + body, verify_crc=False)
        if header.is_control or header.max_timestamp < timestamp_ms:
            continue
        for record in records:
            if record.timestamp >= timestamp_ms:
                return record.offset, record.timestamp
    return None


def segment_leader_epochs(entries: Iterable[tuple[int, int]], start: int, end: int) -> dict[int, int]:
    """KIP-405 ``segmentLeaderEpochs``: each leader epoch with records in ``[start, end]`` and
    its first offset there, from the partition's ``(epoch, start offset)`` entries (ascending)."""
    ordered = sorted(entries, key=lambda e: e[1])
    out: dict[int, int] = {}
    for i, (epoch, first) in enumerate(ordered):
        following = ordered[i + 1][1] if i + 1 < len(ordered) else None
        if first > end or (following is not None and following <= start):
            continue
        out[epoch] = max(first, start)
    return out


def epoch_checkpoint(entries: Iterable[tuple[int, int]], end: int) -> bytes:
    """The leader-epoch checkpoint shipped with a segment (Kafka's ``LeaderEpochFileCache``
    written up to the segment's end: entries starting at or below ``end``)."""
    kept = [(e, o) for e, o in sorted(entries, key=lambda e: e[1]) if o <= end]
    lines = ["0", str(len(kept)), *(f"{e} {o}" for e, o in kept)]
    return ("\n".join(lines) + "\n").encode()
