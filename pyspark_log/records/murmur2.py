"""Kafka's ``Utils.murmur2`` (MurmurHash2, 32-bit, seed 0x9747b28c): the hash the default
partitioner applies to keys (``pyspark_log.client.partitioner``) and the one
``__remote_log_metadata`` partitioning applies to topic-partition hashes
(``broker.log.remote.partitioner``). One codec, shared by client and broker. Pure.
"""

from __future__ import annotations

import struct

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2, 32-bit, seed 0x9747b28c, as a signed int32."""
    raw = bytes(data)
    length = len(raw)
    h = (MURMUR2_SEED ^ length) & _MASK32
    words = length // 4
    if words:
        for k in struct.unpack_from(f"<{words}I", raw):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            k = (k * _M) & _MASK32
            h = ((h * _M) & _MASK32) ^ k
    tail = length & ~3
    rest = length & 3
    if rest == 3:
        h ^= raw[tail + 2] << 16
    if rest >= 2:
        h ^= raw[tail + 1] << 8
    if rest >= 1:
        h ^= raw[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
