"""``LogSegments``: a partition log's segments in offset order, with their base offsets (Kafka's
``LogSegments``), and the aborted transactions their ``.txnindex`` files hold.

Kafka documentation §5.4 "Log": a log is a sequence of segment files, each named by the offset
of its first message; a read locates the segment holding an offset "by a simple binary search"
over the base offsets kept in memory, and appends go to the last, *active* segment. This class
is that list and that search: ``floor`` and ``from_offset`` find segments by offset, ``add``,
``truncate_to``, ``remove_first``, ``replace`` and ``reset`` change the list (they never touch a
segment's files beyond truncating the one holding the cut: deleting the removed ones is the
``Log``'s job, as is creating new ones). It always holds at least one segment.

Aborted transactions (KIP-98; Kafka ``LocalLog.collectAbortedTransactions``): each segment's
``.txnindex`` lists the transactions whose ABORT marker it holds. ``index_aborted`` adds to one
and ``collect_aborted_transactions`` answers a read_committed fetch from the segment holding its
start offset onwards; ``last_abort_offset`` (the newest indexed marker's offset, or above it
after a compaction or retention removed it) lets a fetch past it skip the search.

Iterating yields a snapshot (a change meanwhile does not disturb the loop). One asyncio loop
uses it, through its ``Log``; it takes no lock.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from broker.log.segment import LogSegment
from broker.log.txn_index import AbortedTxn


class LogSegments(Sequence[LogSegment]):
    """The segments of one partition log, by base offset; the last is the active segment."""

    __slots__ = ("_bases", "_list", "last_abort_offset")

    def __init__(self, segments: Iterable[LogSegment]) -> None:
        self._list = list(segments)
        assert self._list, "a log has at least one segment"
        self._bases = [s.base_offset for s in self._list]
        assert self._bases == sorted(set(self._bases)), f"segment bases out of order: {self._bases}"
        self.last_abort_offset = self._newest_abort()

    # -- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._list)

    @overload
    def __getitem__(self, index: int) -> LogSegment: ...
    @overload
    def __getitem__(self, index: slice) -> list[LogSegment]: ...
    def __getitem__(self, index: int | slice) -> LogSegment | list[LogSegment]:
        return self._list[index]

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(tuple(self._list))

    def __repr__(self) -> str:
        return f"LogSegments({self._bases})"

    @property
    def active(self) -> LogSegment:
        """The last segment, the one appends go to."""
        return self._list[-1]

    @property
    def first(self) -> LogSegment:
        return self._list[0]

    @property
    def next_offset(self) -> int:
        """The offset after the last batch: the log end offset."""
        return self._list[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._list)

    def floor(self, offset: int) -> LogSegment:
        """The segment that holds ``offset``: the last one whose base is at or below it (the first
        segment for an offset below every base; Kafka ``floorSegment``)."""
        index = bisect_right(self._bases, offset) - 1
        return self._list[index if index > 0 else 0]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (as ``floor``) and every later one, in order."""
        index = bisect_right(self._bases, offset) - 1
        return self._list[index if index > 0 else 0 :]

    def above(self, offset: int) -> list[LogSegment]:
        """The segments whose base is above ``offset`` (what ``truncate_to(offset)`` removes)."""
        return self._list[bisect_right(self._bases, offset) :]

    def with_base(self, base_offset: int) -> LogSegment | None:
        """The segment whose base offset is ``base_offset``, if the log still has it."""
        index = bisect_left(self._bases, base_offset)
        if index < len(self._bases) and self._bases[index] == base_offset:
            return self._list[index]
        return None

    # -- changes -------------------------------------------------------------------------------
    def add(self, segment: LogSegment) -> LogSegment | None:
        """Make ``segment``, whose base is above every offset of the log, the active segment (a
        roll). An empty active segment it follows is removed and returned (the caller deletes its
        files); None otherwise."""
        active = self._list[-1]
        assert segment.base_offset >= active.next_offset, f"{segment.base_offset} is below the log end"
        replaced = None
        if active.size_bytes == 0:
            assert segment.base_offset != active.base_offset
            replaced = self._list.pop()
            self._bases.pop()
        self._list.append(segment)
        self._bases.append(segment.base_offset)
        return replaced

    def truncate_to(self, offset: int, now_ms: int) -> None:
        """Remove every batch from the one holding ``offset`` on (``offset`` at or above the first
        base): the segments ``above(offset)`` leave the list (the caller deleted their files
        first), the one holding it is truncated (its indexes too) and becomes the active segment.
        Raises OSError when truncating its files fails."""
        assert offset >= self._bases[0], f"cannot truncate to {offset}, below the first segment"
        keep = bisect_right(self._bases, offset)
        del self._list[keep:]
        del self._bases[keep:]
        self._list[-1].truncate_to(offset, now_ms)
        self.last_abort_offset = self._newest_abort()

    def reset(self, segment: LogSegment) -> list[LogSegment]:
        """Replace every segment with ``segment`` (an emptied log); returns the removed ones."""
        removed = self._list
        self._list = [segment]
        self._bases = [segment.base_offset]
        self.last_abort_offset = self._newest_abort()
        return removed

    def remove_first(self, count: int) -> list[LogSegment]:
        """Remove and return the ``count`` oldest segments (retention); the active one stays."""
        assert 0 <= count < len(self._list), f"cannot remove {count} of {len(self._list)} segments"
        removed = self._list[:count]
        del self._list[:count]
        del self._bases[:count]
        return removed

    def replace(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put ``new`` in the place of ``old``, consecutive segments before the active one (log
        compaction swaps in a cleaned segment; Kafka ``replaceSegments``)."""
        first = next(i for i, s in enumerate(self._list) if s is old[0])
        assert all(a is b for a, b in zip(self._list[first : first + len(old)], old, strict=True))
        assert first + len(old) < len(self._list), "the active segment is never replaced"
        self._list[first : first + len(old)] = [new]
        self._bases[first : first + len(old)] = [new.base_offset]

    # -- aborted transactions ------------------------------------------------------------------
    def index_aborted(self, aborted: Sequence[AbortedTxn], segment: LogSegment | None = None) -> None:
        """Add ``aborted`` (in marker order) to the ``.txnindex`` of ``segment``, the one holding
        their markers (default: the active segment). Raises OSError when a write fails."""
        index = (self._list[-1] if segment is None else segment).txn_index
        for txn in aborted:
            index.append(txn)
        if aborted:
            self.last_abort_offset = max(self.last_abort_offset, aborted[-1].last_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` (what a
        read_committed fetch of that range returns; Kafka ``collectAbortedTransactions``): the
        ``.txnindex`` of the segment holding ``start_offset`` and of later ones, until an entry's
        LSO reaches the upper bound (no later marker can then end an overlapping transaction).
        Nothing to look for past the newest ABORT marker."""
        if start_offset > self.last_abort_offset:
            return []
        found: list[AbortedTxn] = []
        for segment in self.from_offset(start_offset):
            entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found

    def _newest_abort(self) -> int:
        """The newest ABORT marker's offset, from the newest ``.txnindex`` with entries (-1: none)."""
        for segment in reversed(self._list):
            entries = segment.txn_index.entries
            if entries:
                return entries[-1].last_offset
        return -1
