"""What a request handler gives the network layer to send.

A response body is a list of parts: ``bytes`` and ``FileRegion`` s. The network layer prefixes the
4-byte frame size, writes the bytes, and sends file regions with ``sendfile`` where the transport
allows it (plain TCP), so fetched records travel from the segment file to the socket without
passing through Python (Kafka documentation §4.3 "Efficiency"; Kafka documentation §5.1 "Network Layer"
``TransferableRecords.writeTo``).

Regions not in the page cache must not stall the event loop on the disk: ``read_cached`` and
``cached`` tell (nowait reads), and ``read`` / ``warm`` do the waiting reads in an executor thread.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.metrics.instruments import RequestTiming

# preadv flag: fail with EAGAIN instead of waiting for the disk (Linux 4.14+); None elsewhere
_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
# errors of a nowait read on a filesystem that cannot answer it (then the probe cannot tell)
_NOWAIT_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS}
WARM_CHUNK_BYTES = 1024 * 1024  # read size when bringing a region into the page cache


class ReadableFile(Protocol):
    def fileno(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size`` bytes of an open file from ``position``; the file must stay open until sent."""

    file: ReadableFile
    position: int
    size: int

    def read(self) -> bytes:
        """The region's bytes (buffered fallback); raises EOFError if the file is now shorter.
        It may wait for the disk: on the event loop only after ``read_cached`` returned None."""
        data = os.pread(self.file.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise EOFError(f"file region shrank: wanted {self.size} bytes, read {len(data)}")
        return data

    def read_cached(self) -> bytearray | bytes | None:
        """The region's bytes if the page cache holds all of them, else None (then ``read`` it
        off the event loop). One ``preadv`` with ``RWF_NOWAIT``, which fails rather than wait
        for the disk; where that flag does not exist or the filesystem refuses it, a plain read."""
        if _RWF_NOWAIT is None:
            return self.read()
        buf = bytearray(self.size)
        try:
            got = os.preadv(self.file.fileno(), [buf], self.position, _RWF_NOWAIT)
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno in _NOWAIT_UNSUPPORTED:
                return self.read()
            raise
        return buf if got == self.size else None  # short: partly cached, or the file shrank (read says)

    def cached(self) -> bool:
        """Whether ``sendfile`` of the region will find it in the page cache, judged by its first
        and last byte (1-byte ``RWF_NOWAIT`` reads; True where the probe cannot tell). A segment
        enters and leaves the cache front to back (written in order, evicted least recently
        used first), so a range whose two ends are cached is cached whole in practice."""
        if _RWF_NOWAIT is None:
            return True
        probe = bytearray(1)
        fd = self.file.fileno()
        for position in (self.position, self.position + self.size - 1):
            try:
                os.preadv(fd, [probe], position, _RWF_NOWAIT)
            except BlockingIOError:
                return False
            except OSError as exc:
                if exc.errno in _NOWAIT_UNSUPPORTED:
                    return True
                raise
        return True

    def warm(self) -> None:
        """Read the region into the page cache (blocking: for an executor thread, so that the
        ``sendfile`` that follows on the event loop does not wait for the disk)."""
        fd = self.file.fileno()
        buf = bytearray(min(self.size, WARM_CHUNK_BYTES))
        position, end = self.position, self.position + self.size
        with memoryview(buf) as view:
            while position < end:
                got = os.preadv(fd, [view[: min(len(buf), end - position)]], position)
                if got == 0:
                    return  # the file shrank; the sendfile that follows reports it
                position += got


ResponsePart = bytes | bytearray | memoryview | FileRegion


@dataclass(slots=True)
class Response:
    """A complete response frame body (header included, size prefix excluded)."""

    parts: list[ResponsePart] = field(default_factory=list)
    close_after: bool = False  # close the connection once this response is written (failed SASL login)
    timing: RequestTiming | None = None  # the request's timeline, finished by the connection once written

    @property
    def size(self) -> int:
        return sum(part.size if isinstance(part, FileRegion) else len(part) for part in self.parts)

    def to_bytes(self) -> bytes:
        """Everything in memory (tests, and transports that cannot sendfile)."""
        return b"".join(part.read() if isinstance(part, FileRegion) else bytes(part) for part in self.parts)
