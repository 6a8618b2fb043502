"""The sparse offset index ``<base offset>.index``: relative offset → file position.

Layout (Kafka ``OffsetIndex``; big-endian, 8 bytes per entry, nothing else in the file)::

    offset size field
    0      4    relativeOffset  int32   offset - segment base offset (the LAST offset of a batch)
    4      4    position        int32   byte position of that batch in the .log file

An entry is added for a batch when more than ``index.interval.bytes`` were appended since the
previous entry (Kafka documentation §5.4.2 "Reads": "locate the log segment ... then read from that file position";
a lookup is a binary search). Both columns strictly increase.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

from broker.log.config import INT_MAX
from broker.log.index_file import CorruptIndexError, IndexFile, strictly_increasing

ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    """In-memory mirror of one ``.index`` file (see ``IndexFile`` for persistence)."""

    ENTRY_SIZE = ENTRY.size
    KEY_TYPECODE = "i"

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        return flat[0::2], flat[1::2]

    def _encode(self, start: int, stop: int) -> bytes:
        flat = array("i", bytes(8 * (stop - start)))
        flat[0::2] = self._keys[start:stop]
        flat[1::2] = self._values[start:stop]
        if sys.byteorder == "little":
            flat.byteswap()
        return flat.tobytes()

    def _check(self, keys: array[int], values: array[int]) -> None:
        if keys and (keys[0] < 0 or values[0] < 0):
            raise CorruptIndexError(f"{self.path}: negative first entry")
        if not strictly_increasing(keys) or not strictly_increasing(values):
            raise CorruptIndexError(f"{self.path}: entries are not strictly increasing")

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` (a batch's last offset) at byte ``position``; must exceed the last entry."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        assert 0 <= relative <= INT_MAX, f"offset {offset} not relative to {self.base_offset}"
        assert not self._keys or (relative > self._keys[-1] and position > self._values[-1])
        self._append(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset ≤ ``offset`` as ``(offset, position)``, else
        ``(base_offset, 0)``: a read for ``offset`` may start scanning batches there."""
        self._ensure_loaded()
        relative = min(offset - self.base_offset, INT_MAX)
        slot = bisect_right(self._keys, relative) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._values[slot]

    def floor_position(self, position: int) -> tuple[int, int] | None:
        """The entry with the largest position ≤ ``position`` as ``(offset, position)``, or None."""
        self._ensure_loaded()
        slot = bisect_right(self._values, position) - 1
        if slot < 0:
            return None
        return self.base_offset + self._keys[slot], self._values[slot]

    def last_entry(self) -> tuple[int, int] | None:
        self._ensure_loaded()
        if not self._keys:
            return None
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ ``offset``."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._keys, offset - self.base_offset))

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry whose position is ≥ ``position`` (the log was cut there)."""
        self._ensure_loaded()
        self._truncate_entries(bisect_left(self._values, position))
