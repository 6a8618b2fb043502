"""Helpers of the Spark tier: a small Kafka-side toolbox and reader shortcuts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pyspark_log.client import AdminClient, Consumer, NewTopic, Producer, RecordMetadata, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from tests import waiting

Header = tuple[str, bytes | None]


class Kafka:
    """Admin, producer and consumer on one broker (they reconnect if it restarts)."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        self.broker = broker
        self.servers = broker.bootstrap_servers
        self.admin = AdminClient({"bootstrap.servers": self.servers})
        self.producer = Producer({"bootstrap.servers": self.servers, "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": self.servers})

    def close(self) -> None:
        for client in (self.producer, self.consumer, self.admin):
            try:
                client.close(timeout_ms=5000)
            except Exception:
                pass

    def create(self, topic: str, partitions: int = 1, **config: str) -> str:
        self.admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
        return topic

    def add_partitions(self, topic: str, total: int) -> None:
        self.admin.create_partitions({topic: total})

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str | None],
        *,
        partition: int | None = None,
        key: bytes | str | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
        batch: bool = True,
    ) -> list[RecordMetadata]:
        """Send ``values`` and wait for all acks. ``batch=False`` waits for each record, so each
        lands in its own RecordBatch (useful with small segments)."""
        futures = []
        for value in values:
            fut = self.producer.send(
                topic,
                value.encode() if isinstance(value, str) else value,
                key=key.encode() if isinstance(key, str) else key,
                headers=list(headers) if headers else None,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
            if not batch:
                fut.result(30)
            futures.append(fut)
        self.producer.flush(30_000)
        return [f.result(30) for f in futures]

    def produce_spread(self, topic: str, partitions: int, count: int, prefix: str = "v") -> list[str]:
        """``count`` values ``{prefix}{i}``, record i into partition ``i % partitions``."""
        values = [f"{prefix}{i}" for i in range(count)]
        for p in range(partitions):
            self.produce(topic, values[p::partitions], partition=p)
        return values

    def earliest(self, topic: str, partition: int = 0) -> int:
        tp = TopicPartition(topic, partition)
        return self.consumer.beginning_offsets([tp])[tp]

    def latest(self, topic: str, partition: int = 0) -> int:
        tp = TopicPartition(topic, partition)
        return self.consumer.end_offsets([tp])[tp]


def recent_ms() -> int:
    """A round timestamp an hour ago: inside the broker's default retention (7 days), so test
    records with explicit timestamps are not deleted by the retention checks the tier runs."""
    return (int(time.time()) - 3600) // 1000 * 1_000_000


def wait_until(predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition") -> Any:
    """``tests.waiting.wait_until`` with the spark tier's positional order (predicate, timeout, what)."""
    return waiting.wait_until(predicate, what, timeout_s=timeout_s)


def read(spark: Any, servers: str, **options: str) -> Any:
    """``spark.read.format("pylog")`` with ``bootstrap.servers`` and ``options``."""
    reader = spark.read.format("pylog").option("bootstrap.servers", servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream(spark: Any, servers: str, **options: str) -> Any:
    """``spark.readStream.format("pylog")`` with ``bootstrap.servers`` and ``options``."""
    reader = spark.readStream.format("pylog").option("bootstrap.servers", servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def values_of(df: Any) -> list[str]:
    """The decoded values of a DataFrame (or a list of Rows), sorted."""
    rows = df.collect() if hasattr(df, "collect") else df
    return sorted(bytes(r["value"]).decode() for r in rows)


def to_memory(df: Any, checkpoint: Any, *, trigger: dict[str, Any] | None = None) -> tuple[Any, str]:
    """Start ``df`` into a memory table with a unique name; returns (query, table name)."""
    name = f"m_{uuid.uuid4().hex[:10]}"
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(**(trigger or {"processingTime": "100 milliseconds"}))
    return writer.start(), name


def batch_sizes(query: Any) -> list[int]:
    """numInputRows of every progress the query reported (non-empty batches)."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
