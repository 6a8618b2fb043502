"""Waits of the multi-process cluster tests (clusters come from ``pyspark_log.embedded_cluster``):
poll for a state with a generous deadline that only a failure waits out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.waiting import wait_until

WAIT_S = 90.0
NOT_YET = (OSError, ValueError, KeyError)


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    """``tests.waiting.wait_until`` with the cluster tests' "not yet" errors: a node that is
    restarting refuses connections (OSError) or answers without the partition yet (KeyError,
    ValueError)."""
    return wait_until(condition, what, timeout_s=timeout_s, retry_on=NOT_YET)


def consume(
    bootstrap: str, topic: str, partitions: int, expected: int, *, isolation: str = "read_uncommitted"
) -> list[tuple[int, bytes]]:
    """``(partition, value)`` of the records a confluent-kafka consumer reads from the start of
    every partition, once at least ``expected`` have arrived (in each partition's order)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}", "enable.auto.commit": False,
         "isolation.level": isolation}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: list[tuple[int, bytes]] = []
    try:

        def drained() -> bool:
            seen.extend((m.partition(), m.value()) for m in consumer.consume(1000, timeout=0.5) if m.error() is None)
            return len(seen) >= expected

        wait_for(drained, f"{expected} records of {topic} ({isolation})", timeout_s=180)
    finally:
        consumer.close()
    return seen
