"""A fault filesystem (FUSE, via mfusepy and libfuse 3) that loses unsynced writes on a simulated
power loss, so the broker's fsync discipline is tested, not assumed (issue 31).

``python -m tests.chaos.faultfs <backing dir> <mount point>`` mounts ``<backing dir>`` at
``<mount point>`` (foreground, single-threaded) and passes every operation through, except file
data: a ``write`` lands in memory only (dirty 4 KiB pages over the backing file, and the file's
new size), as in a page cache. ``fsync``/``fdatasync`` write a file's dirty pages to the backing
file and ``os.fsync`` it: from then on they survive. ``power_loss(backing)`` is the power loss
(a trigger file next to the backing dir): every dirty page and unsynced size is dropped, so each
file reads back as of its last fsync. (Reads see the dirty pages, as any reader of a page cache
does.)

Simplifications, stated: metadata operations (create, rename, unlink, mkdir, truncate) reach the
backing directory at once, i.e. they behave as if the directory were always synced; a
``truncate`` first writes the file's dirty pages (its data below the cut becomes durable). So
the filesystem drops unsynced data, not unsynced names — the harsher half of a power loss for a
log, whose records are data.

``available()`` says why it cannot run here (no /dev/fuse, no libfuse 3, no mfusepy).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

PAGE = 4096


def available() -> str | None:
    """Why the fault filesystem cannot be used here (``None``: it can)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "needs root (mount)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 missing (apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy/libfuse3 unavailable: {exc}"
    return None


class _Dirty:
    """One file's unsynced state: dirty pages (page number -> bytearray(PAGE)) and its size."""

    __slots__ = ("pages", "size")

    def __init__(self, size: int) -> None:
        self.pages: dict[int, bytearray] = {}
        self.size = size


