"""``LogFlusher``: one log's recovery point and the flushes that advance it, off the event loop
(Kafka documentation §5.4.1 "Writes": ``flush.messages`` / ``flush.ms``; Kafka's "flush-log"
task, which a roll schedules to flush up to the new segment's base offset).

The recovery point is the offset below which everything of the log is fsynced: a start-up after
a crash trusts the segments below it and recovers the rest. A flush runs as a
``flush_job.FlushJob``: built on the loop (``_build``: the segments from the one holding the
recovery point up to the target hand over their unsynced files, then the files ``sync_before``
named and the directory if entries changed), fsynced in a worker thread (the ``LogManager``'s
pool, ``executor``; inline without one), finished on the loop (``_finish``). Only then does the
recovery point move, to ``min(job.cap, log end offset)``: ``cap`` starts at the job's target
and only goes down while the job is in flight — a truncation below it (bytes written after the
cut were not in the job) and ``sync_before`` (a file written after the job was built that must
be durable before the recovery point passes some offset) lower it. A job that failed fails the
log (Kafka's log-dir failure): after a failed fsync the page cache may have dropped the data.

A log has at most one job in flight; requests meanwhile merge into one follow-up flush.
Produces that must answer only once durable (``flush.messages`` reached) wait in
``DurableWaiters``; they complete when the recovery point passes them, or fail when the log
fails or closes. ``flush`` is the blocking form (shutdown, tools, tests). Everything but a job's
``run`` happens on the broker's one asyncio loop; no locks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from broker.log.config import Clock, LogConfig
from broker.log.errors import KafkaStorageError
from broker.log.flush_job import FlushJob
from broker.log.segments import LogSegments

log = logging.getLogger(__name__)

# Called on the loop with each finished job's fsync time in ms (the broker's LogFlushStats
# histogram, ``broker.metrics``); None: not measured.
flush_time_observer: Callable[[float], None] | None = None


class DurableWaiters:
    """Produces waiting for the recovery point to reach an offset (``flush.messages``)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, offset: int) -> asyncio.Future[None]:
        """A future done when ``settle`` reaches ``offset`` (call on the running loop)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((offset, future))
        return future

    def highest(self) -> int | None:
        return max((offset for offset, _ in self._waiting), default=None)

    def settle(self, reached: int) -> None:
        """Complete every waiter at or below ``reached``."""
        self._complete(lambda offset: offset <= reached, None)

    def release_above(self, end: int) -> None:
        """Complete the waiters above ``end`` (a truncation removed their batches)."""
        self._complete(lambda offset: offset > end, None)

    def fail_all(self, error: Exception) -> None:
        self._complete(lambda _: True, error)

    def _complete(self, chosen: Callable[[int], bool], error: Exception | None) -> None:
        keep = []
        for offset, future in self._waiting:
            if not chosen(offset):
                keep.append((offset, future))
            elif not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
        self._waiting = keep


class LogFlusher:
    """The recovery point of the log ``name`` in ``directory`` over ``segments``, the files that
    must be synced before it moves, the flush job in flight and the produces waiting for one.

    The owning ``Log`` passes ``failure`` (the reason the log is offline, or None: a failed log
    starts no flush) and ``fail`` (takes the log offline after an I/O error; returns the error to
    raise), closes it with the log (``close``) and keeps ``directory`` (``moved_to``) and
    ``config`` (``flush.messages``, ``flush.ms``) current.
    """

    def __init__(  # noqa: PLR0917 - built by Log only
        self,
        name: str,
        directory: Path,
        segments: LogSegments,
        config: LogConfig,
        clock: Clock,
        recovery_point: int,
        *,
        failure: Callable[[], str | None],
        fail: Callable[[str, OSError], KafkaStorageError],
    ) -> None:
        self.name = name
        self.directory = directory
        self.config = config
        self.recovery_point = recovery_point
        self.executor: Executor | None = None  # the LogManager's threads; None: jobs run inline
        self.in_flight: FlushJob | None = None
        self.wanted: int | None = None  # the largest target asked for while a job was in flight
        self.waiters = DurableWaiters()  # produces waiting for a flush (``flush.messages``)
        self.last_flush_ms = clock()
        self._segments = segments
        self._clock = clock
        self.closed = False
        self._failure = failure
        self._fail = fail
        self._dir_dirty = False  # entries of the directory changed since the last flush
        self._unsynced_files: list[Path] = []  # replaced without fsync: the next flush syncs them

    @property
    def unflushed_messages(self) -> int:
        return self._segments.next_offset - self.recovery_point

    # -- what the log tells it -------------------------------------------------------------------
    def directory_changed(self) -> None:
        """A file of the directory was created, renamed or removed: the next flush syncs it."""
        self._dir_dirty = True

    def sync_before(self, path: Path, offset: int) -> None:
        """``path``, a file of this log's directory replaced without fsync (``files.write_replace``),
        must be durable before the recovery point exceeds ``offset``: the next flush fsyncs it and
        the directory first; a flush already in flight (which does not hold it) and the recovery
        point itself are capped at ``offset`` meanwhile (lowering it only costs recovery work)."""
        if path not in self._unsynced_files:
            self._unsynced_files.append(path)
        self.recovery_point = min(self.recovery_point, max(offset, 0))
        self._cap(max(offset, 0))

    def truncated(self, end: int) -> None:
        """The log was cut back to ``end``: the recovery point and a flush in flight stay at or
        below it, and produces waiting above it are released (their batches are gone: answered as
        acks=1 is)."""
        self.recovery_point = min(self.recovery_point, end)
        self._cap(end)
        self.waiters.release_above(end)

    def restarted_at(self, offset: int) -> None:
        """The log was emptied and starts at ``offset``: nothing below needs a flush."""
        self.recovery_point = offset
        self._cap(offset)
        self.waiters.release_above(offset)
        self._dir_dirty = True

    def moved_to(self, directory: Path) -> None:
        """The log's directory was renamed to ``directory`` (no job in flight)."""
        self.directory = directory
        self._unsynced_files = [directory / path.name for path in self._unsynced_files]
        self._dir_dirty = True

    def close(self) -> None:
        """The log closed: no flush starts any more; produces still waiting fail."""
        self.closed = True
        self.settle_waiters()

    def settle_waiters(self) -> None:
        """Complete the waiters the recovery point passed, or fail them all (log failed or closed)."""
        if self.closed or self._failure() is not None:
            error = KafkaStorageError(f"the log of {self.name} failed or closed before its flush completed")
            self.waiters.fail_all(error)
        else:
            self.waiters.settle(min(self.recovery_point, self._segments.next_offset))

    # -- flushing --------------------------------------------------------------------------------
    def request(self, target: int) -> None:
        """Flush up to ``target`` in the background (at once and inline without an executor).
        Call on the running event loop when there is an executor. Raises KafkaStorageError when
        building the job failed, and, inline, when its fsyncs failed."""
        if self.in_flight is not None:
            self.wanted = target if self.wanted is None else max(self.wanted, target)
            return
        job = self._build(target)
        if job is None:
            return
        if self.executor is not None:
            try:
                future = asyncio.get_running_loop().run_in_executor(self.executor, job.run)
            except RuntimeError:  # no running loop, or the pool is shut down: run it here
                pass
            else:
                self.in_flight = job
                future.add_done_callback(lambda _: self._completed(job))
                return
        job.run()
        self._apply(job, raise_error=True)

    def flush(self, up_to_offset: int | None = None) -> None:
        """Blocking flush (close, tools, tests): wait for the flush in flight, then fsync every
        segment holding offsets below ``up_to_offset`` (default: all) that has unflushed bytes,
        the files ``sync_before`` named, then the directory if entries changed; advance the
        recovery point. Raises KafkaStorageError when an fsync failed (the log is failed then)."""
        failed_before = self._failure() is not None
        target = self._segments.next_offset if up_to_offset is None else up_to_offset
        self._wait()
        job = self._build(target)
        if job is not None:
            job.run()
            self._apply(job, raise_error=True)
        if self.wanted is not None and self.wanted <= target:
            self.wanted = None
        failure = self._failure()
        if failure is not None and not failed_before:
            raise KafkaStorageError(f"flush failed for {self.name}: {failure}")

    def flush_async(self, offset: int) -> asyncio.Future[None]:
        """Start a background flush up to ``offset`` (at most the log end) and return a future
        done once the recovery point reaches it (failed with KafkaStorageError if the log fails
        or closes first). Needs ``executor`` set (the broker's logs); call on the loop."""
        target = min(offset, self._segments.next_offset)
        if self.recovery_point >= target:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        waiter = self.waiters.add(target)
        self.request(target)
        return waiter

    def wait_durable(self, offset: int) -> asyncio.Future[None] | None:
        """``flush.messages``: a future done once the recovery point reaches ``offset`` (failed with
        KafkaStorageError if the log fails or closes first), for a produce to answer only then, as
        Kafka's append returns after its fsync; None when it is there already or no flush is
        pending for it (``flush.messages`` not reached: a roll's or ``flush.ms``'s flush is not
        waited for, as Kafka's append does not). Call on the event loop, after an append."""
        if self.recovery_point >= offset or self.unflushed_messages < self.config.flush_messages:
            return None
        if self.in_flight is None and self.wanted is None:
            return None
        return self.waiters.add(offset)

    def flush_if_due(self, now_ms: int) -> bool:
        """``flush.ms``: request a flush when data is unflushed and the last flush started that
        long ago; it completes asynchronously (with an executor)."""
        due = self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms
        if due and self._failure() is None and self.in_flight is None:
            self.request(self._segments.next_offset)
            return True
        return False

    # -- the job's two halves on the loop --------------------------------------------------------
    def _build(self, up_to_offset: int) -> FlushJob | None:
        """The loop's part of a flush up to ``up_to_offset``; None when the log is closed or
        failed, or nothing needs syncing. Raises KafkaStorageError on I/O (the log fails)."""
        if self.closed or self._failure() is not None:
            return None
        segments = self._segments
        offset = min(up_to_offset, segments.next_offset)
        if offset <= self.recovery_point and not self._dir_dirty and not self._unsynced_files:
            return None
        job = FlushJob(offset)
        try:
            active = segments.active
            for segment in segments.from_offset(self.recovery_point):
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
        self.last_flush_ms = self._clock()
        return job

    def _finish(self, job: FlushJob) -> Exception | None:
        """The loop's part after the fsyncs: advance the recovery point to the job's (capped)
        target, never above the log end; or fail the log (returns the error to raise)."""
        if job.error is not None:
            what, exc = job.error
            if self.closed or self._failure() is not None:
                log.warning("%s: fsync of %s failed after the log closed or failed: %s", self.name, what, exc)
                return None
            return self._fail(f"fsync of {what}", exc)  # the page cache may have dropped the data
        if not self.closed:
            self.recovery_point = max(self.recovery_point, min(job.cap, self._segments.next_offset))
        self.settle_waiters()
        return None

    def _completed(self, job: FlushJob) -> None:
        """A background job finished (a done callback on the loop): apply it, start the follow-up."""
        if job.handled:
            return  # ``_wait`` applied it already
        self._apply(job, raise_error=False)
        highest = self.waiters.highest()  # a capped job left produces waiting: flush for them too
        if highest is not None:
            self.wanted = highest if self.wanted is None else max(self.wanted, highest)
        if self.wanted is not None and self.in_flight is None:
            target, self.wanted = self.wanted, None
            try:
                self.request(target)
            except Exception:
                log.debug("follow-up flush not started", exc_info=True)

    def _apply(self, job: FlushJob, *, raise_error: bool) -> None:
        job.handled = True
        if flush_time_observer is not None and not job.empty:
            flush_time_observer(job.elapsed_ms)
        if self.in_flight is job:
            self.in_flight = None
        error = self._finish(job)
        if error is not None and raise_error:
            raise error

    def _wait(self) -> None:
        """Block until no job is in flight, applying its outcome (its error is not raised: the
        log is failed then). The follow-up is left to the caller's own flush."""
        job = self.in_flight
        if job is not None:
            job.done.wait()
            self._apply(job, raise_error=False)

    def _cap(self, offset: int) -> None:
        """The job in flight may not take the recovery point above ``offset`` (a truncation, or a
        file it does not hold that must be durable first); a follow-up flush will."""
        job = self.in_flight
        if job is not None and offset < job.cap:
            job.cap = offset
            self.wanted = job.target if self.wanted is None else max(self.wanted, job.target)
