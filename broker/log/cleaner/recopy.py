"""The cleaner's worker part: build the offset map of the dirty head, write cleaned segments.

Kafka documentation §4.8 "Log Compaction" "Log Compaction Details", steps 2-3: build a compact summary of the
last offset of each key in the log head; recopy the log from start to end, dropping keys that appear again
later; cleaned segments replace the originals at once, so the extra disk needed is one segment. And: cleaning
does not block reads and can be throttled to a configured I/O rate (``log.cleaner.io.max.bytes.per.second``:
``Throttler``).

``clean(plan, offset_map, throttler, stop)`` runs in a cleaner worker process (``worker.py``)
or, in tests, a thread. It reads only the source segment files named in the plan taken on the
event loop (``CleaningPlan``), and writes only ``<base>.log.cleaned`` files, fsynced before it
returns; it never touches a ``Log``. If retention, a truncation or a roll changed the log
meanwhile (a file gone, or renamed), the swap notices the log changed and drops the result.

Grouping: consecutive source segments are recopied into one cleaned segment, named after the
first one's base offset, as long as what it holds plus the next source's whole size stays within
``segment.bytes`` (``choose.starts_new_group``), so small cleaned segments merge. Which records stay: ``retain.py``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from broker.log.cleaner.choose import starts_new_group
from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.retain import (
    BatchRetention,
    TxnCleaning,
    data_batch_retention,
    delete_horizon_to_stamp,
    deletes_retained,
    keep_control_batch,
    keep_record,
)
from broker.log.cleaner.rewrite import rewrite_batch
from broker.log.config import INT_MAX
from broker.log.errors import CorruptMessageError
from broker.log.offset_index import OffsetIndex
from broker.log.producer_state import parse_txn_marker
from broker.log.scan import iter_headers, pread_exact
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from broker.log.time_index import NO_TIMESTAMP, TimeIndex
from broker.log.txn_index import AbortedTxn
from pyspark_log.records.batch import decode_records
from pyspark_log.records.errors import RecordError
from pyspark_log.records.header import BatchHeader, read_header
from pyspark_log.records.record import Record

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
THROTTLE_WINDOW_S = 0.3  # Kafka's throttler checks every 300 ms


class CleaningAborted(Exception):
    """The cleaner was asked to stop (shutdown) in the middle of a clean."""


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_file_name(base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """A segment to read, with the facts taken on the loop. The worker opens ``path`` itself;
    ``segment`` is the ``LogSegment`` (on the loop's side only, None in a worker process), for
    the swap's identity check."""

    base_offset: int
    next_offset: int
    size_bytes: int
    last_modified_ms: int
    path: Path
    segment: object = None


class StopFlag(Protocol):
    """What ``clean`` polls between batches (a ``threading.Event``, or the worker process's flag)."""

    def is_set(self) -> bool: ...


@dataclass(slots=True)
class CleaningPlan:
    """Everything a clean needs, taken on the event loop (``LogCleaner.plan``)."""

    directory: Path
    name: str
    sources: list[SourceSegment]  # every segment from the log start below ``end_offset``
    first_dirty_offset: int
    end_offset: int
    aborted: list[AbortedTxn]  # aborted transactions overlapping [log start, end_offset)
    producer_last_batches: frozenset[tuple[int, int]]  # (producer id, last offset) of live producers
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024

    def detached(self) -> CleaningPlan:
        """A copy without the ``LogSegment`` objects, to send to a worker process."""
        sources = [dataclasses.replace(s, segment=None) for s in self.sources]
        return dataclasses.replace(self, sources=sources)


@dataclass(slots=True)
class CleanedGroup:
    """One written cleaned segment replacing ``sources``: ``<base>.log.cleaned`` and its offset
    and time indexes, ``<base>.index.cleaned`` and ``<base>.timeindex.cleaned``."""

    base_offset: int
    sources: list[SourceSegment]
    path: Path
    size_bytes: int
    aborted: list[AbortedTxn]  # index entries of the ABORT markers it keeps
    last_modified_ms: int  # the newest source's: cleaning does not make data look younger

    @property
    def index_paths(self) -> tuple[Path, Path]:
        """The cleaned offset index and time index."""
        directory = self.path.parent
        return (
            directory / (segment_file_name(self.base_offset, INDEX_SUFFIX) + CLEANED_SUFFIX),
            directory / (segment_file_name(self.base_offset, TIME_INDEX_SUFFIX) + CLEANED_SUFFIX),
        )


@dataclass(slots=True)
class CleanResult:
    map_end_offset: int  # the new first dirty offset: the map covered everything below it
    groups: list[CleanedGroup] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_entries: int = 0

    def discard_files(self) -> None:
        for group in self.groups:
            for path in (group.path, *group.index_paths):
                path.unlink(missing_ok=True)


class Throttler:
    """Caps the bytes per second read and written (``log.cleaner.io.max.bytes.per.second``; each
    worker process gets its share): after ``acquire(n)`` the caller has slept long enough that
    the bytes of the current window stay under the rate. Thread-safe; the clock and sleep are
    injected."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._window_start = clock()
        self._window_bytes = 0

    def acquire(self, n: int) -> float:
        """Account ``n`` bytes; sleep if they exceed the rate. Returns the seconds slept."""
        with self._lock:
            now = self._clock()
            self._window_bytes += n
            elapsed = now - self._window_start
            delay = throttle_delay_s(self._window_bytes, elapsed, self.bytes_per_second)
            if elapsed + delay >= THROTTLE_WINDOW_S:
                self._window_start = now + delay
                self._window_bytes = 0
        if delay > 0:
            self._sleep(delay)
        return delay


def throttle_delay_s(window_bytes: int, elapsed_s: float, bytes_per_second: float) -> float:
    """Seconds to wait so that ``window_bytes`` over the window takes at least their time at the rate."""
    return max(0.0, window_bytes / bytes_per_second - elapsed_s)


def clean(plan: CleaningPlan, offset_map: OffsetMap, throttler: Throttler, stop: StopFlag) -> CleanResult:
    """Build the map of the dirty head, then recopy the segments it covers (module docstring).
    Raises CleaningAborted when ``stop`` is set, CorruptMessageError on unreadable batches,
    OSError on I/O errors; ``.cleaned`` files already written are removed in each case."""
    return _Clean(plan, offset_map, throttler, stop).run()


def _decode(data: bytes, source: SourceSegment, pos: int) -> list[Record]:
    try:
        return decode_records(data)[1]
    except RecordError as exc:
        raise CorruptMessageError(f"segment {source.base_offset}, batch at byte {pos}: {exc}") from exc


class _Clean:
    """One clean's state in the worker (process, or a thread in tests)."""

    def __init__(self, plan: CleaningPlan, offset_map: OffsetMap, throttler: Throttler, stop: StopFlag) -> None:
        self.plan = plan
        self.map = offset_map
        self.throttler = throttler
        self.stop = stop
        self.result = CleanResult(plan.first_dirty_offset)
        self._fds: dict[int, int] = {}

    def _fd(self, source: SourceSegment) -> int:
        fd = self._fds.get(source.base_offset)
        if fd is None:
            fd = self._fds[source.base_offset] = os.open(source.path, os.O_RDONLY)
        return fd

    def _read(self, source: SourceSegment, pos: int, size: int) -> bytes:
        if self.stop.is_set():
            raise CleaningAborted
        data = pread_exact(self._fd(source), size, pos)
        self.throttler.acquire(len(data))
        self.result.bytes_read += len(data)
        return data

    def run(self) -> CleanResult:
        try:
            return self._run()
        finally:
            for fd in self._fds.values():
                os.close(fd)

    def _run(self) -> CleanResult:
        plan, result = self.plan, self.result
        self.map.clear()
        result.map_end_offset = self._build_offset_map()
        result.map_entries = self.map.size
        if result.map_end_offset <= plan.first_dirty_offset:
            return result
        sources = [s for s in plan.sources if s.base_offset < result.map_end_offset]
        txns = TxnCleaning(list(plan.aborted))
        writer: _GroupWriter | None = None
        try:
            for source in sources:
                group = writer.group if writer is not None else None
                if group is not None and starts_new_group(
                    group.size_bytes, group.base_offset, source.size_bytes, source.next_offset,
                    plan.segment_bytes, INT_MAX,
                ):  # fmt: skip
                    assert writer is not None
                    writer.finish()
                    writer = None
                if writer is None:
                    writer = _GroupWriter(plan, source.base_offset)
                    result.groups.append(writer.group)
                writer.group.sources.append(source)
                writer.group.last_modified_ms = max(writer.group.last_modified_ms, source.last_modified_ms)
                self._recopy(source, writer, txns)
            if writer is not None:
                writer.finish()
        except BaseException:
            if writer is not None:
                writer.close()
            result.discard_files()
            raise
        return result

    def _build_offset_map(self) -> int:
        """Put every keyed record of the dirty head in the map (skipping aborted transactions
        and control batches); returns the offset below which the map covers the head."""
        plan = self.plan
        first_dirty = plan.first_dirty_offset
        txns = TxnCleaning(list(plan.aborted))
        end = first_dirty
        for source in plan.sources:
            if source.next_offset <= first_dirty:
                continue
            for pos, header in iter_headers(self._fd(source), 0, source.size_bytes):
                if header.last_offset < first_dirty:
                    continue
                if header.base_offset >= plan.end_offset:
                    return end
                if header.is_control:  # ends its transaction: later batches of the producer count again
                    marker = parse_txn_marker(self._read(source, pos, header.size))
                    commit = None if marker is None else marker.commit
                    txns.on_marker(header.producer_id, header.base_offset, commit=commit)
                elif not txns.on_data_batch(
                    header.producer_id, header.last_offset, transactional=header.is_transactional
                ):
                    if header.records_count > self.map.free_entries:
                        return end  # the map is full: a partial clean up to here
                    for record in _decode(self._read(source, pos, header.size), source, pos):
                        if record.key is not None:
                            self.map.put(record.key, record.offset)
                end = header.next_offset
            end = max(end, min(source.next_offset, plan.end_offset))
        return min(end, plan.end_offset)

    def _recopy(self, source: SourceSegment, writer: _GroupWriter, txns: TxnCleaning) -> None:
        """Append what ``source`` keeps to the cleaned segment of ``writer``."""
        result = self.result
        for pos, header in iter_headers(self._fd(source), 0, source.size_bytes):
            data = self._read(source, pos, header.size)
            out = self._filter_batch(header, data, source, pos, txns, writer.group)
            if out:
                max_timestamp = header.max_timestamp if out is data else read_header(out).max_timestamp
                writer.write(out, header.last_offset, max_timestamp)
                self.throttler.acquire(len(out))
                result.bytes_written += len(out)

    def _filter_batch(  # noqa: PLR0917 - one batch's whole context
        self,
        header: BatchHeader,
        data: bytes,
        source: SourceSegment,
        pos: int,
        txns: TxnCleaning,
        group: CleanedGroup,
    ) -> bytes | None:
        """The bytes to write for one batch: unchanged, rewritten (records dropped, or a delete
        horizon stamped: KIP-534), or None (dropped)."""
        plan = self.plan
        horizon = header.base_timestamp if header.has_delete_horizon else None
        keep_deletes = deletes_retained(horizon, plan.now_ms)
        pid = header.producer_id
        last_of_producer = pid >= 0 and (pid, header.last_offset) in self.plan.producer_last_batches
        if header.is_control:
            marker = parse_txn_marker(data)
            commit = None if marker is None else marker.commit
            removable = txns.on_marker(pid, header.base_offset, commit=commit)
            keep = keep_control_batch(
                marker_removable=removable, retain_deletes=keep_deletes, last_batch_of_producer=last_of_producer
            )
            if not keep:
                return None
            if commit is False:
                entry = txns.keep_abort_marker(pid, header.base_offset)
                if entry is not None:
                    group.aborted.append(entry)
            stamp = delete_horizon_to_stamp(horizon, removable, plan.now_ms, plan.delete_retention_ms)
            return data if stamp is None else rewrite_batch(header, _decode(data, source, pos), delete_horizon_ms=stamp)
        aborted = txns.on_data_batch(pid, header.last_offset, transactional=header.is_transactional)
        retention = data_batch_retention(aborted=aborted, last_batch_of_producer=last_of_producer)
        if retention is BatchRetention.DELETE:
            return None
        records = _decode(data, source, pos)
        self.result.records_read += len(records)
        offsets = self.map
        kept = (
            []
            if aborted
            else [
                r
                for r in records
                if keep_record(
                    r.offset,
                    r.key is not None,
                    r.value is not None,
                    offsets.get(r.key) if r.key is not None else -1,
                    retain_deletes=keep_deletes,
                )
            ]
        )
        self.result.records_kept += len(kept)
        tombstones = any(r.value is None for r in kept)
        stamp = delete_horizon_to_stamp(horizon, tombstones, plan.now_ms, plan.delete_retention_ms)
        if len(kept) == len(records) and stamp is None:
            return data
        if not kept and retention is BatchRetention.DELETE_EMPTY:
            return None
        return rewrite_batch(header, kept, delete_horizon_ms=stamp)


class _GroupWriter:
    """Writes one cleaned segment: ``<base>.log.cleaned``, and its offset and time indexes by the
    rule ``LogSegment._track`` uses (an entry after every ``index.interval.bytes``; the time
    index ends with the segment's largest timestamp, as when a segment stops being active).
    ``finish`` fsyncs all three."""

    def __init__(self, plan: CleaningPlan, base_offset: int) -> None:
        self.group = CleanedGroup(base_offset, [], cleaned_path(plan.directory, base_offset), 0, [], 0)
        index_path, time_path = self.group.index_paths
        self.offset_index = OffsetIndex(index_path, base_offset, plan.segment_index_bytes, exists=False)
        self.time_index = TimeIndex(time_path, base_offset, plan.segment_index_bytes, exists=False)
        self.interval = plan.index_interval_bytes
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max = base_offset
        self.last_index_position = 0
        self.fd = os.open(self.group.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, data: bytes, last_offset: int, max_timestamp: int) -> None:
        position = self.group.size_bytes
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset
        if position - self.last_index_position > self.interval:
            if not self.offset_index.is_full():
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
            self.last_index_position = position
        self.group.size_bytes += _write_all(self.fd, data, position)

    def finish(self) -> None:
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max, skip_full_check=True)
        self.offset_index.flush()
        self.time_index.flush()
        try:
            os.fsync(self.fd)
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _write_all(fd: int, data: bytes, position: int) -> int:
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], position + done)
    return done
