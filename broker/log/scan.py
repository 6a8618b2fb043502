"""Walking the batches of a segment file by their headers, with plain ``pread`` (no mmap).

Two walks: ``iter_headers`` reads only the 61-byte headers (reads and timestamp lookups, which
trust the file), and ``ValidBatches`` reads whole batches and checks each one (recovery, Kafka documentation
§5.4.4 "Guarantees": "the log is truncated to the last valid offset" when a length is negative, an offset
does not increase, or a CRC does not match). Neither decodes records.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from broker.log.config import INT_MAX
from broker.log.errors import CorruptMessageError
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, compute_crc, read_header

HEADER_CHUNK_BYTES = 16 * 1024
RECOVERY_CHUNK_BYTES = 4 * 1024 * 1024


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """``size`` bytes at ``position``, fewer only at end of file."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def iter_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each batch in ``[start, end)``.

    Raises CorruptMessageError when a header is malformed or a batch runs past ``end``: callers
    use it only on bytes that were validated when written.
    """
    pos = start
    buf = b""
    buf_start = start
    last_size = HEADER_CHUNK_BYTES + 1  # first read one header: callers often need just that
    while pos < end:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            # after a large batch read one header; after small ones a chunk holding several
            want = HEADER_SIZE if last_size > HEADER_CHUNK_BYTES else HEADER_CHUNK_BYTES
            buf = pread_exact(fd, min(want, end - pos), pos)
            buf_start, off = pos, 0
        try:
            header = read_header(buf, off)
        except CorruptRecordError as exc:
            raise CorruptMessageError(f"bad batch header at byte {pos}: {exc}") from exc
        last_size = header.batch_length + LOG_OVERHEAD
        if pos + last_size > end:
            raise CorruptMessageError(f"batch at byte {pos} runs past byte {end}")
        yield pos, header
        pos += last_size


class ValidBatches:
    """Iterate the valid batches of a segment file from byte 0; stop at the first invalid one.

    A batch is valid when its header parses (magic 2, length not below the header), it lies whole
    inside the file, its CRC-32C matches, its offsets are not below ``min_offset`` nor below the
    previous batch's next offset, and its last offset fits the segment (relative offset ≤ int32).
    After iteration ``valid_bytes`` is where the valid prefix ends and ``error`` says why the
    walk stopped early (None when it reached the end of the file).
    """

    def __init__(self, fd: int, file_bytes: int, base_offset: int, min_offset: int) -> None:
        self.fd = fd
        self.file_bytes = file_bytes
        self.base_offset = base_offset
        self.min_offset = max(min_offset, base_offset)
        self.valid_bytes = 0
        self.error: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        pos = 0
        expected = self.min_offset
        buf = b""
        buf_start = 0
        while pos < self.file_bytes:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = pread_exact(self.fd, min(RECOVERY_CHUNK_BYTES, self.file_bytes - pos), pos)
                buf_start, off = pos, 0
            if len(buf) - off < HEADER_SIZE:
                self.error = f"torn batch header at byte {pos}"
                return
            try:
                header = read_header(buf, off)
            except CorruptRecordError as exc:
                self.error = f"bad batch header at byte {pos}: {exc}"
                return
            size = header.size
            if pos + size > self.file_bytes:
                self.error = f"torn batch at byte {pos}: needs {size} bytes, file has {self.file_bytes - pos}"
                return
            if off + size > len(buf):
                buf = pread_exact(self.fd, max(size, min(RECOVERY_CHUNK_BYTES, self.file_bytes - pos)), pos)
                buf_start, off = pos, 0
            if compute_crc(buf, off, header) != header.crc:
                self.error = f"CRC mismatch in batch at byte {pos}"
                return
            if header.base_offset < expected or header.last_offset_delta < 0:
                self.error = (
                    f"offsets do not increase at byte {pos}: batch [{header.base_offset}, "
                    f"{header.last_offset}] after next offset {expected}"
                )
                return
            if header.last_offset - self.base_offset > INT_MAX:
                self.error = f"offset {header.last_offset} at byte {pos} overflows the segment"
                return
            yield pos, header
            expected = header.last_offset + 1
            pos += size
            self.valid_bytes = pos
