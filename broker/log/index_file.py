"""Shared machinery of the two index files: fixed-size big-endian entries mirrored in memory.

An index file holds only whole entries and nothing else: unlike Kafka we never preallocate it
(Kafka grows it to ``segment.index.bytes`` because it writes through mmap; we write with plain
``pwrite``, which NFS handles coherently). ``segment.index.bytes`` still caps the number of
entries, and a full index makes the segment roll, as in Kafka.

Entries live in memory (arrays) and reach the file on ``flush()``: the segment calls it when it
flushes the log, after the log's own fsync, so a persisted entry never points past durable log
bytes. After a crash, entries beyond the recovery point are rebuilt from the log anyway
(``LogSegment.recover``). An index of a closed segment is loaded lazily, on its first lookup.

Not thread-safe: one owner (the segment), on the broker's event loop.
"""

from __future__ import annotations

import itertools
import os
from abc import ABC, abstractmethod
from array import array
from pathlib import Path


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; the segment rebuilds it from the log."""


class IndexFile(ABC):
    """Entries ``(key, value)`` kept as two parallel arrays; subclasses give the layout."""

    ENTRY_SIZE = 0  # bytes per entry on disk
    KEY_TYPECODE = "i"

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *, exists: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._keys: array[int] = array(self.KEY_TYPECODE)
        self._values: array[int] = array("i")
        self._persisted = 0  # entries already in the file
        self._synced = True  # the file's content has been fsynced
        self._loaded = not exists
        if not exists:
            path.touch()

    # -- loading ---------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def load(self) -> None:
        """Read and sanity-check the file. Raises CorruptIndexError (FileNotFoundError if gone)."""
        data = self.path.read_bytes()
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.ENTRY_SIZE}")
        keys, values = self._decode(data)
        if len(keys) > self.max_entries:
            raise CorruptIndexError(f"{self.path}: {len(keys)} entries exceed the maximum {self.max_entries}")
        self._check(keys, values)
        self._keys, self._values = keys, values
        self._persisted = len(keys)
        self._loaded = True

    def last_persisted_entry(self) -> tuple[int, int] | None:
        """The file's last entry without loading the rest (a cheap start-up check)."""
        size = self.path.stat().st_size
        if size % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {self.ENTRY_SIZE}")
        if size == 0:
            return None
        with self.path.open("rb") as f:
            f.seek(size - self.ENTRY_SIZE)
            keys, values = self._decode(f.read(self.ENTRY_SIZE))
        return keys[0], values[0]

    # -- layout hooks ----------------------------------------------------------------------
    @abstractmethod
    def _decode(self, data: bytes) -> tuple[array[int], array[int]]: ...

    @abstractmethod
    def _encode(self, start: int, stop: int) -> bytes: ...

    @abstractmethod
    def _check(self, keys: array[int], values: array[int]) -> None: ...

    # -- state -----------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        if not self._loaded:
            self.load()
        return len(self._keys)

    def is_full(self) -> bool:
        if not self._loaded:
            self.load()
        return len(self._keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file."""
        self._ensure_loaded()
        del self._keys[count:]
        del self._values[count:]
        if self._persisted > count:
            os.truncate(self.path, count * self.ENTRY_SIZE)
            self._persisted = count
            self._synced = False

    def reset(self) -> None:
        """Drop every entry (the segment is about to rebuild the index)."""
        self._keys = array(self.KEY_TYPECODE)
        self._values = array("i")
        self._loaded = True
        self._persisted = 0
        self._synced = False
        with self.path.open("wb"):
            pass  # create or empty the file

    def flush(self) -> None:
        """Write entries not yet in the file, then fsync it. No-op when nothing is pending."""
        fd = self.write_pending()
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def write_pending(self) -> int | None:
        """``flush`` without the fsync (the cheap part, for the event loop): write entries not yet
        in the file and return a descriptor of it that the caller must fsync and close (a
        ``FlushJob`` does, in a thread); None when nothing is pending. The index counts as synced
        from here on: a failed fsync fails the whole log."""
        if not self._loaded or (self._persisted == len(self._keys) and self._synced):
            return None
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if self._persisted < len(self._keys):
                data = self._encode(self._persisted, len(self._keys))
                _pwrite_all(fd, data, self._persisted * self.ENTRY_SIZE)
            os.ftruncate(fd, len(self._keys) * self.ENTRY_SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._persisted = len(self._keys)
        self._synced = True
        return fd

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def non_decreasing(values: array[int]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(values))
