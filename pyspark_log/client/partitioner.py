"""Which partition a record goes to: Kafka's default partitioner.

* An explicit ``partition`` wins.
* A non-null key (unless ``partitioner.ignore.keys``): ``toPositive(murmur2(key)) % num_partitions``
  over *all* partitions of the topic, available or not. ``murmur2`` is Kafka's
  ``Utils.murmur2`` (seed 0x9747b28c) and ``toPositive`` clears the sign bit, so keyed records
  land where the Java client and librdkafka's ``murmur2_random`` put them.
* A null key: sticky partitioning (Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs",
KIP-480/794): keep sending to one partition, chosen at
  random among those with a leader, until the accumulator has to open a new batch for it; then
  switch to another partition. Batches fill up instead of trickling one record per partition.

``murmur2`` works on unsigned 32-bit words and returns Java's signed ``int``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from pyspark_log.records.murmur2 import murmur2


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition of a keyed record among ``num_partitions`` (Java and ``murmur2_random``)."""
    if num_partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The current sticky partition of each topic, for records without key or partition.

    Owned by the producer's event loop (not thread-safe). ``rng`` is injected for tests.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, available: Sequence[int] | Callable[[], Sequence[int]]) -> int:
        """The sticky partition of ``topic``, choosing one if there is none yet (or it vanished).
        ``available`` may be a callable, evaluated only when a choice is needed."""
        current = self._current.get(topic)
        if current is None or current >= num_partitions:
            choices = available() if callable(available) else available
            current = self._choose(num_partitions, choices, previous=None)
            self._current[topic] = current
        return current

    def on_new_batch(self, topic: str, num_partitions: int, available: Sequence[int], previous: int) -> int:
        """The accumulator needs a new batch for ``previous``: move ``topic`` to another partition.

        Only the first caller after a switch moves it (a later call naming a partition that is no
        longer current returns the current one), as in Kafka's ``onNewBatch``.
        """
        current = self._current.get(topic)
        if current is None or current == previous:
            current = self._choose(num_partitions, available, previous=previous)
            self._current[topic] = current
        return current

    def _choose(self, num_partitions: int, available: Sequence[int], previous: int | None) -> int:
        candidates = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(candidates) > 1 and previous is not None:
            candidates = [p for p in candidates if p != previous]
        return candidates[self._rng.randrange(len(candidates))]
