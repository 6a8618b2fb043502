"""The flush part of ``Log`` (Kafka documentation §5.4.1 "Writes"): requesting flushes, the blocking ``flush``, waiting
for durability (``flush.messages``), files that must be synced before the recovery point passes
an offset, and the loop's two halves of a ``flush.FlushJob`` (built here, fsynced in a worker
thread, finished here). ``log.py``'s module doc gives the threading contract."""

from __future__ import annotations

import abc
import asyncio
import logging
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from broker.log.config import LogConfig
from broker.log.errors import KafkaStorageError
from broker.log.flush import FlushJob, FlushScheduler
from broker.log.segment import LogSegment

log = logging.getLogger(__name__)


class LogFlushing(abc.ABC):
    """Flushes of a ``Log`` (see the module doc)."""

    directory: Path
    config: LogConfig
    failure: str | None
    closed: bool
    _clock: Callable[[], int]
    _segments: list[LogSegment]
    _bases: list[int]
    _recovery_point: int
    _last_flush_ms: int
    _dir_dirty: bool
    _unsynced_files: list[Path]
    _flusher: FlushScheduler

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def unflushed_messages(self) -> int: ...

    @abc.abstractmethod
    def _fail(self, what: str, exc: OSError) -> KafkaStorageError: ...

    @property
    def flush_executor(self) -> Executor | None:
        """Where flush jobs run (the ``LogManager``'s threads); None: synchronously, inline."""
        return self._flusher.executor

    @flush_executor.setter
    def flush_executor(self, executor: Executor | None) -> None:
        self._flusher.executor = executor

    @property
    def flush_in_flight(self) -> bool:
        return self._flusher.in_flight is not None

    def flush(self, up_to_offset: int | None = None) -> None:
        """Blocking flush (close, tools, tests): wait for the flush in flight, then fsync every
        segment holding offsets below ``up_to_offset`` (default: all) that has unflushed bytes,
        the files ``sync_before`` named, then the directory if entries changed; advance the
        recovery point. Raises KafkaStorageError when an fsync failed (the log is failed then)."""
        failed_before = self.failure is not None
        self._flusher.run_now(self.log_end_offset if up_to_offset is None else up_to_offset)
        if self.failure is not None and not failed_before:
            raise KafkaStorageError(f"flush failed for {self.name}: {self.failure}")

    def flush_async(self, offset: int) -> asyncio.Future[None]:
        """Start a background flush up to ``offset`` (at most the log end) and return a future
        done once the recovery point reaches it (failed with KafkaStorageError if the log fails
        or closes first). Needs ``flush_executor`` set (the broker's logs); call on the loop."""
        target = min(offset, self.log_end_offset)
        if self._recovery_point >= target:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        waiter = self._flusher.waiters.add(target)
        self._flusher.request(target)
        return waiter

    def wait_durable(self, offset: int) -> asyncio.Future[None] | None:
        """``flush.messages``: a future done once the recovery point reaches ``offset`` (failed with
        KafkaStorageError if the log fails or closes first), for a produce to answer only then, as
        Kafka's append returns after its fsync; None when it is there already or no flush is
        pending for it (``flush.messages`` not reached: a roll's or ``flush.ms``'s flush is not
        waited for, as Kafka's append does not). Call on the event loop, after an append."""
        if self._recovery_point >= offset or self.unflushed_messages < self.config.flush_messages:
            return None
        if not self.flush_in_flight and self._flusher.wanted is None:
            return None
        return self._flusher.waiters.add(offset)

    def _settle_durable_waiters(self) -> None:
        """Complete the waiters the recovery point passed, or fail them all (log failed or closed)."""
        if self.failure is not None or self.closed:
            error = KafkaStorageError(f"the log of {self.name} failed or closed before its flush completed")
            self._flusher.waiters.fail_all(error)
        else:
            self._flusher.waiters.settle(min(self._recovery_point, self.log_end_offset))

    def sync_before(self, path: Path, offset: int) -> None:
        """``path``, a file of this log's directory replaced without fsync (``files.write_replace``),
        must be durable before the recovery point exceeds ``offset``: the next flush fsyncs it and
        the directory first; a flush already in flight (which does not hold it) and the recovery
        point itself are capped at ``offset`` meanwhile (lowering it only costs recovery work)."""
        if path not in self._unsynced_files:
            self._unsynced_files.append(path)
        self._recovery_point = min(self._recovery_point, max(offset, 0))
        self._flusher.cap(max(offset, 0))

    def _build_flush_job(self, up_to_offset: int) -> FlushJob | None:
        """The loop's part of a flush up to ``up_to_offset`` (see ``flush.py``); None when the
        log is closed or failed, or nothing needs syncing. Raises KafkaStorageError on I/O."""
        if self.closed or self.failure is not None:
            return None
        offset = min(up_to_offset, self.log_end_offset)
        if offset <= self._recovery_point and not self._dir_dirty and not self._unsynced_files:
            return None
        job = FlushJob(offset)
        try:
            first = max(bisect_right(self._bases, self._recovery_point) - 1, 0)
            active = self._segments[-1]
            for segment in self._segments[first:]:
                if segment.base_offset >= offset:
                    break
                segment.add_to_flush(job, indexes=segment is not active)
            for path in self._unsynced_files:
                job.add_path(path, str(path))
            if self._dir_dirty or self._unsynced_files:
                job.add_dir(self.directory)
        except OSError as exc:
            job.discard()
            raise self._fail("preparing a flush", exc) from exc
        self._unsynced_files.clear()
        self._dir_dirty = False
        self._last_flush_ms = self._clock()
        return job

    def _finish_flush_job(self, job: FlushJob) -> Exception | None:
        """The loop's part after the fsyncs: advance the recovery point to the job's (capped)
        target, never above the log end; or fail the log (returns the error to raise)."""
        if job.error is not None:
            what, exc = job.error
            if self.closed or self.failure is not None:
                log.warning("%s: fsync of %s failed after the log closed or failed: %s", self.name, what, exc)
                return None
            return self._fail(f"fsync of {what}", exc)  # the page cache may have dropped the data
        if not self.closed:
            self._recovery_point = max(self._recovery_point, min(job.cap, self.log_end_offset))
        self._settle_durable_waiters()
        return None

    def flush_if_due(self, now_ms: int) -> bool:
        """``flush.ms``: request a flush when data is unflushed and the last flush started that
        long ago; it completes asynchronously (with a flush executor)."""
        due = self.unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms
        if due and self.failure is None and not self.flush_in_flight:
            self._flusher.request(self.log_end_offset)
            return True
        return False
