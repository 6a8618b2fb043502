"""Read a partition's records straight from its segment files: the parsing and the file walk,
without Spark and without the broker.

The on-disk layout a pylog (and an Apache Kafka) broker writes in each log dir (Kafka
documentation §5.4 "Log"; the broker's ``broker/log`` package writes it)::

    <log dir>/meta.properties                 version, cluster.id, node.id of the owning broker
    <log dir>/<topic>-<partition>/
        <base offset, 20 digits>.log          RecordBatch v2 batches back to back, as produced
        <base offset>.index                   sparse offset index: (int32 relative last offset of
                                              a batch, int32 byte position of that batch), BE
        <base offset>.timeindex               (unused here)
        <base offset>.txnindex                aborted transactions (KIP-98), 34 bytes an entry:
                                              int16 version, int64 producerId, int64 firstOffset,
                                              int64 lastOffset (the ABORT marker), int64 LSO
        leader-epoch-checkpoint               (unused here)
        *.deleted  *.cleaned  *.swap  *.tmp   retention's and the cleaner's files in flight:
                                              never read (only exact ``<20 digits>.log`` names are)

Pure helpers parse names and index bytes (``segment_bases``, ``parse_offset_index``,
``index_floor``, ``parse_txn_index``, ``aborted_overlapping``, ``parse_properties``).
``PartitionFiles`` is the only part that touches files: it opens them ``O_RDONLY``, takes no
lock and writes nothing, so it may run beside a live broker (and on another host, over a shared
filesystem). What it promises:

* it returns whole batches of ``[start, end)`` as the decoder needs them: ``read`` yields
  ``FileChunk`` s (raw batch bytes with the aborted transactions that overlap them, as a Fetch
  response carries them), so the caller decodes with the fetch path's decoder;
* the offset index only positions the scan: an entry is checked against the batch header it
  points at and ignored when it does not match (an index the cleaner rebuilt, a stale one);
* a segment file it holds open stays readable after retention or the cleaner renames or
  deletes it (POSIX keeps the inode); the first segment is found under a fresh listing when
  its file vanished before the open, but once a read is under way the next segment is opened by
  name, and one that is gone raises ``FilesUnavailable`` with the offset reached (a fresh listing
  could offer a later file while the cleaner's new one, which holds the offsets between, is
  still being swapped in), and so do files that end before ``end`` (a lagging replica, a shared
  filesystem whose attribute cache lags): the caller reads the rest through the broker.

The caller bounds ``end`` by what the broker reported committed (high watermark, or last stable
offset for read_committed): bytes beyond are never decoded, so a batch being written at the tail
of the active segment is never looked at.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pyspark_log.records.header import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, MAGIC_V2

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TXN_INDEX_SUFFIX = ".txnindex"
META_PROPERTIES = "meta.properties"
SEGMENT_LOG_NAME = re.compile(r"(\d{20})\.log")
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_VERSION = 0
DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024
SKIP_WINDOW_BYTES = 16 * 1024  # headers read per pread while skipping to a read's first batch
_RELISTS = 3  # fresh directory listings tried when a segment file vanished before its open


class FilesUnavailable(Exception):
    """The files cannot serve offsets from ``offset`` on (a segment vanished, the files end
    before the range does, or the first segment starts above ``offset``); ``reason`` says which.
    Offsets below ``offset`` were yielded already."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"segment files cannot serve offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class FileChunk:
    """Whole batches read from one segment file: ``records`` starts at a batch boundary and may
    end in a partial batch or run past ``end`` (the decoder stops at both). ``aborted`` is the
    ``(producer_id, first_offset)`` list a Fetch response would carry for this data
    (read_committed), else None. ``position`` is the offset the chunk was read for,
    ``next_offset`` the one after its last whole batch (where the next chunk continues)."""

    records: bytes
    aborted: tuple[tuple[int, int], ...] | None
    position: int
    segment_base: int
    file_position: int
    next_offset: int


