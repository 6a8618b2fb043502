"""Compression codecs of RecordBatch v2 (attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Decompression is bounded: output beyond ``max_bytes`` raises RecordTooLargeError instead of
growing memory.
"""

from __future__ import annotations

import gzip
import zlib

import cramjam
import lz4.frame
import zstandard

from pyspark_log.records.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()}


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))
    if codec == LZ4:
        return lz4.frame.compress(bytes(data))
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(bytes(data))
    raise UnsupportedCompressionError(f"compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == GZIP:
            d = zlib.decompressobj(wbits=31)
            out = d.decompress(bytes(data), max_bytes + 1)
        elif codec == SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(bytes(data)))
        elif codec == LZ4:
            out = lz4.frame.decompress(bytes(data))
        elif codec == ZSTD:
            out = zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
        else:
            raise UnsupportedCompressionError(f"compression codec {codec}")
    except (RecordTooLargeError, UnsupportedCompressionError):
        raise
    except Exception as exc:  # noqa: BLE001 - every codec library raises its own types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES.get(codec, codec)} data: {exc}") from exc
    if len(out) > max_bytes:
        raise RecordTooLargeError(f"decompressed records exceed {max_bytes} bytes")
    return out
