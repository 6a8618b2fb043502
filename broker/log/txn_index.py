"""The aborted-transaction index of one segment: ``<base offset>.txnindex`` (KIP-98; Kafka ``TransactionIndex``).

Kafka documentation §4.6 "Message Delivery Semantics", transactions: control messages tell readers whether a
transaction's messages were
committed or aborted. A read_committed fetch must name every aborted transaction whose data it
returns, without reading the data; this index answers that. One entry is appended to the segment
that receives an ABORT marker, for the transaction that marker ends. Layout (Kafka's, 34 bytes
per entry, big-endian)::

    version          int16   0
    producerId       int64
    firstOffset      int64   offset of the transaction's first batch in this partition
    lastOffset       int64   offset of the ABORT marker
    lastStableOffset int64   the partition's LSO once the marker is written: the first offset
                             of the earliest other ongoing transaction, else lastOffset + 1

Entries are in marker order, so their ``lastOffset`` increases. The file exists only once a
segment holds an ABORT marker. It is written with ``pwrite`` at the in-memory size and read in
full on first use (entries are few); nothing is fsynced until ``flush`` (the segment calls it
when it stops being active; the active segment's index is rebuilt by recovery after a crash).
``TransactionIndex`` alone touches this file; it takes no lock (one asyncio loop calls it).
Raises OSError on I/O errors and ``CorruptIndexError`` from ``sanity_check``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from broker.log.index_file import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    """One aborted transaction of a partition (an entry of the index; Fetch returns
    ``(producer_id, first_offset)`` of those overlapping the data it sends)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The ``.txnindex`` file at ``path``; entries are kept in memory once read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # None until read
        self._fd = -1
        self._dirty = False

    # -- reading -------------------------------------------------------------------------------
    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (read from the file on first use). A torn last entry
        (a crash in the middle of an append) is ignored; ``sanity_check`` reports it."""
        if self._entries is None:
            self._entries = list(_parse(self._read_file()))
        return self._entries

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions that overlap ``[fetch_offset, upper_bound_offset)``, and whether
        the search is complete: an entry whose LSO is at or past the upper bound proves that no
        later segment holds an overlapping one (Kafka ``TransactionIndex.collectAbortedTxns``)."""
        found: list[AbortedTxn] = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def sanity_check(self, base_offset: int) -> None:
        """Raise CorruptIndexError unless the file is whole entries of version 0 whose last
        offsets lie in this segment and increase."""
        data = self._read_file()
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
        previous = -1
        for pos in range(0, len(data), ENTRY_SIZE):
            version, _, first, last, _ = ENTRY.unpack_from(data, pos)
            if version != TXN_INDEX_VERSION or last < base_offset or last <= previous or first > last:
                raise CorruptIndexError(f"{self.path}: entry at byte {pos} is invalid")
            previous = last
        self._entries = list(_parse(data))

    # -- writing -------------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end (``txn.last_offset`` must exceed the last entry's)."""
        entries = self.entries
        assert not entries or txn.last_offset > entries[-1].last_offset, f"{self.path}: {txn} out of order"
        fd = self._open()
        size = len(entries) * ENTRY_SIZE
        data = ENTRY.pack(TXN_INDEX_VERSION, *txn)
        written = os.pwrite(fd, data, size)
        assert written == ENTRY_SIZE, f"short write to {self.path}"
        entries.append(txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (log truncation)."""
        entries = self.entries
        keep = sum(1 for txn in entries if txn.last_offset < offset)
        if keep == len(entries):
            return
        del entries[keep:]
        os.truncate(self.path, keep * ENTRY_SIZE)
        self._dirty = True

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them from the log)."""
        self.close()
        self.path.unlink(missing_ok=True)
        self._entries = []
        self._dirty = False

    def flush(self) -> None:
        """fsync the file if entries were written since the last flush."""
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
        self._dirty = False

    def take_unsynced(self) -> int | None:
        """The open descriptor to fsync when entries were written since the last flush (the
        caller, a ``FlushJob``, duplicates it), else None; the index counts as synced from here."""
        fd = self._fd if self._dirty and self._fd >= 0 else None
        self._dirty = False
        return fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd


def _parse(data: bytes) -> Iterable[AbortedTxn]:
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        _, producer_id, first, last, lso = ENTRY.unpack_from(data, pos)
        yield AbortedTxn(producer_id, first, last, lso)