# ---------------------------------------------------------------------------------------------
# Pure parsing


def segment_bases(names: Iterable[str]) -> list[int]:
    """Base offsets of the live segments among directory entry ``names``, ascending: only exact
    ``<20 digits>.log`` names (``.log.deleted``, ``.log.cleaned``, ``.log.swap`` are not)."""
    bases = []
    for name in names:
        match = SEGMENT_LOG_NAME.fullmatch(name)
        if match is not None:
            bases.append(int(match.group(1)))
    return sorted(bases)


def segment_for(bases: list[int], offset: int) -> int | None:
    """Index in ``bases`` of the segment that may hold ``offset`` (the last base <= offset);
    None when every segment starts above it."""
    slot = bisect.bisect_right(bases, offset) - 1
    return slot if slot >= 0 else None


def parse_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """``(absolute offset, byte position)`` entries of an ``.index`` file; a trailing partial
    entry is ignored, and so is everything from the first entry that does not strictly increase
    (an index is a hint: what is kept is only ever checked against the log)."""
    entries: list[tuple[int, int]] = []
    usable = len(data) - len(data) % OFFSET_INDEX_ENTRY.size
    for relative, position in OFFSET_INDEX_ENTRY.iter_unpack(data[:usable]):
        if relative < 0 or position < 0 or (entries and (relative + base_offset, position) <= entries[-1]):
            break
        if entries and position <= entries[-1][1]:
            break
        entries.append((base_offset + relative, position))
    return entries


def index_floor(entries: list[tuple[int, int]], offset: int) -> tuple[int, int] | None:
    """The entry with the largest offset <= ``offset`` (Kafka ``OffsetIndex.lookup``), or None."""
    slot = bisect.bisect_right(entries, (offset, 1 << 62)) - 1
    return entries[slot] if slot >= 0 else None


def parse_txn_index(data: bytes) -> list[AbortedTxn]:
    """Entries of a ``.txnindex`` file (a trailing partial entry and unknown versions ignored)."""
    usable = len(data) - len(data) % TXN_INDEX_ENTRY.size
    return [
        AbortedTxn(pid, first, last, lso)
        for version, pid, first, last, lso in TXN_INDEX_ENTRY.iter_unpack(data[:usable])
        if version == TXN_INDEX_VERSION
    ]


def aborted_overlapping(entries: Iterable[AbortedTxn], start: int, end: int) -> tuple[tuple[int, int], ...]:
    """``(producer_id, first_offset)`` of the aborted transactions that overlap ``[start, end)``:
    marker at or after ``start`` and first offset before ``end`` (Kafka
    ``TransactionIndex.collectAbortedTxns``, what Fetch returns), ordered by first offset."""
    found = {(t.producer_id, t.first_offset) for t in entries if t.last_offset >= start and t.first_offset < end}
    return tuple(sorted(found, key=lambda a: (a[1], a[0])))


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines of a Java properties file such as ``meta.properties`` (comments and
    blank lines skipped; no escapes, which these files do not use)."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def batch_at(data: bytes, pos: int = 0) -> tuple[int, int, int] | None:
    """``(base offset, last offset, size)`` of the v2 batch header at ``data[pos:]``, or None if
    there are fewer than ``HEADER_SIZE`` bytes or it is not a plausible v2 header."""
    if len(data) - pos < HEADER_SIZE:
        return None
    base, length, _, magic, _, _, last_delta, *_ = HEADER_STRUCT.unpack_from(data, pos)
    if magic != MAGIC_V2 or length < HEADER_SIZE - LOG_OVERHEAD or last_delta < 0:
        return None
    return base, base + last_delta, length + LOG_OVERHEAD


