"""Small file helpers: fsync a directory, replace a file atomically, partition directory names.

Durability (for ``docs/operations.md``): a file's content is durable after its fsync; its name
after the fsync of its directory. NFS (v3/v4) commits on fsync and close; a directory fsync is
accepted there and is a no-op where the server already commits metadata synchronously.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """fsync a directory so that entries created, renamed or removed in it survive a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync_dir_fd(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync, rename over, fsync the dir."""
    _write_replacing(path, data, sync=True)
    fsync_dir(path.parent)


def write_replace(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` without an fsync: write a temp file, rename it over. The
    new content survives a process crash (it is in the page cache) and readers see the old or
    the new file whole; a machine crash before someone fsyncs the file and its directory may
    leave the old content, or a new file that is empty or damaged (readers must detect that)."""
    _write_replacing(path, data, sync=False)


def _write_replacing(path: Path, data: bytes, *, sync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def fsync_dir_fd(fd: int) -> None:
    """fsync an open directory (``fsync_dir`` without the open and close)."""
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int, unique: str) -> str:
    """Kafka's name of a future log (AlterReplicaLogDirs): ``<topic>-<partition>.<uuid>-future``."""
    return f"{topic}-{partition}.{unique}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for ``<topic>-<partition>.<hex uuid>-future``, None for anything else."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or not unique.isalnum():
        return None
    return parse_partition_dir_name(stem)


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
