"""The ``.lock`` file of a log dir: two brokers never open the same directory.

``fcntl.flock`` on ``<dir>/.lock`` (exclusive, non-blocking), held for as long as the manager
runs; the kernel drops it when the process dies, so a crashed broker never leaves a stale lock.
Locks also conflict inside one process (flock locks belong to the open file), and a registry
of the directories this process holds backs that up on filesystems where flock is emulated with
POSIX locks (the Linux NFS client), which do not conflict within a process.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from broker.log.errors import LogDirLockedError

LOCK_FILE = ".lock"
_HELD: set[str] = set()


class DirLock:
    """An acquired lock on one log dir; ``release()`` gives it up."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._key = os.path.realpath(directory)
        self._fd = -1

    def acquire(self) -> DirLock:
        """Take the lock or raise LogDirLockedError naming the directory."""
        if self._key in _HELD:
            raise LogDirLockedError(f"log dir {self.directory} is already open in this process")
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise LogDirLockedError(
                f"log dir {self.directory} is locked by another broker ({self.directory / LOCK_FILE}); "
                "stop it or give this broker other log.dirs"
            ) from exc
        self._fd = fd
        _HELD.add(self._key)
        return self

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
            _HELD.discard(self._key)