# ---------------------------------------------------------------------------------------------
# The file walk


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """``meta.properties`` of a log dir, or None when it cannot be read."""
    try:
        return parse_properties((log_dir / META_PROPERTIES).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


class PartitionFiles:
    """The segment files of one partition directory, read-only (see the module docstring).

    Not thread-safe; one per task. It opens one ``.log`` at a time and closes it before the next.
    """

    def __init__(self, directory: Path, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self.directory = directory
        self.chunk_bytes = max(chunk_bytes, HEADER_SIZE)

    def bases(self) -> list[int]:
        try:
            return segment_bases(os.listdir(self.directory))
        except FileNotFoundError:
            return []

    def _path(self, base: int, suffix: str) -> Path:
        return self.directory / f"{base:020d}{suffix}"

    def _read_small(self, base: int, suffix: str) -> bytes:
        try:
            with open(self._path(base, suffix), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""

    def aborted_transactions(self, bases: list[int], start: int, end: int) -> list[AbortedTxn]:
        """Every ``.txnindex`` entry of the segments that may hold markers at or after ``start``
        and overlapping ``[start, end)``. Read once, up front: entries are few, and a segment
        the cleaner swaps away later cannot take its entries with it."""
        first = segment_for(bases, start) or 0
        entries: list[AbortedTxn] = []
        for base in bases[first:]:
            entries.extend(t for t in parse_txn_index(self._read_small(base, TXN_INDEX_SUFFIX)) if t.first_offset < end)
        return [t for t in entries if t.last_offset >= start]

    def _open_segment(self, offset: int) -> tuple[int, int, list[int]]:
        """``(base, fd)`` of the live segment that may hold ``offset`` and the listing it came
        from; lists again when the file vanished between listing and open (the cleaner's swap
        or retention). Raises ``FilesUnavailable``."""
        for _ in range(_RELISTS):
            bases = self.bases()
            slot = segment_for(bases, offset)
            if slot is None:
                reason = "no segment files" if not bases else f"the first segment starts at {bases[0]}"
                raise FilesUnavailable(offset, reason)
            base = bases[slot]
            try:
                return base, os.open(self._path(base, LOG_SUFFIX), os.O_RDONLY), bases
            except FileNotFoundError:
                continue
        raise FilesUnavailable(offset, "segment files vanished while being listed (retention or the log cleaner)")

    def _seek(self, fd: int, base: int, offset: int) -> int:
        """Byte position to scan from for ``offset``: the offset index's floor entry when the
        batch header there has that entry's last offset, else the segment's start."""
        entry = index_floor(parse_offset_index(self._read_small(base, INDEX_SUFFIX), base), offset)
        if entry is None:
            return 0
        indexed_offset, position = entry
        found = batch_at(os.pread(fd, HEADER_SIZE, position))
        if found is None or found[1] != indexed_offset:
            return 0
        return position

    def read(self, start: int, end: int, *, read_committed: bool) -> Iterator[FileChunk]:
        """Chunks of whole batches that hold the offsets ``[start, end)`` present in the files, in
        offset order, each of at most about ``chunk_bytes`` (a larger batch comes alone). Every
        batch of a chunk ends at or after the chunk's ``position`` and starts before ``end``; the
        first may start before ``start`` and the last run past ``end`` (the decoder cuts records
        to the range). Raises ``FilesUnavailable`` (see the module docstring)."""
        position = start
        listing = self.bases()
        aborted_all = self.aborted_transactions(listing, start, end) if read_committed else None
        next_base: int | None = None  # the segment listed after the one just read
        finished: tuple[int, int] | None = None  # (st_dev, st_ino) of the file just read to its end
        while position < end:
            if next_base is None:  # the first segment: the live one that may hold ``position``
                base, fd, listing = self._open_segment(position)
            else:
                # The next segment is opened by name: a file of a fresh listing could start past
                # offsets that the cleaner's new file (its swap still in progress) holds, and a
                # read from it would skip them as if compacted away.
                opened = self._open_base(next_base)
                if opened is None:
                    raise FilesUnavailable(position, "the next segment vanished (retention or the log cleaner)")
                base, fd = next_base, opened
            try:
                stat = os.fstat(fd)
                if (stat.st_dev, stat.st_ino) == finished:
                    raise FilesUnavailable(
                        position, "the segment that follows was removed (retention or the log cleaner)"
                    )
                position = yield from self._walk_segment(fd, base, position, end, aborted_all)
                finished = (stat.st_dev, stat.st_ino)
            finally:
                os.close(fd)
            if position >= end:
                return
            later = [b for b in listing if b > base] or [b for b in self.bases() if b > base]
            if not later:
                raise FilesUnavailable(position, f"the files end before offset {end}")
            next_base = later[0]

    def _open_base(self, base: int) -> int | None:
        try:
            return os.open(self._path(base, LOG_SUFFIX), os.O_RDONLY)
        except FileNotFoundError:
            return None

    def _walk_segment(
        self, fd: int, base: int, position: int, end: int, aborted_all: list[AbortedTxn] | None
    ) -> Generator[FileChunk, None, int]:
        """Walk one open segment from ``position``; returns the offset reached: ``end``, or
        where the file ends (the next segment takes over; offsets between are absent)."""
        size = os.fstat(fd).st_size
        pos = _skip_headers(fd, self._seek(fd, base, position), size, position)
        want = self.chunk_bytes
        while position < end:
            if pos >= size:
                size = os.fstat(fd).st_size  # the active segment may have grown
                if pos >= size:
                    return position
            data = os.pread(fd, min(want, size - pos), pos)
            cut, last_offset, reached_end = _whole_batches(data, position, end)
            if cut == 0 and not reached_end:
                head = batch_at(data)
                if head is None:
                    raise FilesUnavailable(position, f"no batch header at byte {pos} of segment {base}")
                if pos + head[2] > size:  # a batch still being written: not below the bound
                    raise FilesUnavailable(position, f"the batch at byte {pos} of segment {base} is incomplete")
                want = head[2]  # one batch larger than a chunk: read it whole
                continue
            want = self.chunk_bytes
            if last_offset >= position:
                aborted = None if aborted_all is None else aborted_overlapping(aborted_all, position, end)
                records = data[:cut] if cut < len(data) else data
                yield FileChunk(records, aborted, position, base, pos, last_offset + 1)
            pos += cut
            position = max(position, last_offset + 1)
            if reached_end:
                return end
        return position


def _skip_headers(fd: int, pos: int, size: int, position: int) -> int:
    """From byte ``pos``, the byte position of the first batch whose last offset is at or after
    ``position``, reading only batch headers (``SKIP_WINDOW_BYTES`` at a time; a batch larger
    than that costs one read): the offset index may be sparse or, for a segment the broker has
    not flushed yet, empty. Stops early (the walk then checks) at anything not a batch header."""
    while pos < size:
        window = os.pread(fd, min(SKIP_WINDOW_BYTES, size - pos), pos)
        off = 0
        while off < len(window):
            head = batch_at(window, off)
            if head is None:
                break
            if head[1] >= position:
                return pos + off
            off += head[2]
        if off == 0:
            return pos
        pos += off
    return pos


def _whole_batches(data: bytes, position: int, end: int) -> tuple[int, int, bool]:
    """Walk the batch headers of ``data``: ``(bytes of whole batches to keep, last offset of the
    last of them (-1 if none), whether a batch starting at or after ``end`` was reached)``.
    Leading batches that end before ``position`` are kept too (they are at most one index
    interval; the decoder skips them)."""
    pos, last_offset, n = 0, -1, len(data)
    while True:
        head = batch_at(data, pos)
        if head is None:
            return pos, last_offset, False
        batch_base, batch_last, size = head
        if batch_base >= end:
            return pos, last_offset, True
        if pos + size > n:
            return pos, last_offset, False
        pos += size
        last_offset = batch_last
