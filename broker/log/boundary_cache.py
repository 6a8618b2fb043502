"""The batch-boundary cache of one log, under a budget shared by every log of the process.

A read starts where an append or an earlier read ended, almost always (a follower's or a
consumer's next fetch offset is the end of its previous read; a tailing reader's is the end of the
newest append). The log remembers those ends, ``offset -> (segment base offset, byte position)``,
so a fetch neither searches the offset index nor scans the segment for where its batch starts
(Kafka documentation §5.4.2 "Reads": a read first finds the segment file holding the offset, computes the
file-specific offset, then reads from that file position; this skips the last two steps for the
offsets reads actually ask for).

Each entry costs about 200 bytes of Python objects. A fixed size per log (it was 4,096 entries)
multiplies by the number of partitions: 10,000 busy partitions held 8 GB. So the entries of all
open caches share one budget, ``TOTAL_ENTRIES`` (about 50 MB): a cache holds at most
``TOTAL_ENTRIES // open caches`` entries, never more than ``MAX_ENTRIES`` (plenty for a partition
with hundreds of readers at different offsets) nor fewer than ``MIN_ENTRIES`` (enough for the
followers and a few consumer groups of a partition on a broker with very many). A cache over its
share drops its oldest entries at its next insert; a miss costs an index lookup, never a wrong
answer. The budget is counted per process, since each broker is one.

Entries are tuples of ints only, so the garbage collector untracks them at their first young
collection and full collections never traverse the cache (project rule: nothing over a
millisecond on the loop between requests).
"""

from __future__ import annotations

from typing import ClassVar

TOTAL_ENTRIES = 262_144
MAX_ENTRIES = 4096
MIN_ENTRIES = 64


class BoundaryCache:
    """``offset -> (segment base offset, position)`` of batch boundaries of one log; insertion
    ordered, oldest dropped first. ``close`` gives its share of the budget back."""

    __slots__ = ("_closed", "_entries")

    _open: ClassVar[int] = 0  # caches open in this process
    _capacity: ClassVar[int] = MAX_ENTRIES  # each one's share, recomputed as caches open and close

    def __init__(self) -> None:
        self._entries: dict[int, tuple[int, int]] = {}
        self._closed = False
        BoundaryCache._open += 1
        BoundaryCache._share()

    @staticmethod
    def _share() -> None:
        BoundaryCache._capacity = max(MIN_ENTRIES, min(MAX_ENTRIES, TOTAL_ENTRIES // max(BoundaryCache._open, 1)))

    @classmethod
    def capacity(cls) -> int:
        """How many entries each open cache may hold now."""
        return cls._capacity

    def get(self, offset: int) -> tuple[int, int] | None:
        return self._entries.get(offset)

    def put(self, offset: int, segment_base: int, position: int) -> None:
        entries = self._entries
        entries[offset] = (segment_base, position)
        if len(entries) > BoundaryCache._capacity:
            excess = len(entries) - BoundaryCache._capacity
            oldest = iter(entries)
            for stale in [next(oldest) for _ in range(excess)]:
                del entries[stale]

    def __del__(self) -> None:  # a log dropped without close() must not keep its share
        self.close()

    def clear(self) -> None:
        self._entries.clear()

    def close(self) -> None:
        """Empty the cache and give its share back (idempotent)."""
        self._entries.clear()
        if not self._closed:
            self._closed = True
            BoundaryCache._open -= 1
            BoundaryCache._share()

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[tuple[int, int]]:
        return list(self._entries.values())
