"""Compression codecs (Kafka documentation §5.3.1 "Record Batch" attributes bits 0-2) as Kafka clients frame them, and
bounded decompression: a batch inflating past the limit is rejected, not allocated."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
import warnings
import zlib

import cramjam
import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard

from pyspark_log.records import compression
from pyspark_log.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from pyspark_log.records.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
PAYLOADS = {
    "empty": b"",
    "short": b"hello",
    "text": b"".join(b"record %d, " % i for i in range(20_000)),  # ~200 KB, several blocks
    "random": os.urandom(100_000),  # incompressible: stored lz4 blocks
}
BIG = 64 * 1024 * 1024


@pytest.mark.parametrize("codec", [NONE, *CODECS])
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec: int, name: str) -> None:
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data), BIG) == data
    assert decompress(codec, memoryview(compress(codec, data)), BIG) == data


@pytest.mark.parametrize("codec", CODECS)
def test_concatenated_streams(codec: int) -> None:
    """Kafka documentation §5.3.1 "Record Batch": codecs "support concatenation of multiple" streams; members
    decode in order."""
    a, b = PAYLOADS["text"], PAYLOADS["short"]
    assert decompress(codec, compress(codec, a) + compress(codec, b), BIG) == a + b


def test_unsupported_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(5, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"x", BIG)


# --- framing we emit ----------------------------------------------------------------------------


def test_gzip_is_one_standard_member() -> None:
    out = compress(GZIP, PAYLOADS["text"])
    assert out[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(out) == PAYLOADS["text"]


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    data = PAYLOADS["text"]
    out = compress(SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.decompress(out[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    assert pos == len(out)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == data


def test_lz4_frame_flags_match_kafka() -> None:
    """KIP-57 / KafkaLZ4BlockOutputStream: version 01, independent blocks, no checksums, no size."""
    out = compress(LZ4, PAYLOADS["text"])
    assert out[:4] == b"\x04\x22\x4d\x18"
    assert out[4] == 0b0110_0000  # FLG: version 01, block independence, nothing else
    assert out[5] == 0b0100_0000  # BD: 64 KiB blocks
    info = lz4.frame.get_frame_info(out)
    assert info["block_linked"] is False
    assert info["content_checksum"] is False
    assert info["block_checksum"] is False
    assert info["content_size"] == 0
    # Every block decodes on its own, as Java's KafkaLZ4BlockInputStream decodes them.
    pos, parts = 7, []
    while True:
        (size,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if size == 0:
            break
        block = out[pos : pos + (size & 0x7FFFFFFF)]
        parts.append(block if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=65536))
        pos += size & 0x7FFFFFFF
    assert b"".join(parts) == PAYLOADS["text"]


def test_zstd_frame_has_content_size() -> None:
    out = compress(ZSTD, PAYLOADS["text"])
    assert zstandard.get_frame_parameters(out).content_size == len(PAYLOADS["text"])


def test_compression_level_override() -> None:
    data = PAYLOADS["text"]
    for codec in (GZIP, LZ4, ZSTD):
        assert decompress(codec, compress(codec, data, level=1), BIG) == data


# --- what other clients send --------------------------------------------------------------------


def test_snappy_raw_as_librdkafka_sends_it() -> None:
    data = PAYLOADS["text"]
    assert decompress(SNAPPY, snappy.compress(data), BIG) == data
    assert decompress(SNAPPY, compression.snappy_raw_compress(data), BIG) == data


def test_snappy_from_kafka_python_both_framings() -> None:
    data = PAYLOADS["text"]
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data), BIG) == data
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False), BIG) == data
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data, xerial_blocksize=1000), BIG) == data


def test_kafka_python_reads_what_we_emit() -> None:
    data = PAYLOADS["text"]
    assert kafka_codec.gzip_decode(compress(GZIP, data)) == data
    assert kafka_codec.snappy_decode(compress(SNAPPY, data)) == data
    assert kafka_codec.lz4_decode(compress(LZ4, data)) == data
    assert kafka_codec.zstd_decode(compress(ZSTD, data)) == data


@pytest.mark.parametrize(
    "options",
    [
        {"block_linked": True},
        {"block_linked": False, "block_checksum": True},
        {"block_linked": False, "content_checksum": True, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "compression_level": 9},
    ],
)
def test_lz4_frame_variants(options: dict[str, object]) -> None:
    data = PAYLOADS["text"] + PAYLOADS["random"]
    assert decompress(LZ4, lz4.frame.compress(data, **options), BIG) == data  # type: ignore[arg-type]


def test_lz4_from_kafka_python_and_cramjam() -> None:
    data = PAYLOADS["text"]
    assert decompress(LZ4, kafka_codec.lz4_encode(data), BIG) == data
    assert decompress(LZ4, bytes(cramjam.lz4.compress(data)), BIG) == data


def test_zstd_streaming_frame_without_content_size() -> None:
    """The Java client writes zstd through a stream: no Frame_Content_Size."""
    data = PAYLOADS["text"]
    c = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    frame = c.compress(data) + c.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, frame, BIG) == data
    assert decompress(ZSTD, bytes(cramjam.zstd.compress(data)), BIG) == data


def test_zstd_skippable_frame_is_ignored() -> None:
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    frame = compress(ZSTD, b"data")
    assert decompress(ZSTD, frame + skippable, BIG) == b"data"


def test_gzip_from_zlib_and_gzip_modules() -> None:
    data = PAYLOADS["text"]
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    assert decompress(GZIP, c.compress(data) + c.flush(), BIG) == data
    assert decompress(GZIP, gzip.compress(data, mtime=123), BIG) == data


# --- bounded decompression ----------------------------------------------------------------------

BOMB_SIZE = 64 * 1024 * 1024
LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def bomb_table() -> dict[str, tuple[int, bytes]]:
    """64 MiB of zeros in every codec and framing; each compresses to well under 10 %."""
    zeros = bytes(BOMB_SIZE)
    stream = zstandard.ZstdCompressor().compressobj()
    return {
        "gzip": (GZIP, gzip.compress(zeros)),
        "snappy-xerial": (SNAPPY, compress(SNAPPY, zeros)),
        "snappy-raw": (SNAPPY, compression.snappy_raw_compress(zeros)),
        "lz4": (LZ4, compress(LZ4, zeros)),
        "lz4-4mb-blocks": (LZ4, lz4.frame.compress(zeros, block_size=lz4.frame.BLOCKSIZE_MAX4MB)),
        "zstd": (ZSTD, compress(ZSTD, zeros)),
        "zstd-stream": (ZSTD, stream.compress(zeros) + stream.flush()),
    }


@pytest.mark.parametrize(
    "name", ["gzip", "snappy-xerial", "snappy-raw", "lz4", "lz4-4mb-blocks", "zstd", "zstd-stream"]
)
def test_bomb_is_rejected_without_inflating(name: str, bomb_table: dict[str, tuple[int, bytes]]) -> None:
    codec, bomb = bomb_table[name]
    assert len(bomb) < BOMB_SIZE // 10
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            decompress(codec, bomb, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * LIMIT, f"peak Python allocation {peak} bytes"


@pytest.mark.parametrize("codec", CODECS)
def test_limit_is_inclusive(codec: int) -> None:
    data = PAYLOADS["text"]
    assert decompress(codec, compress(codec, data), len(data)) == data
    with pytest.raises(RecordTooLargeError):
        decompress(codec, compress(codec, data), len(data) - 1)


def test_snappy_declared_length_is_checked_before_decoding() -> None:
    # A raw snappy stream that only *claims* 2 GiB: rejected from its preamble alone.
    claim = bytes.fromhex("8080808008") + b"\x00"
    with pytest.raises(RecordTooLargeError):
        decompress(SNAPPY, claim, LIMIT)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(claim)) + claim
    with pytest.raises(RecordTooLargeError):
        decompress(SNAPPY, xerial, LIMIT)


# --- corrupt input ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_streams_are_corrupt(codec: int) -> None:
    data = compress(codec, PAYLOADS["text"] + PAYLOADS["random"])
    step = max(1, len(data) // 200)
    for cut in [*range(0, len(data), step), len(data) - 1]:
        with pytest.raises(CorruptRecordError):
            decompress(codec, data[:cut], BIG)


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_is_corrupt(codec: int) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00\x01\x02 definitely not compressed", BIG)


def test_bad_xerial_block_length() -> None:
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    with pytest.raises(CorruptRecordError, match="overruns"):
        decompress(SNAPPY, header + struct.pack(">i", 100) + b"\x05", BIG)
    with pytest.raises(CorruptRecordError, match="block length"):
        decompress(SNAPPY, header + b"\x00\x00", BIG)


def test_zstd_reserved_block_type() -> None:
    frame = bytearray(compress(ZSTD, b"x" * 100))
    header_size = 4 + 1 + 1  # magic, descriptor (single segment), 1-byte content size
    assert frame[4] & 0x20
    frame[header_size] |= 0b110  # block type 3 (reserved)
    with pytest.raises(CorruptRecordError, match="reserved"):
        decompress(ZSTD, bytes(frame), BIG)
