"""``Log``: one topic-partition's log — append, read, roll, retention, truncation — composed of
three collaborators it owns:

* ``segments``: a ``segments.LogSegments``, the ordered segments and their base offsets (lookup
  by offset, the active segment) and the aborted transactions their ``.txnindex`` files hold;
* ``producer_state``: the partition's ``producer_state.ProducerStateManager`` (idempotence and
  transactions, its snapshot files, its rebuild from the log);
* ``flusher``: a ``flush.LogFlusher``, the recovery point and the flushes that advance it.

The log decides when each is called (an append checks the producer state, writes the active
segment, may request a flush); they hold the state, and nothing else holds it.

Kafka documentation §5.4 "Log": "a log for a topic named my_topic with two partitions consists of two directories
... populated with data files"; writes go to the last segment, which rolls at ``segment.bytes``
or ``segment.ms``; reads locate the segment "by a simple binary search" over the in-memory base
offsets, then the batch through the segment's offset index; deletion removes whole segments.
§5.4.1: flush after ``flush.messages`` messages or ``flush.ms`` — "at most M messages or S
seconds of data" are lost on a system crash. A process crash (SIGKILL) loses nothing that was
appended: the bytes are in the page cache, and recovery keeps every whole, valid batch.

Threading: a ``Log`` is used from the broker's single asyncio loop (appends and reads of a
partition never run concurrently); it takes no locks. Its writes and reads run on the loop; its
fsyncs do not (project rule: nothing over a millisecond on the loop): a roll, ``flush.messages``
and ``flush.ms`` *request* a flush, which runs as a ``flush_job.FlushJob`` in the ``LogManager``'s
worker threads, on duplicated descriptors, and completes asynchronously, as Kafka's "flush-log"
task does. The recovery point advances on the loop only once the job's fsyncs succeeded, and
never above the log end (a truncation meanwhile caps it). ``flush()`` is the blocking form
(shutdown, tools, tests). Without a flush executor (``flusher.executor`` None) every flush is
synchronous. Offsets are Kafka's: ``log_start_offset`` ≤ every readable offset <
``log_end_offset``; ``recovery_point`` is the offset below which everything is fsynced.

Idempotence and transactions (Kafka documentation §4.6 "Message Delivery Semantics", Kafka documentation §3.3
"Producer Configs" (`enable.idempotence`) and §4.6 "Message Delivery Semantics" (transactions)): the log
owns its partition's ``ProducerStateManager`` (``producer_state.py``). Appends of batches with a
producer id are checked against it after validation: a duplicate is acknowledged with its
original offsets and not written; the state changes only once the batches are written. A
snapshot of it is written when a segment rolls (``<new base>.snapshot``) and on a clean close;
snapshots below the first segment go when segments are deleted; the state is reloaded and
replayed from batch headers at start-up and after truncation (``ProducerStateManager.rebuild``).
COMMIT/ABORT markers end transactions; aborted ones are indexed in the ``.txnindex`` of the
segment holding the marker (``LogSegments.index_aborted``), which a read_committed fetch reads
(``LogSegments.collect_aborted_transactions``). Batches without a producer
id skip all of it. A client append is exactly one batch (Kafka's ``LogValidator`` rule for v2
batches; INVALID_RECORD otherwise).

Disk failures (Kafka's log-dir failure, for one log): an I/O error that leaves the log's files
out of step with its memory (rolling, flushing, writing ``.txnindex`` after a marker) marks the
log *failed*: every later append and read raises KafkaStorageError (56), the log is closed
without a snapshot and its dir gets no clean-shutdown marker, so the next start-up recovers it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import NamedTuple

from broker.log.boundary_cache import BoundaryCache
from broker.log.config import Clock, LogConfig
from broker.log.dir_health import LogDirState
from broker.log.errors import InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError
from broker.log.file_slice import FileSlice
from broker.log.files import fsync_dir
from broker.log.flush import LogFlusher
from broker.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BatchMetadata,
    ProducerAppend,
    ProducerStateManager,
    TxnMarker,
    parse_txn_marker,
)
from broker.log.retention import SegmentFacts, segments_to_delete
from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.log.validate import (
    AppendOrigin,
    BatchInfo,
    Buffer,
    ValidationResult,
    validate_and_assign_offsets,
    validate_as_follower,
)
from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.records.header import NO_PARTITION_LEADER_EPOCH

log = logging.getLogger(__name__)

LATEST_TIMESTAMP = -1  # ListOffsets special timestamps (Kafka ``ListOffsetsRequest``)
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


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
    directory) or ``Log.create`` (new one); owned by the ``LogManager``. ``segments``,
    ``producer_state`` and ``flusher`` are its collaborators (module doc)."""

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
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self._config = config
        self._clock = clock
        self.segments = LogSegments(segments)
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        self.flusher = LogFlusher(
            self.name, directory, self.segments, config, clock, recovery_point,
            failure=lambda: self.failure, fail=self._fail,
        )  # fmt: skip
        self._log_start_offset = log_start_offset
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # batch boundaries reads start or stop at (boundary_cache.py: a budget shared by all logs);
        # cleared whenever a segment goes
        self._boundaries = BoundaryCache()
        self.failure: str | None = None  # set by ``_fail``: the log is offline
        self.dir_state: LogDirState | None = None  # its log dir's health (set by the LogManager)
        self.closed = False
        # KIP-405: set by the RemoteLogManager while the topic is tiered; retention.* then applies
        # to the remote tier and local segments go by local.retention.* once copied (there), so
        # delete_old_segments keeps only the log-start rule (DeleteRecords, a follower's start)
        self.tiered = False

    @classmethod
    def create(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """A new, empty log in an existing empty ``directory``."""
        segment = LogSegment.create(directory, 0, config, clock())
        fsync_dir(directory)
        expiration_ms = producer_id_expiration_ms
        return cls(directory, topic, partition, config, clock, [segment], 0, 0, producer_id_expiration_ms=expiration_ms)

    # -- state ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic config change (the ``LogManager`` gives its segments the new config too)."""
        self._config = config
        self.flusher.config = config

    @property
    def log_end_offset(self) -> int:
        return self.segments.active.next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is fsynced (``flusher`` keeps it)."""
        return self.flusher.recovery_point

    @property
    def size_bytes(self) -> int:
        return self.segments.size_bytes

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction, at least the log start offset (a
        hanging transaction whose start was deleted; Kafka ``updateFirstUnstableOffset``); the LSO
        is the smaller of it and the high watermark (None: no transaction is ongoing)."""
        first = self.producer_state.first_unstable_offset()
        return first if first is None or first >= self._log_start_offset else self._log_start_offset

    # -- append --------------------------------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> LogAppendInfo:
        """Validate ``data`` (whole v2 batches; exactly one from a client), assign offsets from the
        log end offset, check the producer state, write it. A duplicate of a cached batch is not
        written: the result then carries its original offsets and no batches. Raises the
        ``LogError``s of ``validate.py`` and ``producer_state.py``, InvalidRecordError for a client
        append of several batches (after validation, so damaged bytes stay CORRUPT_MESSAGE);
        KafkaStorageError on I/O."""
        self._check_writable()
        now = self._clock()
        result = validate_and_assign_offsets(
            data, self.log_end_offset, self._config, now, origin=origin, partition_leader_epoch=leader_epoch
        )
        batches = result.batches
        if len(batches) == 1:
            if batches[0].producer_id < 0:
                return self._append_validated(result, now)
        elif origin is AppendOrigin.CLIENT:
            # Kafka LogValidator / ProduceRequest.validateRecords (v3+): a duplicate in a several-
            # batch append could not be answered without dropping the others.
            raise InvalidRecordError(f"a produce request may hold one record batch per partition, not {len(batches)}")
        elif all(b.producer_id < 0 for b in batches):
            return self._append_validated(result, now)
        return self._append_with_producers(result, now, origin, data)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches that keep their offsets (replication; Raft). Offsets must start at or
        after the log end offset and increase (InvalidRecordError otherwise)."""
        self._check_writable()
        result = validate_as_follower(data, self.log_end_offset)
        if all(b.producer_id < 0 for b in result.batches):
            return self._append_validated(result, self._clock())
        return self._append_with_producers(result, self._clock(), AppendOrigin.REPLICATION, data)

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        commit: bool,
        leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> int:
        """Write a COMMIT or ABORT control batch for ``producer_id`` (the transaction coordinator's
        marker), ending its ongoing transaction here; returns the marker's offset. A marker for a
        producer without an ongoing transaction is written too (as Kafka does). Raises
        InvalidProducerEpochError (epoch older than the producer's), TransactionCoordinatorFencedError
        (coordinator epoch older than its last marker's), KafkaStorageError."""
        self._check_writable()
        now = self._clock()
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        data = encode_control_batch(kind, producer_id, producer_epoch, coordinator_epoch, now)
        origin = AppendOrigin.COORDINATOR
        result = validate_and_assign_offsets(
            data, self.log_end_offset, self._config, now, origin=origin, partition_leader_epoch=leader_epoch
        )
        marker = TxnMarker(commit, coordinator_epoch)
        pending = self.producer_state.prepare(result.batches, origin, lambda _: marker)
        self._append_validated(result, now)
        self._complete(pending, result.next_offset)
        return result.first_offset

    def _append_with_producers(
        self, result: ValidationResult, now_ms: int, origin: AppendOrigin, data: Buffer
    ) -> LogAppendInfo:
        # ``BatchInfo.position`` is the batch's place in ``data`` too (headers keep their size)
        pending = self.producer_state.prepare(result.batches, origin, lambda b: parse_txn_marker(data, b.position))
        if pending.duplicate is not None:
            batch, dup = result.batches[0], pending.duplicate
            log.info("%s: producer %d epoch %d sequences %d-%d repeat the batch at offsets %d-%d; acknowledged, "
                     "not written again", self.name, batch.producer_id, batch.producer_epoch, dup.first_seq,
                     dup.last_seq, dup.first_offset, dup.last_offset)  # fmt: skip
            return self._duplicate_info(dup)
        info = self._append_validated(result, now_ms)
        self._complete(pending, result.next_offset)
        return info

    def _complete(self, pending: ProducerAppend, next_offset: int) -> None:
        """Install the producer-state changes of a written append; index its aborted transactions
        in the segment that holds their markers (the active one). A failed index write fails the
        log: the marker is in the log but not in the index a read_committed fetch relies on."""
        aborted = self.producer_state.apply(pending, next_offset)
        if aborted:
            try:
                self.segments.index_aborted(aborted)
            except OSError as exc:
                raise self._fail("writing the transaction index", exc) from exc

    def _duplicate_info(self, duplicate: BatchMetadata) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            log_append_time_ms=duplicate.timestamp_ms if self._config.log_append_time else -1,
            log_start_offset=self._log_start_offset,
            max_timestamp_ms=duplicate.timestamp_ms,
            offset_of_max_timestamp=duplicate.last_offset,
            records_count=0,
            size_bytes=0,
            batches=(),
        )

    def _append_validated(self, result: ValidationResult, now_ms: int) -> LogAppendInfo:
        segment = self.segments.active
        if segment.should_roll(result.size_bytes, result.max_timestamp_ms, result.last_offset, now_ms):
            segment = self.roll(result.first_offset)
        try:
            position = segment.append(result.buffers, result.size_bytes, result.batches)
        except KafkaStorageError as exc:  # the segment truncated its file back: the log is consistent
            if isinstance(exc.__cause__, OSError):
                self._report_io_error(f"appending to {segment.log_path.name} of {self.name}", exc.__cause__)
            raise
        self._remember(result.next_offset, segment, position + result.size_bytes)
        flusher = self.flusher
        if result.next_offset - flusher.recovery_point >= self._config.flush_messages:
            flusher.request(result.next_offset)  # completes asynchronously (Kafka too)
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
        """Start a new active segment at ``new_base_offset`` (default: the log end offset),
        snapshot the producer state at the new base, and request a flush up to that base (Kafka
        schedules "flush-log" with ``flushUptoOffsetExclusive(newSegment.baseOffset)``): the old
        segment, its indexes, the snapshot and the directory are fsynced by that flush, before
        the recovery point reaches the base. An empty active segment is replaced, not kept."""
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        assert base >= self.log_end_offset, f"cannot roll to {base} below the log end {self.log_end_offset}"
        try:
            return self._roll(base)
        except OSError as exc:
            raise self._fail(f"rolling to a segment at {base}", exc) from exc

    def _roll(self, base: int) -> LogSegment:
        now = self._clock()
        active = self.segments.active
        if active.size_bytes == 0:
            if active.base_offset == base:
                return active
            active.delete_files()  # replaced by the new segment, below
            self.producer_state.delete_snapshot(active.base_offset)
        else:
            active.on_become_inactive()
        self.flusher.sync_before(self.producer_state.take_snapshot(base, sync=False), base - 1)
        segment = LogSegment.create(self.directory, base, self._config, now)
        self.segments.add(segment)
        self.flusher.directory_changed()
        self.flusher.request(base)
        return segment

    def flush(self, up_to_offset: int | None = None) -> None:
        """Blocking flush up to ``up_to_offset`` (default: the log end; Kafka ``UnifiedLog.flush``)
        for close, tools and tests: ``LogFlusher.flush``. Raises KafkaStorageError when an fsync
        failed (the log is failed then)."""
        self.flusher.flush(up_to_offset)

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
        for segment in self.segments.from_offset(offset):
            if segment.base_offset > limit_segment.base_offset:
                break
            result = segment.read(
                offset,
                max_bytes,
                limit_position if segment is limit_segment else None,
                min_one_batch=min_one_batch,
                position_hint=hint[1] if hint is not None and hint[0] == segment.base_offset else None,
            )
            if result is not None:
                if result.size:
                    self._remember(result.next_offset, segment, result.position + result.size)
                return result
        return FileSlice.empty(offset)

    def _boundary(self, offset: int) -> tuple[LogSegment, int]:
        """The segment and byte position where the batch holding ``offset`` starts."""
        segments = self.segments
        active = segments.active
        if offset >= active.next_offset:
            return active, active.size_bytes
        cached = self._boundaries.get(offset)
        if cached is not None:
            holder = segments.with_base(cached[0])
            if holder is not None:
                return holder, cached[1]
        segment = segments.floor(offset)
        position, _ = segment.position_of(offset)
        return segment, position

    def _remember(self, offset: int, segment: LogSegment, position: int) -> None:
        """Cache a batch boundary: most reads start or stop where an append or a read ended."""
        self._boundaries.put(offset, segment.base_offset, position)

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
        live = [s for s in self.segments if s.next_offset > self._log_start_offset]
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
        if offset < self.segments.first.base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock()
        for segment in self.segments.above(offset):
            self._schedule_delete(segment, now)
        # the segment holding ``offset`` stays (emptied if it starts there) and becomes active
        self.segments.truncate_to(offset, now)
        end = self.log_end_offset
        self.flusher.truncated(end)  # bytes appended after the cut are not in a flush in flight
        self._log_start_offset = min(self._log_start_offset, end)
        self._boundaries.clear()
        self.producer_state.rebuild(self.segments, end, now)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (a follower far behind)."""
        now = self._clock()
        for segment in self.segments:
            self._schedule_delete(segment, now)
        self.producer_state.delete_snapshots(lambda _: True)
        self.producer_state.reset(offset)
        self.segments.reset(LogSegment.create(self.directory, offset, self._config, now))
        self._log_start_offset = offset
        self.flusher.restarted_at(offset)
        self._boundaries.clear()
        self.flush()  # blocking, but rare: a follower restarting below the leader's log start

    # -- retention and DeleteRecords ------------------------------------------------------------
    def delete_records_before(self, offset: int, high_watermark: int | None = None) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` and delete the segments wholly
        below it. Raises OffsetOutOfRangeError above the high watermark. Returns the new log start
        offset."""
        self._check_open()
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
        ``file.delete.delay.ms`` later by ``delete_pending_files``; their producer snapshots go at
        once. Producers idle for ``producer.id.expiration.ms`` are forgotten here too (deleting a
        producer's batches does not remove it, as in Kafka 3.x)."""
        if self.failure is not None:
            return 0
        now = self._clock() if now_ms is None else now_ms
        hw = self.log_end_offset if high_watermark is None else high_watermark
        self.producer_state.remove_expired(now)
        segments = self.segments
        config = dataclasses.replace(self._config, retention_ms=-1, retention_bytes=-1) if self.tiered else self._config
        total = 0
        while True:
            facts = [
                SegmentFacts(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms, s.last_modified_ms())
                for s in segments
            ]
            decision = segments_to_delete(facts, config, now, self._log_start_offset, hw)
            if decision.count == 0:
                return total
            if decision.count == len(segments):
                self.roll()
            for segment in segments.remove_first(decision.count):
                self._schedule_delete(segment, now)
            first = segments.first.base_offset
            self.producer_state.delete_snapshots_before(first)  # clean-shutdown ones in them too
            self._log_start_offset = max(self._log_start_offset, first)
            self._boundaries.clear()
            total += decision.count

    def _schedule_delete(self, segment: LogSegment, now_ms: int) -> None:
        segment.rename_for_deletion()
        self.flusher.directory_changed()
        self._pending_deletes.append((now_ms + self._config.file_delete_delay_ms, segment))

    def replace_segments(self, old: list[LogSegment], new: LogSegment, now_ms: int) -> None:
        """Log compaction (``broker.log.cleaner.swap``): ``new`` takes the place of the consecutive,
        inactive ``old`` segments, whose files the caller renamed to ``*.deleted``."""
        self.segments.replace(old, new)
        self._pending_deletes.extend((now_ms + self._config.file_delete_delay_ms, s) for s in old)
        self._boundaries.clear()

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
        """Flush (unless told not to, or the log failed), record the active segment's max
        timestamp, snapshot the producer state at the log end, close files. Pending ``*.deleted``
        files are removed now (open slices keep their inodes)."""
        if self.closed:
            return
        if flush and self.failure is None:
            self.flush()
            active = self.segments.active
            active.on_become_inactive()
            active.flush_indexes()
            self._snapshot_on_close()
        for segment in self.segments:
            segment.close()
        self.delete_pending_files(2**63 - 1)
        self._boundaries.close()
        self.closed = True
        self.flusher.close()

    def rename_directory(self, directory: Path) -> None:
        """Rename the log's directory to ``directory`` (same filesystem) while it stays open, as
        Kafka's ``UnifiedLog.renameDir`` (AlterReplicaLogDirs swaps a future log in this way): the
        open descriptors stay valid, the paths of every segment, pending deletion and producer
        snapshot follow. Call with no flush in flight (its job names the old paths)."""
        self._check_open()
        if self.flusher.in_flight is not None:
            raise KafkaStorageError(f"{self.name}: cannot rename its directory while a flush is in flight")
        os.replace(self.directory, directory)
        self.directory = directory
        for segment in (*self.segments, *(s for _, s in self._pending_deletes)):
            segment.moved_to(directory)
        self.producer_state.directory = directory
        self.flusher.moved_to(directory)

    def _snapshot_on_close(self) -> None:
        """Snapshot the producer state at the log end, so that the next start-up replays nothing;
        skipped when that snapshot exists unchanged, or for an empty log without producers."""
        state = self.producer_state
        end = self.log_end_offset
        if end == 0 and not state.producers:
            return
        if state.changed_since_snapshot or not state.has_snapshot_at(end):
            try:
                state.take_snapshot(end)
            except OSError as exc:  # harmless: the next start-up replays from an older snapshot
                log.warning("%s: cannot write the producer snapshot at %d: %s", self.name, end, exc)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"the log of {self.name} is closed (deleted or shut down)")
        if self.failure is not None:
            raise KafkaStorageError(f"the log of {self.name} is offline after a disk error: {self.failure}")

    def _check_writable(self) -> None:
        """``_check_open``, and the log dir online: an offline dir refuses appends without I/O."""
        self._check_open()
        state = self.dir_state
        if state is not None and state.offline:
            raise KafkaStorageError(f"the log dir {state.path} of {self.name} is offline: {state.error}")

    def _report_io_error(self, what: str, exc: OSError) -> None:
        if self.dir_state is not None:
            self.dir_state.fail(what, exc, self._clock())

    def _fail(self, what: str, exc: OSError) -> KafkaStorageError:
        """Mark the log failed after an I/O error during ``what``; returns the error to raise."""
        self.failure = f"{what}: {exc}"
        self.flusher.settle_waiters()
        self._report_io_error(f"{what} of {self.name}", exc)
        log.error("%s: %s failed; the log is offline until the broker restarts: %s", self.name, what, exc)
        return KafkaStorageError(f"{what} failed for {self.name}: {exc}")

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )
