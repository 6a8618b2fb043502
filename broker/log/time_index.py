"""The time index ``<base offset>.timeindex``: max timestamp so far → relative offset.

Layout (Kafka ``TimeIndex``; big-endian, 12 bytes per entry, nothing else in the file)::

    offset size field
    0      8    timestamp       int64   the largest timestamp appended up to this point
    8      4    relativeOffset  int32   the (last) offset of the batch that carried it

An entry is appended alongside each offset-index entry when the timestamp grew, and once more
when the segment stops being active, so the last entry holds the segment's largest timestamp
(Kafka documentation §5.4.3 "Deletes": time retention compares against "the largest timestamp in the segment file").
Timestamps strictly increase, offsets never decrease.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

from broker.log.config import INT_MAX
from broker.log.index_file import CorruptIndexError, IndexFile, non_decreasing, strictly_increasing

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """In-memory mirror of one ``.timeindex`` file (see ``IndexFile`` for persistence)."""

    ENTRY_SIZE = ENTRY.size
    KEY_TYPECODE = "q"

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        stamps: array[int] = array("q")
        offsets: array[int] = array("i")
        for ts, rel in ENTRY.iter_unpack(data):
            stamps.append(ts)
            offsets.append(rel)
        return stamps, offsets

    def _encode(self, start: int, stop: int) -> bytes:
        out = bytearray(ENTRY.size * (stop - start))
        for i in range(start, stop):
            ENTRY.pack_into(out, (i - start) * ENTRY.size, self._keys[i], self._values[i])
        return bytes(out)

    def _check(self, keys: array[int], values: array[int]) -> None:
        if values and values[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative relative offset")
        if not strictly_increasing(keys) or not non_decreasing(values):
            raise CorruptIndexError(f"{self.path}: entries are out of order")

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is larger than the last entry's."""
        self._ensure_loaded()
        if timestamp == NO_TIMESTAMP or (self._keys and timestamp <= self._keys[-1]):
            return
        if not skip_full_check and len(self._keys) >= self.max_entries:
            return
        relative = offset - self.base_offset
        assert 0 <= relative <= INT_MAX, f"offset {offset} not relative to {self.base_offset}"
        if self._values and relative < self._values[-1]:
            relative = self._values[-1]
        self._append(timestamp, relative)

    def lookup_before(self, timestamp: int) -> int:
        """The offset of the entry with the largest timestamp strictly below ``timestamp``, else
        the base offset. Every batch up to that offset's batch has max timestamp < ``timestamp``,
        so a search for the first record with timestamp ≥ ``timestamp`` may start there."""
        self._ensure_loaded()
        slot = bisect_left(self._keys, timestamp) - 1
        if slot < 0:
            return self.base_offset
        return self.base_offset + self._values[slot]

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)``."""
        self._ensure_loaded()
        if not self._keys:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ ``offset``."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._values, offset - self.base_offset))
