"""``Log``: one topic-partition's segments — append, read, roll, flush, retention, truncation.

Seed 002 §5.4: "a log for a topic named my_topic with two partitions consists of two directories
... populated with data files"; writes go to the last segment, which rolls at ``segment.bytes``
or ``segment.ms``; reads locate the segment "by a simple binary search" over the in-memory base
offsets, then the batch through the segment's offset index; deletion removes whole segments.
§5.4.1: flush after ``flush.messages`` messages or ``flush.ms`` — "at most M messages or S
seconds of data" are lost on a system crash. A process crash (SIGKILL) loses nothing that was
appended: the bytes are in the page cache, and recovery keeps every whole, valid batch.

Threading: a ``Log`` is used from the broker's single asyncio loop (appends and reads of a
partition never run concurrently); it takes no locks. Its file I/O runs on the loop; ``flush``
is the only fsync and is kept separate from appends so that it can move to a thread later.
Offsets are Kafka's: ``log_start_offset`` ≤ every readable offset < ``log_end_offset``;
``recovery_point`` is the offset below which everything is fsynced.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from broker.log.config import Clock, LogConfig
from broker.log.errors import KafkaStorageError, OffsetOutOfRangeError
from broker.log.file_slice import FileSlice
from broker.log.files import fsync_dir
from broker.log.retention import SegmentFacts, segments_to_delete
from broker.log.segment import LogSegment
from broker.log.validate import (
    AppendOrigin,
    BatchInfo,
    ValidationResult,
    validate_and_assign_offsets,
    validate_as_follower,
)
from pyspark_log.records.header import NO_PARTITION_LEADER_EPOCH

LATEST_TIMESTAMP = -1  # ListOffsets special timestamps (Kafka ``ListOffsetsRequest``)
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
BOUNDARY_CACHE_ENTRIES = 4096


class LogAppendInfo(NamedTuple):
    """The result of one append (what ProduceResponse and producer state need)."""

    first_offset: int  # ProduceResponse base_offset
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    log_start_offset: int
    max_timestamp_ms: int
    offset_of_max_timestamp: int
    records_count: int
    size_bytes: int
    batches: tuple[BatchInfo, ...]


class Log:
    """A partition's log in ``directory``. Built by ``broker.log.recovery.load_log`` (existing
    directory) or ``Log.create`` (new one); owned by the ``LogManager``."""

    def __init__(  # noqa: PLR0917 - built by load_log and Log.create only
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
    ) -> None:
        assert segments, "a log has at least one segment"
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._last_flush_ms = clock()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._boundaries: dict[int, tuple[LogSegment, int]] = {}  # offset -> (segment, batch start)
        self._dir_dirty = False
        self.closed = False

    @classmethod
    def create(cls, directory: Path, topic: str, partition: int, config: LogConfig, clock: Clock) -> Log:
        """A new, empty log in an existing empty ``directory``."""
        segment = LogSegment.create(directory, 0, config, clock())
        fsync_dir(directory)
        return cls(directory, topic, partition, config, clock, [segment], 0, 0)

    # -- state ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    # -- append --------------------------------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> LogAppendInfo:
        """Validate ``data`` (whole v2 batches of one request), assign offsets from the log end
        offset, write it. Raises the ``LogError``s of ``validate.py``; KafkaStorageError on I/O."""
        self._check_open()
        now = self._clock()
        result = validate_and_assign_offsets(
            data, self.log_end_offset, self.config, now, origin=origin, partition_leader_epoch=leader_epoch
        )
        return self._append_validated(result, now)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches that keep their offsets (replication; Raft). Offsets must start at or
        after the log end offset and increase (InvalidRecordError otherwise)."""
        self._check_open()
        result = validate_as_follower(data, self.log_end_offset)
        return self._append_validated(result, self._clock())

    def _append_validated(self, result: ValidationResult, now_ms: int) -> LogAppendInfo:
        segment = self._segments[-1]
        if segment.should_roll(result.size_bytes, result.max_timestamp_ms, result.last_offset, now_ms):
            segment = self.roll(result.first_offset)
        position = segment.append(result.buffers, result.size_bytes, result.batches)
        self._remember(result.next_offset, segment, position + result.size_bytes)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset=result.first_offset,
            last_offset=result.last_offset,
            log_append_time_ms=result.log_append_time_ms,
            log_start_offset=self._log_start_offset,
            max_timestamp_ms=result.max_timestamp_ms,
            offset_of_max_timestamp=result.offset_of_max_timestamp,
            records_count=result.records_count,
            size_bytes=result.size_bytes,
            batches=result.batches,
        )

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (default: the log end offset) and
        fsync the old one. An empty active segment is replaced rather than kept."""
        now = self._clock()
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        assert base >= self.log_end_offset, f"cannot roll to {base} below the log end {self.log_end_offset}"
        active = self._segments[-1]
        if active.size_bytes == 0:
            if active.base_offset == base:
                return active
            self._segments.pop()
            self._bases.pop()
            active.delete_files()
        else:
            active.on_become_inactive()
            active.flush()
            active.flush_indexes()
        segment = LogSegment.create(self.directory, base, self.config, now)
        self._segments.append(segment)
        self._bases.append(base)
        self._dir_dirty = True
        self.flush(base)
        return segment

    # -- flush ---------------------------------------------------------------------------------
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to_offset`` (default: all) that has
        unflushed bytes, then the directory if segments were created; advance the recovery point."""
        offset = self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
        if offset <= self._recovery_point and not self._dir_dirty:
            return
        first = max(bisect_right(self._bases, self._recovery_point) - 1, 0)
        active = self._segments[-1]
        for segment in self._segments[first:]:
            if segment.base_offset >= offset:
                break
            segment.flush()
            if segment is not active:
                segment.flush_indexes()
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False
        self._recovery_point = max(self._recovery_point, offset)
        self._last_flush_ms = self._clock()

    def flush_if_due(self, now_ms: int) -> bool:
        """``flush.ms``: flush when data is unflushed and the last flush is that old."""
        if self.unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # -- read ----------------------------------------------------------------------------------
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, *, min_one_batch: bool = True
    ) -> FileSlice:
        """Whole batches from the one containing ``offset`` (a mid-batch offset returns its whole
        batch; clients skip the earlier records), up to ``max_bytes`` — but the first batch whole
        even if larger when ``min_one_batch`` (KIP-74) — never a batch that reaches
        ``max_offset`` (exclusive: the high watermark or last stable offset).

        A read returns batches of one segment only (as Kafka's): the next read continues at
        ``slice.next_offset``. Empty at the end. Raises OffsetOutOfRangeError below the log start
        offset or above the log end offset.
        """
        self._check_open()
        end = self.log_end_offset
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self._log_start_offset}, {end}] of {self.name}")
        upper = end if max_offset is None else min(max_offset, end)
        if offset >= upper:
            return FileSlice.empty(offset)
        limit_segment, limit_position = self._boundary(upper)
        hint = self._boundaries.get(offset)
        index = bisect_right(self._bases, offset) - 1
        for segment in self._segments[max(index, 0) :]:
            if segment.base_offset > limit_segment.base_offset:
                break
            result = segment.read(
                offset,
                max_bytes,
                limit_position if segment is limit_segment else None,
                min_one_batch=min_one_batch,
                position_hint=hint[1] if hint is not None and hint[0] is segment else None,
            )
            if result is not None:
                if result.size:
                    self._remember(result.next_offset, segment, result.position + result.size)
                return result
        return FileSlice.empty(offset)

    def _boundary(self, offset: int) -> tuple[LogSegment, int]:
        """The segment and byte position where the batch holding ``offset`` starts."""
        active = self._segments[-1]
        if offset >= active.next_offset:
            return active, active.size_bytes
        cached = self._boundaries.get(offset)
        if cached is not None:
            return cached
        segment = self._segments[max(bisect_right(self._bases, offset) - 1, 0)]
        position, _ = segment.position_of(offset)
        return segment, position

    def _remember(self, offset: int, segment: LogSegment, position: int) -> None:
        """Cache a batch boundary: most reads start or stop where an append or a read ended."""
        boundaries = self._boundaries
        boundaries[offset] = (segment, position)
        if len(boundaries) > BOUNDARY_CACHE_ENTRIES:
            del boundaries[next(iter(boundaries))]

    # -- offsets by timestamp -----------------------------------------------------------------
    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` of the first record with timestamp ≥
        ``timestamp_ms``; EARLIEST (-2, -4) → (log start offset, -1); LATEST (-1) → (log end
        offset, -1); MAX_TIMESTAMP (-3) → the record with the largest timestamp. None when no
        record qualifies (or the log holds no timestamp for -3)."""
        if timestamp_ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self._log_start_offset, -1
        if timestamp_ms == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        live = [s for s in self._segments if s.next_offset > self._log_start_offset]
        if timestamp_ms == MAX_TIMESTAMP:
            best = max(live, key=lambda s: s.max_timestamp_ms, default=None)
            if best is None or best.max_timestamp_ms < 0:
                return None
            return best.max_timestamp_record()
        for segment in live:
            if segment.max_timestamp_ms >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    # -- truncation ----------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset ≥ ``offset`` (replication, Raft). The cut is at
        the start of the batch holding ``offset``, so the log end offset becomes ``offset`` when
        ``offset`` is a batch boundary. Returns False when there was nothing to remove."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock()
        keep = bisect_right(self._bases, offset)  # segments starting at or below ``offset``
        # the segment holding ``offset`` stays (emptied if it starts there) and becomes active
        holder = self._segments[keep - 1]
        for segment in self._segments[keep:]:
            self._schedule_delete(segment, now)
        del self._segments[keep:]
        del self._bases[keep:]
        holder.truncate_to(offset, now)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (a follower far behind)."""
        now = self._clock()
        for segment in self._segments:
            self._schedule_delete(segment, now)
        segment = LogSegment.create(self.directory, offset, self.config, now)
        self._segments = [segment]
        self._bases = [offset]
        self._log_start_offset = offset
        self._recovery_point = offset
        self._dir_dirty = True
        self._boundaries.clear()
        self.flush()

    def _after_truncation(self) -> None:
        end = self.log_end_offset
        self._recovery_point = min(self._recovery_point, end)
        self._log_start_offset = min(self._log_start_offset, end)
        self._boundaries.clear()

    # -- retention and DeleteRecords ------------------------------------------------------------
    def delete_records_before(self, offset: int, high_watermark: int | None = None) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` and delete the segments wholly
        below it. Raises OffsetOutOfRangeError above the high watermark. Returns the new log start
        offset."""
        limit = self.log_end_offset if high_watermark is None else high_watermark
        if offset < 0 or offset > limit:
            raise OffsetOutOfRangeError(f"cannot delete records before {offset}: high watermark is {limit}")
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.delete_old_segments(high_watermark=high_watermark)
        return self._log_start_offset

    def delete_old_segments(self, now_ms: int | None = None, high_watermark: int | None = None) -> int:
        """Apply ``retention.ms``, ``retention.bytes`` and the log start offset (retention.py);
        returns how many segments were deleted. Their files become ``*.deleted`` and are removed
        ``file.delete.delay.ms`` later by ``delete_pending_files``."""
        now = self._clock() if now_ms is None else now_ms
        hw = self.log_end_offset if high_watermark is None else high_watermark
        total = 0
        while True:
            facts = [
                SegmentFacts(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms, s.last_modified_ms())
                for s in self._segments
            ]
            decision = segments_to_delete(facts, self.config, now, self._log_start_offset, hw)
            if decision.count == 0:
                return total
            if decision.count == len(self._segments):
                self.roll()
            doomed = self._segments[: decision.count]
            del self._segments[: decision.count]
            del self._bases[: decision.count]
            for segment in doomed:
                self._schedule_delete(segment, now)
            self._log_start_offset = max(self._log_start_offset, self._bases[0])
            self._boundaries.clear()
            total += decision.count

    def _schedule_delete(self, segment: LogSegment, now_ms: int) -> None:
        segment.rename_for_deletion()
        self._dir_dirty = True
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))

    def delete_pending_files(self, now_ms: int) -> int:
        """Remove ``*.deleted`` files whose delay has passed; returns how many segments."""
        due = [s for t, s in self._pending_deletes if t <= now_ms]
        if due:
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
            for segment in due:
                segment.delete_files()
        return len(due)

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self, *, flush: bool = True) -> None:
        """Flush (unless told not to), record the active segment's max timestamp, close files.
        Pending ``*.deleted`` files are removed now (open slices keep their inodes)."""
        if self.closed:
            return
        if flush:
            self.flush()
            active = self._segments[-1]
            active.on_become_inactive()
            active.flush_indexes()
        for segment in self._segments:
            segment.close()
        self.delete_pending_files(2**63 - 1)
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"the log of {self.name} is closed (deleted or shut down)")

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for ``<topic>-<partition>``, None for anything else."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit() or "." in number:
        return None
    return topic, int(number)


def remove_tree(path: Path) -> None:
    """Delete a directory tree bottom-up (a deleted partition's renamed directory)."""
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(root, name))
        for name in dirs:
            os.rmdir(os.path.join(root, name))
    os.rmdir(path)
