"""``FlushJob``: the fsyncs of one log flush, prepared on the event loop and run in a worker
thread (Kafka documentation §5.4.1 "Writes"; Kafka's "flush-log" task).

Project rule: nothing that can take more than a millisecond runs on the broker's event loop, and
an fsync can take tens of milliseconds. A ``FlushJob`` splits one flush of a ``Log`` in two:

1. **On the loop** (``flush.LogFlusher`` builds it; each ``LogSegment.add_to_flush`` adds its
   files): decide what must be synced, write pending index entries into the page cache, and take
   one file descriptor per file — ``os.dup`` of a segment's open descriptor, or a fresh ``open``
   of a path (indexes, producer snapshots, the leader-epoch checkpoint, the partition directory).
   The job owns these descriptors: a segment that the loop truncates, closes, renames to
   ``*.deleted`` or removes meanwhile cannot break the job (the duplicated descriptor still names
   the same inode; fsyncing a removed file is harmless).
2. **In a worker thread** (``run``): fsync every file, then the directories, then close every
   descriptor, whatever failed. The first ``OSError`` is kept in ``error``.

``target`` is the recovery point the job makes true; ``cap`` starts there and only goes down
while the job is in flight (``flush.py`` says when). The job holds no reference to the log.
"""

from __future__ import annotations

import os
import threading
import time

from broker.log.files import fsync_dir_fd


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
