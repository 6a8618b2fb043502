"""What a request handler gives the network layer to send.

A response body is a list of parts: ``bytes`` and ``FileRegion`` s. The network layer prefixes the
4-byte frame size, writes the bytes, and sends file regions with ``sendfile`` where the transport
allows it (plain TCP), so fetched records travel from the segment file to the socket without
passing through Python (seed 000 §4.3; seed 002 §5.1 ``TransferableRecords.writeTo``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol


class ReadableFile(Protocol):
    def fileno(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size`` bytes of an open file from ``position``; the file must stay open until sent."""

    file: ReadableFile
    position: int
    size: int

    def read(self) -> bytes:
        """The region's bytes (buffered fallback); raises EOFError if the file is now shorter."""
        data = os.pread(self.file.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise EOFError(f"file region shrank: wanted {self.size} bytes, read {len(data)}")
        return data


ResponsePart = bytes | bytearray | memoryview | FileRegion


@dataclass(slots=True)
class Response:
    """A complete response frame body (header included, size prefix excluded)."""

    parts: list[ResponsePart] = field(default_factory=list)
    close_after: bool = False  # close the connection once this response is written (failed SASL login)

    @property
    def size(self) -> int:
        return sum(part.size if isinstance(part, FileRegion) else len(part) for part in self.parts)

    def to_bytes(self) -> bytes:
        """Everything in memory (tests, and transports that cannot sendfile)."""
        return b"".join(part.read() if isinstance(part, FileRegion) else bytes(part) for part in self.parts)
