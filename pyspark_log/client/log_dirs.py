"""DescribeLogDirs (35) and AlterReplicaLogDirs (34) for the admin client (Kafka Admin's
``describeLogDirs`` and ``alterReplicaLogDirs``).

``describe_log_dirs(cluster, retrying, broker_ids, timeout_ms)`` (``AsyncAdmin.describe_log_dirs``)
asks each broker (all known brokers when None) for all of its log dirs and partitions, and
returns ``{broker id: {log dir path: LogDirDescription}}``. A dir the broker reports offline
carries its error (``KafkaStorageError``) and no replicas. A broker that cannot be reached fails
the call (as Kafka's ``allDescriptions()`` does).

``alter_replica_log_dirs(cluster, retrying, moves, timeout_ms)`` sends each broker the moves of
its replicas (``{(topic, partition, broker id): absolute log dir}``) and returns each replica's
outcome: None when the broker accepted it (the copy then runs in the background; DescribeLogDirs
shows it as a future replica until it is swapped in), else the ``KafkaError`` of its code
(LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE for a replica the broker does not host yet,
KAFKA_STORAGE_ERROR, CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark_log.client.errors import error_for
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError

if TYPE_CHECKING:
    from pyspark_log.client.cluster import Cluster

# ``AsyncAdmin._retrying``: (what, timeout_ms, attempt) -> the attempt's result, retried
Retrying = Callable[[str, float | None, Callable[[], Awaitable[Any]]], Awaitable[Any]]


@dataclass(frozen=True)
class ReplicaInfo:
    """One partition replica in a log dir (Kafka's ``ReplicaInfo``)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log dir of a broker (Kafka's ``LogDirDescription``); sizes -1 when not reported."""

    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


async def describe_log_dirs(
    cluster: Cluster, retrying: Retrying, broker_ids: Iterable[int] | None, timeout_ms: float
) -> dict[int, dict[str, LogDirDescription]]:
    budget = timeout_ms

    async def one(node: int) -> dict[str, LogDirDescription]:
        async def attempt() -> dict[str, LogDirDescription]:
            resp = await cluster.send(node, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, timeout_ms=budget)
            top = getattr(resp, "error_code", ErrorCode.NONE)
            if top != ErrorCode.NONE:
                raise error_for(top, context=f"describe log dirs of broker {node}")
            out: dict[str, LogDirDescription] = {}
            for result in resp.results:
                error = None
                if result.error_code != ErrorCode.NONE:
                    error = error_for(result.error_code, context=f"log dir {result.log_dir} of broker {node}")
                replicas = {
                    TopicPartition(topic.name, part.partition_index): ReplicaInfo(
                        part.partition_size, part.offset_lag, part.is_future_key
                    )
                    for topic in result.topics
                    for part in topic.partitions
                }
                total = getattr(result, "total_bytes", -1)
                usable = getattr(result, "usable_bytes", -1)
                out[result.log_dir] = LogDirDescription(error, replicas, total, usable)
            return out

        return await retrying(f"DescribeLogDirs to broker {node}", timeout_ms, attempt)

    if broker_ids is None:
        await retrying("Metadata", timeout_ms, lambda: cluster.fetch_metadata([]))
        nodes = sorted(cluster.metadata.brokers)
    else:
        nodes = list(dict.fromkeys(broker_ids))
    found = await asyncio.gather(*(one(n) for n in nodes))
    return dict(zip(nodes, found, strict=True))


async def alter_replica_log_dirs(
    cluster: Cluster, retrying: Retrying, moves: dict[tuple[str, int, int], str], timeout_ms: float
) -> dict[tuple[str, int, int], KafkaError | None]:
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (topic, partition, broker), path in moves.items():
        by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(partition)

    async def one(node: int, dirs: dict[str, dict[str, list[int]]]) -> dict[tuple[str, int, int], KafkaError | None]:
        body = {
            "dirs": [
                {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                for path, topics in dirs.items()
            ]
        }

        async def attempt() -> dict[tuple[str, int, int], KafkaError | None]:
            resp = await cluster.send(node, ApiKey.ALTER_REPLICA_LOG_DIRS, body, timeout_ms=timeout_ms)
            out: dict[tuple[str, int, int], KafkaError | None] = {}
            for result in resp.results:
                for part in result.partitions:
                    key = (result.topic_name, part.partition_index, node)
                    code = part.error_code
                    context = f"moving {result.topic_name}-{part.partition_index} on broker {node}"
                    out[key] = None if code == ErrorCode.NONE else error_for(code, context=context)
            return out

        return await retrying(f"AlterReplicaLogDirs to broker {node}", timeout_ms, attempt)

    await retrying("Metadata", timeout_ms, lambda: cluster.fetch_metadata([]))
    found = await asyncio.gather(*(one(n, dirs) for n, dirs in by_broker.items()))
    out: dict[tuple[str, int, int], KafkaError | None] = {}
    for answer in found:
        out.update(answer)
    return out
