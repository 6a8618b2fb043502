"""Compression codecs of RecordBatch v2: attributes bits 0-2 (Kafka documentation §5.3.1 "Record Batch").

``0`` none, ``1`` gzip, ``2`` snappy, ``3`` lz4, ``4`` zstd. The compressed bytes are the whole
records section of a batch (everything after recordsCount); a codec stream may hold several
concatenated frames/members, which decode to the concatenation of their contents.

Byte layouts, as Kafka clients put them in batches:

gzip (RFC 1952 members; Java ``GZIPOutputStream``, librdkafka zlib)::

    1f 8b 08 flags mtime(4) xfl os [extra] deflate-data crc32(4 LE) isize(4 LE)

snappy, *xerial* framing (Java ``SnappyOutputStream``, kafka-python, aiokafka)::

    offset size
    0      8    magic       82 53 4e 41 50 50 59 00    ("\\x82SNAPPY\\0")
    8      4    version     int32 BE, 1
    12     4    compatible  int32 BE, 1
    16     ...  blocks:     [compressedLength int32 BE][raw snappy block], each block holding at
                            most 32 KiB of input

snappy, *raw* (librdkafka emits this)::

    uncompressedLength uvarint (<= 5 bytes), then snappy elements

lz4, LZ4 frame format as Kafka's ``KafkaLZ4BlockOutputStream`` writes it (KIP-57)::

    04 22 4d 18       magic 0x184D2204 (LE)
    FLG               bits 7-6 version 01, bit 5 block independence, bit 4 block checksum,
                      bit 3 content size, bit 2 content checksum
    BD                bits 6-4 block max size (4 = 64 KiB … 7 = 4 MiB)
    [contentSize 8]   only when FLG bit 3
    HC                (xxh32(FLG..) >> 8) & 0xff
    blocks            [size uint32 LE, bit 31 = stored uncompressed][data][xxh32 if block checksum]
    00 00 00 00       end mark, then [xxh32 of content] if content checksum

zstd (RFC 8878 frames, with or without Frame_Content_Size): ``28 b5 2f fd`` …

What we emit, chosen so that every client reads it (Java, librdkafka, kafka-python, aiokafka):

* gzip: one member, level 6 (``Deflater``'s default that Kafka uses), mtime 0.
* snappy: **xerial framing** with 32 KiB blocks. It is what the Java client (the reference) and
  both Python clients produce; librdkafka detects the xerial magic and decodes it; the Python
  clients and Java's ``SnappyInputStream`` also read raw snappy, which we decode too (librdkafka
  sends it), but xerial is the one format every reader was written for.
* lz4: independent 64 KiB blocks, no block or content checksum, no content size — exactly the
  Java client's and librdkafka's frames. Java's reader decompresses every block on its own, so
  linked blocks (the ``lz4.frame`` default) would break it.
* zstd: a single frame with its content size, level 3 (Kafka's default level).

Decompression is bounded: no call allocates much beyond ``max_bytes`` of output. gzip, lz4 and
zstd are decoded incrementally in chunks of at most ``_CHUNK_BYTES``; snappy's declared
uncompressed lengths (the raw preamble, per block under xerial) are checked before anything is
decompressed; zstd's window is capped. Output that would exceed ``max_bytes`` raises
RecordTooLargeError; malformed input raises CorruptRecordError.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from pyspark_log.records.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError
from pyspark_log.records.varint import read_uvarint

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()}

GZIP_LEVEL = 6
LZ4_LEVEL = 0  # lz4's fast mode, like librdkafka's default
ZSTD_LEVEL = 3

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE = 1
XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
XERIAL_HEADER_SIZE = XERIAL_HEADER.size  # 16
XERIAL_BLOCK_BYTES = 32 * 1024
_BLOCK_LENGTH = struct.Struct(">i")

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_WBITS = 31  # zlib: gzip header and trailer

_CHUNK_BYTES = 1 << 20
_ZSTD_MIN_WINDOW_BYTES = 1 << 23  # windowLog 23: what zstd levels <= 19 use for unknown sizes
_ZSTD_MAX_WINDOW_BYTES = 1 << 27  # zstd's default decoder limit

_local = threading.local()

Buffer = bytes | bytearray | memoryview


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec`` (see the module docstring for framing)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(GZIP_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return snappy_xerial_compress(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            compression_level=LZ4_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return _zstd_compressor(ZSTD_LEVEL if level is None else level).compress(data)
    raise UnsupportedCompressionError(f"compression codec {codec}")


def decompress(codec: int, data: Buffer, max_bytes: int) -> bytes:
    """Decompress a records section; raise RecordTooLargeError past ``max_bytes`` of output."""
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise UnsupportedCompressionError(f"compression codec {codec}")
    try:
        out = decoder(data, max_bytes)
    except (RecordTooLargeError, CorruptRecordError):
        raise
    except Exception as exc:  # every codec library raises its own types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES.get(codec, codec)} data: {exc}") from exc
    if len(out) > max_bytes:
        raise RecordTooLargeError(f"decompressed records exceed {max_bytes} bytes")
    return out


def _too_large(max_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"decompressed records exceed {max_bytes} bytes")


# --- gzip ---------------------------------------------------------------------------------------


def _gunzip(data: Buffer, max_bytes: int) -> bytes:
    """Inflate every gzip member in ``data``, at most ``_CHUNK_BYTES`` of output per step."""
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    while True:
        d = zlib.decompressobj(_GZIP_WBITS)
        chunk = d.decompress(pending, min(_CHUNK_BYTES, max_bytes - total + 1))
        while True:
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            parts.append(chunk)
            if d.eof or not d.unconsumed_tail:
                break
            chunk = d.decompress(d.unconsumed_tail, min(_CHUNK_BYTES, max_bytes - total + 1))
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream")
        pending = d.unused_data
        if not pending:
            return parts[0] if len(parts) == 1 else b"".join(parts)


# --- snappy -------------------------------------------------------------------------------------


def snappy_xerial_compress(data: Buffer, block_bytes: int = XERIAL_BLOCK_BYTES) -> bytes:
    """Snappy in xerial framing: the 16-byte header, then length-prefixed raw blocks."""
    view = memoryview(data).cast("B")
    out = bytearray(XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE))
    for start in range(0, len(view), block_bytes):
        block = cramjam.snappy.compress_raw(view[start : start + block_bytes])
        out += _BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def snappy_raw_compress(data: Buffer) -> bytes:
    """Unframed ("raw") snappy, as librdkafka sends it."""
    return bytes(cramjam.snappy.compress_raw(data))


def is_xerial(data: Buffer) -> bool:
    """True when ``data`` starts with the xerial magic (what librdkafka checks)."""
    return len(data) >= XERIAL_HEADER_SIZE and bytes(data[:8]) == XERIAL_MAGIC


def _snappy_declared_length(block: Buffer) -> int:
    try:
        length, _ = read_uvarint(block, 0)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"bad snappy length preamble: {exc}") from exc
    return length


def snappy_decompress(data: Buffer, max_bytes: int) -> bytes:
    """Decode xerial-framed or raw snappy, checking declared sizes against ``max_bytes`` first."""
    view = memoryview(data).cast("B")
    if not is_xerial(view):
        if _snappy_declared_length(view) > max_bytes:
            raise _too_large(max_bytes)
        return bytes(cramjam.snappy.decompress_raw(view))
    # First pass: walk the blocks and add up their declared lengths; nothing is inflated yet.
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if view[pos : pos + 8] == XERIAL_MAGIC:
            # Concatenated xerial streams (Java's SnappyInputStream reads them): a length can
            # never start with 0x82, as it would be negative.
            pos += XERIAL_HEADER_SIZE
            continue
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise CorruptRecordError(f"xerial snappy block of {size} bytes overruns the data")
        block = view[pos : pos + size]
        length = _snappy_declared_length(block)
        total += length
        if total > max_bytes:
            raise _too_large(max_bytes)
        blocks.append((block, length))
        pos += size
    out = bytearray(total)
    at = 0
    for block, length in blocks:
        if length:
            written = cramjam.snappy.decompress_raw_into(block, memoryview(out)[at : at + length])
            if written != length:
                raise CorruptRecordError("snappy block shorter than its declared length")
        at += length
    return bytes(out)


# --- lz4 ----------------------------------------------------------------------------------------


def _lz4_decompress(data: Buffer, max_bytes: int) -> bytes:
    """Decode one or more LZ4 frames, at most ``_CHUNK_BYTES`` of output per step."""
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(pending, max_length=min(_CHUNK_BYTES, max_bytes - total + 1))
        while True:
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            parts.append(chunk)
            if d.eof or d.needs_input:
                break
            chunk = d.decompress(b"", max_length=min(_CHUNK_BYTES, max_bytes - total + 1))
        if not d.eof:
            raise CorruptRecordError("truncated lz4 frame")
        pending = d.unused_data
        if not pending:
            return parts[0] if len(parts) == 1 else b"".join(parts)


# --- zstd ---------------------------------------------------------------------------------------


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zstd_compressors", None)
    if cache is None:
        cache = _local.zstd_compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return compressor


def _zstd_window_limit(max_bytes: int) -> int:
    window = _ZSTD_MIN_WINDOW_BYTES
    while window < max_bytes and window < _ZSTD_MAX_WINDOW_BYTES:
        window <<= 1
    return window


def _zstd_decompressor(max_bytes: int) -> zstandard.ZstdDecompressor:
    window = _zstd_window_limit(max_bytes)
    cache: dict[int, zstandard.ZstdDecompressor] | None = getattr(_local, "zstd_decompressors", None)
    if cache is None:
        cache = _local.zstd_decompressors = {}
    decompressor = cache.get(window)
    if decompressor is None:
        decompressor = cache[window] = zstandard.ZstdDecompressor(max_window_size=window)
    return decompressor


_ZSTD_FCS_SIZES = (0, 2, 4, 8)  # by Frame_Content_Size_flag (0 means 1 byte if single segment)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_RLE_BLOCK = 1
_ZSTD_RESERVED_BLOCK = 3
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_UINT32_LE = struct.Struct("<I")


def _zstd_check_frames(view: memoryview) -> None:
    """Walk the frame and block headers (RFC 8878 §3.1) without decoding anything.

    The zstd stream reader stops quietly at the end of its input, so a truncated frame would
    look like a short, valid one; this walk rejects it (and reserved block types) up front.
    """
    pos = 0
    end = len(view)
    if end < 4 or view[:4] != ZSTD_FRAME_MAGIC:
        raise CorruptRecordError("zstd data does not start with a zstd frame")
    while pos < end:
        if end - pos < 8:
            raise CorruptRecordError("truncated zstd frame header")
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            (size,) = _UINT32_LE.unpack_from(view, pos + 4)
            pos += 8 + size
            continue
        if view[pos : pos + 4] != ZSTD_FRAME_MAGIC:
            raise CorruptRecordError(f"bad zstd frame magic at byte {pos}")
        descriptor = view[pos + 4]
        single_segment = descriptor & 0x20
        header_size = (
            1
            + (0 if single_segment else 1)
            + _ZSTD_DICT_ID_SIZES[descriptor & 0x03]
            + (_ZSTD_FCS_SIZES[descriptor >> 6] or (1 if single_segment else 0))
        )
        pos += 4 + header_size
        while True:
            if end - pos < 3:
                raise CorruptRecordError("truncated zstd block header")
            block_header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            block_type = (block_header >> 1) & 0x03
            if block_type == _ZSTD_RESERVED_BLOCK:
                raise CorruptRecordError("reserved zstd block type")
            pos += 3 + (1 if block_type == _ZSTD_RLE_BLOCK else block_header >> 3)
            if block_header & 1:
                break
        if descriptor & 0x04:
            pos += 4  # content checksum
    if pos != end:
        raise CorruptRecordError("truncated zstd frame")


def _zstd_decompress(data: Buffer, max_bytes: int) -> bytes:
    """Decode every zstd frame (content size present or not), ``_CHUNK_BYTES`` per read."""
    _zstd_check_frames(memoryview(data).cast("B"))
    reader = _zstd_decompressor(max_bytes).stream_reader(data, read_across_frames=True)
    parts: list[bytes] = []
    total = 0
    with reader:
        while True:
            chunk = reader.read(min(_CHUNK_BYTES, max_bytes - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


_DECODERS: dict[int, Callable[[Buffer, int], bytes]] = {
    NONE: lambda data, _: bytes(data),
    GZIP: _gunzip,
    SNAPPY: snappy_decompress,
    LZ4: _lz4_decompress,
    ZSTD: _zstd_decompress,
}
