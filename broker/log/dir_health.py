"""Log-dir health: which ``log.dirs`` are online, why one went offline, and when it came back.

Kafka's log-dir failure (``LogDirFailureChannel``, ``LogManager.handleLogDirFailure``) takes a
dir offline on its first I/O error; DescribeLogDirs then answers KAFKA_STORAGE_ERROR for it and
``kafka.log:type=LogManager,name=OfflineLogDirectoryCount`` counts it. pylog does the same, with
one difference (docs/compatibility.md): a dir comes back by itself once a probe write succeeds
(space returned after a full disk), where Kafka needs a broker restart.

``LogDirState`` is the one owner of a dir's transitions::

    ONLINE  --fail(what, exc)-->  OFFLINE   one ERROR log naming the dir and the OS error
    OFFLINE --fail(what, exc)-->  OFFLINE   counted in ``errors_total``, not logged again
    OFFLINE --recover()------->   ONLINE    one WARNING log
    ONLINE  --recover()------->   illegal (AssertionError)

While a dir is offline its logs refuse appends (KAFKA_STORAGE_ERROR, no I/O, no log line) and
keep serving reads of what they hold. ``probe_dir`` is the I/O that decides recovery; it runs off
the event loop (``LogManager.run_dir_probe_once``).

Threading: the states are changed only on the broker's event loop.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROBE_FILE = ".pylog-dir-probe"
PROBE_BYTES = 256 * 1024  # a probe write of this size must succeed before a full dir comes back


def describe_os_error(exc: OSError) -> str:
    """``[Errno 28] No space left on device (ENOSPC)``: the OS error as an operator reads it."""
    name = errno.errorcode.get(exc.errno or 0)
    text = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
    return f"{text} ({name})" if name else text


@dataclass
class LogDirState:
    """One log dir's state (see the module docstring for the transitions)."""

    path: Path
    offline: bool = False
    error: str | None = None  # what failed and the OS error, while offline
    offline_since_ms: int = -1
    offline_transitions: int = 0  # times the dir went offline
    errors_total: int = 0  # I/O errors seen, including those while already offline

    def fail(self, what: str, exc: OSError, now_ms: int) -> None:
        """An I/O error during ``what`` on a file of this dir."""
        self.errors_total += 1
        if self.offline:
            return
        self.offline = True
        self.error = f"{what}: {describe_os_error(exc)}"
        self.offline_since_ms = now_ms
        self.offline_transitions += 1
        log.error(
            "log dir %s is offline: %s failed: %s; its partitions refuse writes (KAFKA_STORAGE_ERROR) "
            "until a probe write succeeds",
            self.path,
            what,
            describe_os_error(exc),
        )

    def recover(self, now_ms: int) -> None:
        """A probe write succeeded and the dir's logs are consistent: writes are accepted again."""
        assert self.offline, f"log dir {self.path} is not offline"
        log.warning(
            "log dir %s is back online after %d ms offline (was: %s)",
            self.path,
            max(0, now_ms - self.offline_since_ms),
            self.error,
        )
        self.offline = False
        self.error = None
        self.offline_since_ms = -1


def probe_dir(path: Path, size_bytes: int = PROBE_BYTES) -> OSError | None:
    """Write, fsync and remove a ``size_bytes`` probe file in ``path``; the error, or None when
    the dir takes writes again. Blocking: call it in a worker thread."""
    target = path / PROBE_FILE
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            chunk = b"\0" * min(size_bytes, 65536)
            left = size_bytes
            while left > 0:
                left -= os.write(fd, chunk[:left])
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        _remove_quietly(target)
        return exc
    _remove_quietly(target)
    return None


def _remove_quietly(target: Path) -> None:
    try:
        target.unlink()
    except OSError:
        pass  # a leftover probe file is harmless; the next probe truncates it


def disk_space(path: Path) -> tuple[int, int]:
    """``(total_bytes, usable_bytes)`` of the filesystem holding ``path`` (KIP-827), ``(-1, -1)``
    when it cannot be read. Blocking: call it in a worker thread."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
