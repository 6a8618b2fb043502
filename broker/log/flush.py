"""Log flushes off the event loop (Kafka documentation §5.4.1 "Writes" ``flush.messages`` / ``flush.ms``; Kafka's
"flush-log" task, which a roll schedules to flush up to the new segment's base offset).

Project rule: nothing that can take more than a millisecond runs on the broker's event loop, and
an fsync can take tens of milliseconds. A ``FlushJob`` splits one flush of a ``Log`` in two:

1. **On the loop** (``Log._build_flush_job``): decide what must be synced, write pending index
   entries into the page cache, and take one file descriptor per file — ``os.dup`` of a segment's
   open descriptor, or a fresh ``open`` of a path (indexes, producer snapshots, the
   leader-epoch checkpoint, the partition directory). The job owns these descriptors: a segment
   that the loop truncates, closes, renames to ``*.deleted`` or removes meanwhile cannot break the
   job (the duplicated descriptor still names the same inode; fsyncing a removed file is harmless).
2. **In a worker thread** (``run``): fsync every file, then the directories, then close every
   descriptor, whatever failed. The first ``OSError`` is kept in ``error``.

Back on the loop the log advances its recovery point to ``min(cap, log end offset)``, never
before the thread finished: ``cap`` starts at ``target`` and only goes down while the job is in
flight — a truncation below it (bytes written after the cut were not in the job) and
``Log.sync_before`` (a file written after the job was built that must be durable before the
recovery point passes some offset) lower it. A job that failed fails the log (Kafka's log-dir
failure): after a failed fsync the page cache may have dropped the data.

A log has at most one job in flight; requests meanwhile are merged into one follow-up flush.
Jobs run in the ``LogManager``'s small thread pool; a log without one (unit tests, tools) runs
each job inline, synchronously, as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from broker.log.files import fsync_dir_fd

log = logging.getLogger(__name__)

# Called on the loop with each finished job's fsync time in ms (the broker's LogFlushStats
# histogram, ``broker.metrics``); None: not measured.
flush_time_observer: Callable[[float], None] | None = None


class FlushJob:
    """The files one flush makes durable; built on the loop, run once in a thread (or inline)."""

    def __init__(self, target: int) -> None:
        self.target = target  # the recovery point once done (unless capped)
        self.cap = target
        self._files: list[tuple[int, str]] = []  # (descriptor, what) fsynced first
        self._dirs: list[tuple[int, str]] = []  # then these
        self.error: tuple[str, OSError] | None = None  # the first failure: (what, error)
        self.done = threading.Event()  # set when ``run`` finished (descriptors closed)
        self.handled = False  # the log has applied the outcome
        self.elapsed_ms = 0.0  # how long ``run`` took

    def __repr__(self) -> str:
        return f"FlushJob(target={self.target}, cap={self.cap}, files={len(self._files)}, dirs={len(self._dirs)})"

    @property
    def empty(self) -> bool:
        return not self._files and not self._dirs

    def add_dup(self, fd: int, what: str) -> None:
        """Sync the file open as ``fd`` (duplicated here: the caller keeps and may close its own)."""
        self._files.append((os.dup(fd), what))

    def add_fd(self, fd: int, what: str) -> None:
        """Sync the file open as ``fd``; the job takes ownership (closes it)."""
        self._files.append((fd, what))

    def add_path(self, path: os.PathLike[str], what: str) -> None:
        """Sync the file at ``path``; nothing when it no longer exists (deleted: nothing to keep)."""
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            return
        self._files.append((fd, what))

    def add_dir(self, path: os.PathLike[str]) -> None:
        """Sync the directory at ``path`` (after every file)."""
        self._dirs.append((os.open(path, os.O_RDONLY | os.O_DIRECTORY), f"directory {path}"))

    def discard(self) -> None:
        """Close every descriptor without syncing (building the job failed half-way)."""
        for fd, _ in (*self._files, *self._dirs):
            os.close(fd)
        self._files.clear()
        self._dirs.clear()
        self.done.set()

    def run(self) -> None:
        """fsync the files, then the directories; close every descriptor; set ``done``. Blocking:
        a worker thread's job. Never raises (a failure is kept in ``error``)."""
        started = time.perf_counter()
        try:
            for fd, what in self._files:
                self._sync(fd, what, directory=False)
            for fd, what in self._dirs:
                self._sync(fd, what, directory=True)
        finally:
            for fd, _ in (*self._files, *self._dirs):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.elapsed_ms = (time.perf_counter() - started) * 1000
            self.done.set()

    def _sync(self, fd: int, what: str, *, directory: bool) -> None:
        if self.error is not None:
            return  # the log fails anyway: do not wait for more fsyncs
        try:
            if directory:
                fsync_dir_fd(fd)
            else:
                os.fsync(fd)
        except OSError as exc:
            self.error = (what, exc)


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


class FlushScheduler:
    """One log's flush jobs: at most one in flight; requests meanwhile merge into one follow-up.

    ``build(target)`` (the log, on the loop) returns the job for a flush up to ``target`` or None
    when nothing needs syncing; ``finish(job)`` applies a finished job's outcome on the loop and
    returns the error to raise for a failed one. ``executor`` (set by the ``LogManager``) runs the
    jobs; without one they run inline. ``request`` must be called on the running event loop when
    there is an executor; ``run_now`` and ``wait`` block (close, tools, tests).
    """

    def __init__(self, build: Callable[[int], FlushJob | None], finish: Callable[[FlushJob], Exception | None]) -> None:
        self.executor: Executor | None = None
        self.in_flight: FlushJob | None = None
        self.wanted: int | None = None  # the largest target asked for while a job was in flight
        self.waiters = DurableWaiters()  # produces waiting for a flush (``flush.messages``)
        self._build = build
        self._finish = finish

    def request(self, target: int) -> None:
        """Flush up to ``target`` in the background (at once and inline without an executor).
        Raises what ``build`` raises, and, inline, a failed job's error."""
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

    def _completed(self, job: FlushJob) -> None:
        """A background job finished (a done callback on the loop): apply it, start the follow-up."""
        if job.handled:
            return  # ``wait`` applied it already
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

    def wait(self) -> None:
        """Block until no job is in flight, applying its outcome (its error is not raised: the
        log is failed then). The follow-up is left to the caller's own flush."""
        job = self.in_flight
        if job is not None:
            job.done.wait()
            self._apply(job, raise_error=False)

    def run_now(self, target: int) -> None:
        """Flush up to ``target`` in the calling thread, after the job in flight. Blocking."""
        self.wait()
        job = self._build(target)
        if job is not None:
            job.run()
            self._apply(job, raise_error=True)
        if self.wanted is not None and self.wanted <= target:
            self.wanted = None

    def cap(self, offset: int) -> None:
        """The job in flight may not take the recovery point above ``offset`` (a truncation, or a
        file it does not hold that must be durable first); a follow-up flush will."""
        job = self.in_flight
        if job is not None and offset < job.cap:
            job.cap = offset
            self.wanted = job.target if self.wanted is None else max(self.wanted, job.target)
