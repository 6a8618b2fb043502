"""Kafka's default partitioner (Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs"
(`partitioner.class`): the sticky partitioner, KIP-480).

Golden values: ``Utils.murmur2`` results asserted by Kafka's own ``UtilsTest.testMurmur2``, and
partitions librdkafka 2.16's ``murmur2_random`` partitioner chose for keys on a 4-partition
topic (recorded from confluent-kafka against librdkafka's mock cluster).
"""

from __future__ import annotations

import random

import pytest

from pyspark_log.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

KAFKA_UTILS_TEST = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

LIBRDKAFKA_MURMUR2_RANDOM_4_PARTITIONS = {
    "": 1,
    "a": 0,
    "ab": 2,
    "abc": 3,
    "key-1": 0,
    "user-42": 0,
    "21": 0,
    "foobar": 2,
    "k3": 0,
    "k4": 0,
    "k5": 0,
    "k7": 0,
    "k8": 2,
    "k9": 0,
    "k10": 2,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_UTILS_TEST.items())
def test_murmur2_matches_java_utils_murmur2(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_accepts_any_bytes_like() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_clears_the_sign_bit_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5
    assert to_positive(-973932308) == (-973932308) & 0x7FFFFFFF != abs(-973932308)


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_MURMUR2_RANDOM_4_PARTITIONS.items())
def test_keyed_partition_equals_librdkafka_murmur2_random(key: str, expected: int) -> None:
    assert partition_for_key(key.encode(), 4) == expected


def test_keyed_partition_is_stable_and_in_range() -> None:
    for n in (1, 3, 7, 100):
        for i in range(200):
            key = f"key-{i}".encode()
            p = partition_for_key(key, n)
            assert 0 <= p < n
            assert p == partition_for_key(key, n)


def test_keyed_partition_needs_partitions() -> None:
    with pytest.raises(ValueError, match="at least one"):
        partition_for_key(b"k", 0)


def test_sticky_partition_stays_until_a_new_batch_is_needed() -> None:
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 6, range(6))
    assert all(sticky.partition("t", 6, range(6)) == first for _ in range(50))
    moved = sticky.on_new_batch("t", 6, range(6), previous=first)
    assert moved != first
    assert sticky.partition("t", 6, range(6)) == moved


def test_sticky_switch_happens_once_per_batch() -> None:
    """Only the first caller that saw the old partition moves the topic (Kafka onNewBatch)."""
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 4, range(4))
    moved = sticky.on_new_batch("t", 4, range(4), previous=first)
    assert sticky.on_new_batch("t", 4, range(4), previous=first) == moved


def test_sticky_prefers_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(random.Random(3))
    for _ in range(30):
        p = sticky.on_new_batch("t", 6, [2, 4], previous=sticky.partition("t", 6, [2, 4]))
        assert p in (2, 4)


def test_sticky_spreads_over_partitions_over_time() -> None:
    sticky = StickyPartitioner(random.Random(11))
    seen = set()
    p = sticky.partition("t", 5, range(5))
    for _ in range(200):
        p = sticky.on_new_batch("t", 5, range(5), previous=p)
        seen.add(p)
    assert seen == set(range(5))


def test_sticky_single_partition_topic() -> None:
    sticky = StickyPartitioner(random.Random(0))
    assert sticky.partition("t", 1, [0]) == 0
    assert sticky.on_new_batch("t", 1, [0], previous=0) == 0


def test_sticky_rechooses_when_partition_count_shrinks_under_it() -> None:
    sticky = StickyPartitioner(random.Random(0))
    sticky._current["t"] = 9
    assert sticky.partition("t", 3, range(3)) in range(3)
