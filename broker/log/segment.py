"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex`` (Kafka documentation
§5.4 "Log").

"Each log file is named with the offset of the first message it contains" — here the base
offset, 20 digits, zero padded, as Kafka names them. The ``.log`` file is the batches exactly as
producers sent them (offsets assigned); the indexes are described in ``offset_index.py``,
``time_index.py`` and ``txn_index.py`` (aborted transactions; the file exists only once the
segment holds an ABORT marker).

``LogSegment`` alone touches these files (docs/architecture.md, "one owner per file and per background loop").
It takes no lock: the
broker calls it from one asyncio loop. Writes are ``pwrite`` at the in-memory size and reads are
``pread``; nothing depends on mmap, so a log dir on NFS works. ``flush()`` is the only fsync;
``add_to_flush`` hands the same work to a ``FlushJob`` that fsyncs in a worker thread.
Raises: ``KafkaStorageError`` when the disk fails on append; ``CorruptMessageError`` when a
file that passed recovery no longer parses; ``CorruptIndexError`` only from ``load_tail`` (the
loader then calls ``recover``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from broker.log.config import INT_MAX, LogConfig
from broker.log.errors import CorruptMessageError, KafkaStorageError
from broker.log.file_slice import FileSlice
from broker.log.flush_job import FlushJob
from broker.log.index_file import CorruptIndexError
from broker.log.offset_index import OffsetIndex
from broker.log.scan import ValidBatches, iter_headers, pread_exact
from broker.log.time_index import NO_TIMESTAMP, TimeIndex
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from broker.log.validate import BatchInfo, Buffer
from pyspark_log.records.batch import decode_records
from pyspark_log.records.errors import RecordError
from pyspark_log.records.header import BatchHeader

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
IOV_MAX = 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def pwritev_all(fd: int, buffers: Sequence[Buffer], position: int) -> int:
    """Write every buffer at ``position`` with ``pwritev`` (at most IOV_MAX at a time, resuming
    after short writes); returns the bytes written."""
    if len(buffers) <= IOV_MAX:
        total = os.pwritev(fd, buffers, position)
        if total == sum(len(b) for b in buffers):
            return total  # the usual case: one call wrote everything
    else:
        total = 0
    pending = [memoryview(b).cast("B") for b in buffers if len(b)]
    skip = total
    while pending and skip >= len(pending[0]):
        skip -= len(pending.pop(0))
    if skip:
        pending[0] = pending[0][skip:]
    while pending:
        chunk = pending[:IOV_MAX]
        written = os.pwritev(fd, chunk, position + total)
        total += written
        done = 0
        while done < len(chunk) and written >= len(chunk[done]):
            written -= len(chunk[done])
            done += 1
        pending = pending[done:]
        if written:
            pending[0] = pending[0][written:]
    return total


class LogSegment:
    """A segment's files and in-memory facts. Build with ``create`` (new) or ``open`` (existing).

    ``next_offset`` is one past the last offset stored; ``max_timestamp_ms`` / ``offset_of_max_
    timestamp`` the largest batch maxTimestamp and that batch's last offset.
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int, fd: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.fd = fd
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        self.indexes_missing = not index_path.exists() or not time_path.exists()
        self.offset_index = OffsetIndex(index_path, base_offset, config.segment_index_bytes, exists=index_path.exists())
        self.time_index = TimeIndex(time_path, base_offset, config.segment_index_bytes, exists=time_path.exists())
        self.txn_index = TransactionIndex(directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX))
        self.size_bytes = os.fstat(fd).st_size
        self.next_offset = base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp_ms = NO_TIMESTAMP
        self.created_ms = now_ms
        self.dirty = False  # bytes written since the last fsync
        self.renamed_for_deletion = False
        self._last_index_position = 0
        self._indexes_verified = False
        # ``(position, header)`` of the batch a read stopped before (``_furthest_boundary``):
        # where a sequential consumer's next read starts, so ``find_batch`` need not read it again.
        # Bytes below ``size_bytes`` change only by truncation, which forgets it.
        self._peeked: tuple[int, BatchHeader] | None = None

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """A new, empty segment (an existing file of that name is emptied)."""
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (directory / segment_file_name(base_offset, suffix)).unlink(missing_ok=True)
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, config, now_ms, fd)
        segment._indexes_verified = True
        segment.indexes_missing = False
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """An existing segment; the caller then runs ``load_tail`` or ``recover``."""
        fd = os.open(directory / segment_file_name(base_offset, LOG_SUFFIX), os.O_RDWR)
        return cls(directory, base_offset, config, now_ms, fd)

    # -- loading and recovery ----------------------------------------------------------------
    def load_tail(self) -> None:
        """Trust the file (clean shutdown, or below the recovery point): check the index files'
        last entries against the log, then scan the batches after the last index entry to learn
        ``next_offset`` and the max timestamp. Raises CorruptIndexError or CorruptMessageError."""
        if self.indexes_missing:
            raise CorruptIndexError(f"index files of {self.log_path} are missing")
        start = 0
        last = self.offset_index.last_persisted_entry()
        if last is not None:
            relative, position = last
            headers = iter_headers(self.fd, position, self.size_bytes) if position < self.size_bytes else None
            first = next(headers, None) if headers is not None else None
            if first is None or first[1].last_offset != self.base_offset + relative:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry does not match the log")
            start = self._last_index_position = position
        time_last = self.time_index.last_persisted_entry()
        self.next_offset = self.base_offset
        self._scan_tail(start)
        if time_last is not None:
            ts, relative = time_last
            if self.base_offset + relative >= max(self.next_offset, self.base_offset + 1):
                raise CorruptIndexError(f"{self.time_index.path}: last entry points past the log")
            if ts > self.max_timestamp_ms:
                self.max_timestamp_ms, self.offset_of_max_timestamp = ts, self.base_offset + relative
        self.txn_index.sanity_check(self.base_offset)
        aborted = self.txn_index.entries
        if aborted and aborted[-1].last_offset >= self.next_offset:
            raise CorruptIndexError(f"{self.txn_index.path}: last entry points past the log")
        self._load_first_batch_timestamp()

    def recover(self, min_offset: int) -> int:
        """Rebuild both indexes from the log, checking every batch (CRC, offsets ≥ ``min_offset``
        and increasing); cut the file at the first invalid batch. Returns the bytes cut. The
        transaction index is emptied: the log refills it while it replays the producer state.

        Nothing is fsynced here (a start-up may recover many segments): the segment is left
        dirty, with its indexes in memory only, and the log's next ``flush`` makes it durable."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._reset_facts()
        scanner = ValidBatches(self.fd, self.size_bytes, self.base_offset, min_offset)
        for pos, header in scanner:
            self._track(pos, header.size, header.last_offset, header.max_timestamp)
            self.next_offset = header.last_offset + 1
        truncated = self.size_bytes - scanner.valid_bytes
        if truncated:
            os.ftruncate(self.fd, scanner.valid_bytes)
            self.size_bytes = scanner.valid_bytes
        self._load_first_batch_timestamp()
        self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp, skip_full_check=True)
        self.indexes_missing = False
        self._indexes_verified = True
        self.dirty = True
        return truncated

    def rebuild_indexes(self) -> None:
        """Rebuild the indexes from batch headers without truncating (an index failed its check)."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_facts()
        for pos, header in iter_headers(self.fd, 0, self.size_bytes):
            self._track(pos, header.size, header.last_offset, header.max_timestamp)
            self.next_offset = header.last_offset + 1
        self._load_first_batch_timestamp()
        self.indexes_missing = False
        self._indexes_verified = True
        self.offset_index.flush()
        self.time_index.flush()

    def _reset_facts(self) -> None:
        self._peeked = None
        self.next_offset = self.base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp_ms = NO_TIMESTAMP
        self._last_index_position = 0

    def _scan_tail(self, start: int) -> None:
        for _, header in iter_headers(self.fd, start, self.size_bytes):
            self.next_offset = header.last_offset + 1
            if header.max_timestamp > self.max_timestamp_ms:
                self.max_timestamp_ms, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset

    def _load_first_batch_timestamp(self) -> None:
        self.first_batch_timestamp_ms = NO_TIMESTAMP
        if self.size_bytes:
            _, header = next(iter_headers(self.fd, 0, self.size_bytes))
            self.first_batch_timestamp_ms = header.max_timestamp

    def verify_indexes(self) -> None:
        """Load lazily-read index files in full; rebuild them if they fail the check."""
        if self._indexes_verified:
            return
        try:
            _ = self.offset_index.entries, self.time_index.entries
        except (CorruptIndexError, FileNotFoundError):
            self.rebuild_indexes()
        self._indexes_verified = True

    # -- appending -----------------------------------------------------------------------------
    def _track(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Update max timestamp and add index entries for one batch (same rule on append and on
        recovery, so a rebuilt index equals the written one)."""
        if max_timestamp > self.max_timestamp_ms:
            self.max_timestamp_ms, self.offset_of_max_timestamp = max_timestamp, last_offset
        if position - self._last_index_position > self.config.index_interval_bytes:
            if not self.offset_index.is_full():
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp)
            self._last_index_position = position

    def append(self, buffers: Sequence[Buffer], size_bytes: int, batches: Sequence[BatchInfo]) -> int:
        """Write whole validated batches (``size_bytes`` in ``buffers``) at the end; returns
        their file position. The in-memory size moves only after the write succeeded."""
        position = self.size_bytes
        last_offset = batches[-1].last_offset
        assert batches[0].base_offset >= self.base_offset
        assert last_offset - self.base_offset <= INT_MAX
        try:
            written = pwritev_all(self.fd, buffers, position)
            assert written == size_bytes, f"wrote {written} bytes of {size_bytes}"
        except OSError as exc:
            try:
                os.ftruncate(self.fd, position)
            except OSError:
                pass
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        self.dirty = True
        if position == 0:
            self.first_batch_timestamp_ms = batches[0].max_timestamp_ms
        for batch in batches:
            self._track(position + batch.position, batch.size_bytes, batch.last_offset, batch.max_timestamp_ms)
        self.size_bytes = position + size_bytes
        self.next_offset = last_offset + 1
        return position

    def should_roll(self, incoming_bytes: int, max_timestamp_ms: int, last_offset: int, now_ms: int) -> bool:
        """Kafka ``LogSegment.shouldRoll``: full by size, old by ``segment.ms`` (or a compacted
        topic's ``max.compaction.lag.ms``: ``LogConfig.max_segment_ms``), an index full, or an
        offset that would not fit a relative int32."""
        config = self.config
        aged = self.time_waited_for_roll_ms(now_ms, max_timestamp_ms) > config.max_segment_ms - config.segment_jitter_ms
        return (
            self.size_bytes > config.segment_bytes - incoming_bytes
            or (self.size_bytes > 0 and aged)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or last_offset - self.base_offset > INT_MAX
        )

    def time_waited_for_roll_ms(self, now_ms: int, message_timestamp_ms: int) -> int:
        """From the first batch's timestamp to the new one's, or from creation to now when the
        first batch has no timestamp (Kafka ``LogSegment.timeWaitedForRoll``)."""
        if self.first_batch_timestamp_ms >= 0:
            return message_timestamp_ms - self.first_batch_timestamp_ms
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """The segment is no longer the active one: record its largest timestamp in the index."""
        self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp, skip_full_check=True)

    def trim_to_size(self) -> bool:
        """Make the file exactly ``size_bytes`` long (bytes past it are a failed append's): True
        when it is (or was cut back to it), False when the file is shorter or cannot be read or
        cut (the segment lost written bytes: not consistent)."""
        try:
            on_disk = os.fstat(self.fd).st_size
            if on_disk > self.size_bytes:
                os.ftruncate(self.fd, self.size_bytes)
                on_disk = self.size_bytes
        except OSError:
            return False
        return on_disk == self.size_bytes

    def flush(self) -> None:
        """fsync the log file if it has unflushed bytes."""
        if self.dirty:
            os.fsync(self.fd)
            self.dirty = False

    def add_to_flush(self, job: FlushJob, *, indexes: bool) -> None:
        """Hand the unsynced files of the segment to ``job`` (``flush``, and ``flush_indexes`` when
        ``indexes``, without their fsyncs; index entries are written to the page cache here).
        From here on the segment counts as synced: a failed job fails the log."""
        if self.dirty:
            job.add_dup(self.fd, str(self.log_path))
            self.dirty = False
        if indexes:
            for index in (self.offset_index, self.time_index):
                fd = index.write_pending()
                if fd is not None:
                    job.add_fd(fd, str(index.path))
            txn_fd = self.txn_index.take_unsynced()
            if txn_fd is not None:
                job.add_dup(txn_fd, str(self.txn_index.path))

    def flush_indexes(self) -> None:
        """Write pending index entries and fsync the index files. The log calls it when the
        segment stops being active (roll, close), after ``flush``: the active segment's indexes
        need no fsync because after a crash the active segment is always recovered, which
        rebuilds them (the recovery point lies in it)."""
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- reading -------------------------------------------------------------------------------
    def find_batch(self, offset: int, position_hint: int | None = None) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch whose last offset is ≥ ``offset``, or None.

        ``position_hint`` is a known batch boundary at or before that batch (a cached one)."""
        peeked = self._peeked
        if peeked is not None and peeked[0] == position_hint and peeked[1].last_offset >= offset:
            return peeked
        if position_hint is None:
            self.verify_indexes()
            _, position_hint = self.offset_index.lookup(offset)
        for position, header in iter_headers(self.fd, position_hint, self.size_bytes):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_position: int | None = None,
        *,
        min_one_batch: bool = True,
        position_hint: int | None = None,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (but the first
        batch whole when ``min_one_batch``, KIP-74), ending at or before ``max_position``.
        None when no batch here reaches ``offset``."""
        found = self.find_batch(offset, position_hint)
        if found is None:
            return None
        start, first = found
        visible = self.size_bytes if max_position is None else min(max_position, self.size_bytes)
        first_end = start + first.size
        if first_end > visible:
            return FileSlice.empty(offset)
        limit = min(start + max(max_bytes, 0), visible)
        if first_end > limit:
            if not min_one_batch:
                return FileSlice.empty(offset)
            return FileSlice.of_segment(self.log_path, self.fd, start, first.size, first.next_offset)
        end, next_offset = self._furthest_boundary(first_end, first.next_offset, limit)
        return FileSlice.of_segment(self.log_path, self.fd, start, end - start, next_offset)

    def _furthest_boundary(self, end: int, next_offset: int, limit: int) -> tuple[int, int]:
        """The last batch end ≤ ``limit`` at or after ``end`` (a batch end), with its next offset."""
        if limit >= self.size_bytes:
            return self.size_bytes, self.next_offset
        self.verify_indexes()
        entry = self.offset_index.floor_position(limit)
        scan_from = end
        if entry is not None and entry[1] > end:
            scan_from = end = entry[1]
            next_offset = -1  # the base offset of the batch at the entry, read below
        for position, header in iter_headers(self.fd, scan_from, self.size_bytes):
            if next_offset < 0:
                next_offset = header.base_offset
            if position + header.size > limit:
                self._peeked = (position, header)
                break
            end, next_offset = position + header.size, header.next_offset
        return end, next_offset

    def position_of(self, offset: int) -> tuple[int, int]:
        """``(position, base offset)`` of the batch holding ``offset`` (or the first after it);
        ``(size, next_offset)`` when none. Reads use it to stop before a max offset."""
        found = self.find_batch(offset)
        if found is None:
            return self.size_bytes, self.next_offset
        return found[0], found[1].base_offset

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        """The bytes of the batch at ``position`` (control batches, when the log replays markers)."""
        return pread_exact(self.fd, header.size, position)

    def _decode_at(self, position: int, header: BatchHeader) -> list[tuple[int, int]]:
        """``(offset, timestamp)`` of each record of one batch (the only decoding the log does)."""
        data = pread_exact(self.fd, header.size, position)
        try:
            _, records = decode_records(data)
        except RecordError as exc:
            raise CorruptMessageError(f"batch at byte {position} of {self.log_path}: {exc}") from exc
        return [(record.offset, record.timestamp) for record in records]

    def find_offset_by_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``min_offset`` whose timestamp
        is ≥ ``timestamp_ms``: time index, then batch headers, then one batch decoded."""
        self.verify_indexes()
        start_offset = max(self.time_index.lookup_before(timestamp_ms), min_offset)
        _, position = self.offset_index.lookup(start_offset)
        for pos, header in iter_headers(self.fd, position, self.size_bytes):
            if header.max_timestamp < timestamp_ms or header.last_offset < min_offset:
                continue
            for offset, ts in self._decode_at(pos, header):
                if ts >= timestamp_ms and offset >= min_offset:
                    return offset, ts
        return None

    def max_timestamp_record(self) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record carrying the segment's max timestamp."""
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is not None:
            for offset, ts in self._decode_at(*found):
                if ts == self.max_timestamp_ms:
                    return offset, ts
        return self.offset_of_max_timestamp, self.max_timestamp_ms

    # -- truncation, deletion ----------------------------------------------------------------
    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove the batch holding ``offset`` and everything after; returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._peeked = None
        os.ftruncate(self.fd, position)
        removed = self.size_bytes - position
        self.size_bytes = position
        ts, ts_offset = self.time_index.last_entry()
        last = self.offset_index.last_entry()
        self._last_index_position = last[1] if last is not None else 0
        self.next_offset = self.base_offset
        self.max_timestamp_ms, self.offset_of_max_timestamp = ts, ts_offset
        self._scan_tail(self._last_index_position)
        if self.next_offset == self.base_offset and last is not None:
            self.next_offset = last[0] + 1
        if position == 0:
            self.created_ms = now_ms
        self._load_first_batch_timestamp()
        self.dirty = True
        return removed

    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def close(self) -> None:
        """Close the log file descriptor (open FileSlices keep their own)."""
        self.txn_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def rename_for_deletion(self) -> None:
        """Close and rename the segment's files to ``*.deleted`` (Kafka documentation §5.4.3 "Deletes":
        deletion does not
        block readers; open slices keep reading the renamed inode)."""
        self.close()
        for path in self._paths():
            if path.exists():
                os.replace(path, path.with_name(path.name + DELETED_SUFFIX))
        self.renamed_for_deletion = True

    def delete_files(self) -> None:
        """Remove the files: the ``.deleted`` names once renamed (a new segment may have taken
        the live names since), the live names otherwise."""
        self.close()
        suffix = DELETED_SUFFIX if self.renamed_for_deletion else ""
        for path in self._paths():
            path.with_name(path.name + suffix).unlink(missing_ok=True)

    def moved_to(self, directory: Path) -> None:
        """The segment's directory was renamed to ``directory`` (a log moved between log dirs,
        ``Log.rename_directory``): open descriptors stay valid, only the paths change."""
        self.directory = directory
        self.log_path = directory / self.log_path.name
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.path = directory / index.path.name

    def _paths(self) -> tuple[Path, ...]:
        return (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size_bytes}, next={self.next_offset})"
