"""The offset map of the dirty head: key hash → latest offset, 24 bytes per entry.

Kafka documentation §4.8 "Log Compaction" "Log Compaction Details" step 2 and 4: build a compact summary of
the last offset of each key in the log head and that summary is a dense hash table with exactly 24 bytes per
entry.

Layout: one flat numpy ``int64`` array of ``3 × slots`` (Kafka's ``SkimpyOffsetMap``): slot ``i``
is ``[hash_hi, hash_lo, offset]`` — the 16-byte MD5 digest of the key as two int64 and the
offset (−1 marks an empty slot; offsets are never negative). ``slots`` is the memory given
(``log.cleaner.dedupe.buffer.size`` / ``log.cleaner.threads``) divided by 24; the map counts as
full once ``slots × log.cleaner.io.buffer.load.factor`` keys are in it, so probes stay short.

Collisions: two keys whose slot index collides are told apart by their digests (linear
probing); two keys with the same 128-bit digest count as one key, as in Kafka (the chance is
negligible). A full map makes the clean partial: the cleaner stops adding batches when the next
one might not fit, and cleans only up to the last offset the map covers (``latest_offset``).

Not thread-safe: one cleaner worker owns a map and reuses it (``clear``) clean after clean.
"""

from __future__ import annotations

import hashlib
import struct
import time

import numpy as np

BYTES_PER_ENTRY = 24
_TWO_LONGS = struct.Struct(">qq")
CLEAR_CHUNK = 512 * 1024  # int64 cells (4 MiB) emptied between GIL releases
EMPTY = -1


def key_digest(key: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The key's MD5 digest as two signed 64-bit integers (big-endian halves)."""
    hi, lo = _TWO_LONGS.unpack(hashlib.md5(key, usedforsecurity=False).digest())
    return hi, lo


class OffsetMap:
    """Open-addressing table of ``memory_bytes // 24`` slots; see the module docstring."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.slots = memory_bytes // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory_bytes}")
        self.max_entries = max(1, int(self.slots * load_factor))
        self.array = np.empty(3 * self.slots, dtype=np.int64)
        self._cells = memoryview(self.array.data).cast("B").cast("q")  # plain ints, faster than numpy scalars
        self.size = 0
        self.latest_offset = -1  # the largest offset ``put`` was given (−1: none)
        self.lookups = 0
        self.probes = 0
        self.clear()

    @property
    def memory_bytes(self) -> int:
        return int(self.array.nbytes)

    @property
    def is_full(self) -> bool:
        return self.size >= self.max_entries

    @property
    def free_entries(self) -> int:
        return self.max_entries - self.size

    def clear(self) -> None:
        """Empty every slot, a few MiB at a time with a GIL release between (a cleaner thread
        must not hold the interpreter for the whole buffer while the event loop waits)."""
        array = self.array
        for start in range(0, len(array), CLEAR_CHUNK):
            array[start : start + CLEAR_CHUNK].fill(EMPTY)
            time.sleep(0)
        self.size = 0
        self.latest_offset = -1
        self.lookups = self.probes = 0

    def _find(self, hi: int, lo: int) -> int:
        """Index of the slot holding ``(hi, lo)`` or of the empty slot where it would go."""
        cells = self._cells
        slots = self.slots
        i = (hi ^ lo) % slots
        self.lookups += 1
        while True:
            base = 3 * i
            if cells[base + 2] == EMPTY or (cells[base] == hi and cells[base + 1] == lo):
                return base
            self.probes += 1
            i += 1
            if i == slots:
                i = 0

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the key's latest. Raises OverflowError when a new key finds the
        map full (callers check ``free_entries`` before a batch)."""
        self.put_digest(*key_digest(key), offset)

    def put_digest(self, hi: int, lo: int, offset: int) -> None:
        assert offset >= 0, "offsets are not negative"
        cells = self._cells
        base = self._find(hi, lo)
        if cells[base + 2] == EMPTY:
            if self.size >= self.max_entries:
                raise OverflowError(f"offset map full at {self.size} entries")
            cells[base] = hi
            cells[base + 1] = lo
            self.size += 1
        cells[base + 2] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The key's latest offset, or −1 when the map does not hold the key."""
        return self.get_digest(*key_digest(key))

    def get_digest(self, hi: int, lo: int) -> int:
        return self._cells[self._find(hi, lo) + 2]