def make_operations(backing: str) -> Any:
    import mfusepy

    class FaultFS(mfusepy.Operations):  # type: ignore[misc]
        def __init__(self) -> None:
            self.root = backing
            self.dirty: dict[str, _Dirty] = {}
            self._mutex = threading.Lock()
            self.use_ns = True  # utimens in nanoseconds
            self.power_losses = 0

        def _full(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        # -- power loss -------------------------------------------------------------------------
        def lose_power(self) -> None:
            with self._mutex:
                self.dirty.clear()
                self.power_losses += 1

        # -- data -----------------------------------------------------------------------------
        def _page(self, path: str, d: _Dirty, n: int) -> bytearray:
            page = d.pages.get(n)
            if page is None:
                page = bytearray(PAGE)
                with open(self._full(path), "rb") as f:
                    f.seek(n * PAGE)
                    data = f.read(PAGE)
                page[: len(data)] = data
                d.pages[n] = page
            return page

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self._mutex:
                d = self.dirty.get(path)
                if d is None:
                    d = self.dirty[path] = _Dirty(os.fstat(fh).st_size)
                pos, view = offset, memoryview(data)
                while view:
                    n, at = divmod(pos, PAGE)
                    take = min(PAGE - at, len(view))
                    self._page(path, d, n)[at : at + take] = view[:take]
                    pos, view = pos + take, view[take:]
                d.size = max(d.size, offset + len(data))
            return len(data)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            with self._mutex:
                d = self.dirty.get(path)
                if d is None:
                    return os.pread(fh, size, offset)
                size = max(0, min(size, d.size - offset))
                out = bytearray(os.pread(fh, size, offset).ljust(size, b"\0"))
                for n in range(offset // PAGE, (offset + size + PAGE - 1) // PAGE):
                    page = d.pages.get(n)
                    if page is None:
                        continue
                    lo, hi = max(n * PAGE, offset), min((n + 1) * PAGE, offset + size)
                    out[lo - offset : hi - offset] = page[lo - n * PAGE : hi - n * PAGE]
                return bytes(out)

        def _sync(self, path: str) -> None:
            d = self.dirty.pop(path, None)
            fd = os.open(self._full(path), os.O_WRONLY)
            try:
                if d is not None:
                    for n, page in sorted(d.pages.items()):
                        end = min(PAGE, d.size - n * PAGE)
                        if end > 0:
                            os.pwrite(fd, bytes(page[:end]), n * PAGE)
                    if os.fstat(fd).st_size < d.size:
                        os.ftruncate(fd, d.size)
                os.fsync(fd)
            finally:
                os.close(fd)

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            with self._mutex:
                self._sync(path)
            return 0

        def truncate(self, path: str, length: int, fh: Any = None) -> int:
            with self._mutex:
                if path in self.dirty:
                    self._sync(path)
                os.truncate(self._full(path), length)
            return 0

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            st = os.lstat(self._full(path))
            attrs = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                                                   "st_atime", "st_mtime", "st_ctime")}  # fmt: skip
            with self._mutex:
                d = self.dirty.get(path)
                if d is not None:
                    attrs["st_size"] = d.size
            return attrs

        # -- pass-through ---------------------------------------------------------------------
        def _open(self, path: str, flags: int, mode: int = 0o644) -> int:
            # the backing descriptor only serves reads (writes go to the dirty pages), so it is
            # always read-write and never O_APPEND; O_TRUNC empties the file, dirty pages too
            if flags & os.O_TRUNC:
                with self._mutex:
                    self.dirty.pop(path, None)
            flags = (flags & ~(os.O_ACCMODE | os.O_APPEND)) | os.O_RDWR
            return os.open(self._full(path), flags, mode)

        def open(self, path: str, flags: int) -> int:
            return self._open(path, flags)

        def create(self, path: str, mode: int, flags: Any = None) -> int:
            return self._open(path, (flags if isinstance(flags, int) else 0) | os.O_CREAT, mode)

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._full(path))]

        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._full(path), mode)
            return 0

        def rmdir(self, path: str) -> int:
            os.rmdir(self._full(path))
            return 0

        def unlink(self, path: str) -> int:
            with self._mutex:
                self.dirty.pop(path, None)
            os.unlink(self._full(path))
            return 0

        def rename(self, old: str, new: str) -> int:
            with self._mutex:
                d = self.dirty.pop(old, None)
                self.dirty.pop(new, None)
                if d is not None:
                    self.dirty[new] = d
            os.rename(self._full(old), self._full(new))
            return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._full(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._full(path), uid, gid)
            return 0

        def utimens(self, path: str, times: Any = None) -> int:
            if times is None:
                os.utime(self._full(path))
            else:
                os.utime(self._full(path), ns=times)
            return 0

        def access(self, path: str, amode: int) -> int:
            if not os.access(self._full(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self._full(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                  "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}  # fmt: skip

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            return 0

    return FaultFS()


def trigger_path(backing: str | Path) -> Path:
    """The file whose creation is a power loss (``power_loss`` creates it, the filesystem deletes
    it once every unsynced write is gone)."""
    return Path(f"{backing}.power-loss")


def power_loss(backing: str | Path, timeout_s: float = 30) -> None:
    """Make the fault filesystem over ``backing`` lose its unsynced writes; returns once it did."""
    trigger = trigger_path(backing)
    trigger.touch()
    deadline = time.monotonic() + timeout_s
    while trigger.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fault filesystem over {backing} did not take the power loss")
        time.sleep(0.01)


def _watch(ops: Any, trigger: Path) -> None:
    while True:
        if trigger.exists():
            ops.lose_power()
            trigger.unlink()
        time.sleep(0.01)


def main(argv: list[str]) -> None:
    import mfusepy

    backing, mount_point = argv
    Path(backing).mkdir(parents=True, exist_ok=True)
    ops = make_operations(os.path.abspath(backing))
    # the FUSE loop holds the main thread in C, so no Python signal handler would run: a thread
    # watches for the trigger file instead
    trigger = trigger_path(os.path.abspath(backing))
    trigger.unlink(missing_ok=True)
    threading.Thread(target=_watch, args=(ops, trigger), daemon=True, name="power-loss").start()
    print("faultfs ready", flush=True)
    # no attribute or name caching: after a power loss the kernel asks again (the page cache is
    # dropped on every open without kernel_cache, and a restarted broker opens everything anew)
    mfusepy.FUSE(ops, mount_point, foreground=True, nothreads=True, attr_timeout=0, entry_timeout=0, negative_timeout=0)


if __name__ == "__main__":
    main(sys.argv[1:])
