"""What a group member subscribes to (topic names or a pattern) and its rebalance listener."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pyspark_log.client.cluster import ClusterMetadata
from pyspark_log.client.types import TopicPartition

PartitionSet = set[TopicPartition]
Callback = Callable[[PartitionSet], Any]
# Runs a listener callback where the user expects it (the caller's thread for the sync facade).
CallbackRunner = Callable[[Callback, PartitionSet], Awaitable[None]]


class ConsumerRebalanceListener:
    """Override what you need. Each method gets the partitions as a set of ``TopicPartition``
    and may be a coroutine function (awaited) on ``AsyncConsumer``. They run inside ``poll``
    (and ``unsubscribe``/``close``):

    * ``on_partitions_revoked`` before a rebalance takes partitions away (commit here);
    * ``on_partitions_assigned`` after the new assignment is in place, positions at the
      committed offsets (seek here to start elsewhere);
    * ``on_partitions_lost`` when the membership ended without a chance to revoke (session
      expired, fenced): the partitions may already be someone else's, so do not commit.
      Defaults to ``on_partitions_revoked``.
    """

    def on_partitions_revoked(self, partitions: PartitionSet) -> Any:
        return None

    def on_partitions_assigned(self, partitions: PartitionSet) -> Any:
        return None

    def on_partitions_lost(self, partitions: PartitionSet) -> Any:
        return self.on_partitions_revoked(partitions)


class FunctionListener(ConsumerRebalanceListener):
    """A listener from callables (``on_assign``/``on_revoke``/``on_lost`` keywords of subscribe)."""

    def __init__(
        self, on_assign: Callback | None = None, on_revoke: Callback | None = None, on_lost: Callback | None = None
    ) -> None:
        self._assign, self._revoke, self._lost = on_assign, on_revoke, on_lost

    def on_partitions_revoked(self, partitions: PartitionSet) -> Any:
        return self._revoke(partitions) if self._revoke else None

    def on_partitions_assigned(self, partitions: PartitionSet) -> Any:
        return self._assign(partitions) if self._assign else None

    def on_partitions_lost(self, partitions: PartitionSet) -> Any:
        if self._lost is not None:
            return self._lost(partitions)
        return self.on_partitions_revoked(partitions)


async def run_inline(callback: Callback, partitions: PartitionSet) -> None:
    """The default runner: call it here, awaiting it if it is a coroutine."""
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result


class Subscription:
    """Topic names, or a regular expression matched (``fullmatch``) against the cluster's topics."""

    def __init__(self, topics: Iterable[str] | None, pattern: str | re.Pattern[str] | None) -> None:
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe to topics or to a pattern (exactly one)")
        self.topics: frozenset[str] | None = None if topics is None else frozenset(topics)
        self.pattern: re.Pattern[str] | None = None
        if pattern is not None:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        if self.topics is not None and not all(isinstance(t, str) and t for t in self.topics):
            raise ValueError("topic names must be non-empty strings")

    def matching(self, metadata: ClusterMetadata, *, exclude_internal: bool = True) -> frozenset[str]:
        """The topics subscribed to now: the names, or the known topics the pattern matches."""
        if self.topics is not None:
            return self.topics
        assert self.pattern is not None
        return frozenset(
            name
            for name, meta in metadata.topics.items()
            if self.pattern.fullmatch(name) and not (exclude_internal and meta.is_internal)
        )
