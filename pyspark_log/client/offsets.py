"""ListOffsets, routed to each partition's leader, with retries: shared by consumer and admin.

``list_offsets`` takes ``{tp: spec}`` where ``spec`` is a timestamp in ms or one of
``OffsetSpec.LATEST`` (-1: the high watermark, or the last stable offset under read_committed),
``EARLIEST`` (-2: the log start offset) or ``MAX_TIMESTAMP`` (-3, ListOffsets v7+). It returns,
per partition, an ``OffsetAndTimestamp`` (for a timestamp with no record that late: ``None``) or
the ``KafkaError`` that partition ended with. Retriable errors (leader moved, no leader yet,
broken connection) refresh metadata and retry with backoff until ``timeout_ms``; a partition of
a topic that does not exist ends with ``UnknownTopicOrPartitionError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.cluster import STALE_METADATA_ERRORS, Cluster
from pyspark_log.client.errors import (
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    UnsupportedFeatureError,
    error_for,
)
from pyspark_log.client.types import IsolationLevel, OffsetAndTimestamp, OffsetSpec, TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError

OffsetResult = OffsetAndTimestamp | None | KafkaError


async def _ensure_metadata(cluster: Cluster, topics: set[str]) -> None:
    missing = {t for t in topics if t not in cluster.metadata.topics}
    added = cluster.add_topics(topics)
    if added or missing:
        # Newly tracked topics refresh at once (a source that listed the topics a moment ago
        # would otherwise wait out retry.backoff.ms before its first ListOffsets).
        await cluster.refresh(new_topics=added)


async def list_offsets(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout_ms: float,
    backoff: ExponentialBackoff,
) -> dict[TopicPartition, OffsetResult]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000.0
    pending = dict(specs)
    results: dict[TopicPartition, OffsetResult] = {}
    attempt = 0
    last_error: dict[TopicPartition, KafkaError] = {}
    while pending:
        try:
            await _ensure_metadata(cluster, {tp.topic for tp in pending})
        except KafkaError as exc:
            if not exc.retriable:
                raise
        meta = cluster.metadata
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, spec in list(pending.items()):
            topic = meta.topics.get(tp.topic)
            if topic is not None and topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                results[tp] = UnknownTopicOrPartitionError(f"topic {tp.topic!r} does not exist")
                del pending[tp]
            elif topic is not None and topic.error_code == ErrorCode.NONE and tp.partition not in topic.partitions:
                results[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
                del pending[tp]
            else:
                leader = meta.leader_for(tp)
                if leader is not None:
                    by_node.setdefault(leader, {})[tp] = spec
        outcomes = await asyncio.gather(
            *(_list_on_node(cluster, node, group, isolation_level) for node, group in by_node.items()),
            return_exceptions=True,
        )
        for (_node, group), outcome in zip(by_node.items(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, KafkaError) or not outcome.retriable:
                    raise outcome
                cluster.request_update()
                for tp in group:
                    last_error[tp] = outcome
                continue
            for tp, result in outcome.items():
                if isinstance(result, KafkaError) and result.retriable:
                    last_error[tp] = result
                    if result.code in STALE_METADATA_ERRORS:
                        cluster.request_update()
                    continue
                results[tp] = result
                pending.pop(tp, None)
        if not pending:
            break
        wait_s = backoff.backoff_ms(attempt) / 1000.0
        attempt += 1
        if loop.time() + wait_s >= deadline:
            for tp in pending:
                cause = last_error.get(tp)
                results[tp] = KafkaTimeoutError(
                    f"ListOffsets for {tp} did not succeed within {timeout_ms:.0f} ms"
                    + (f" (last error: {cause})" if cause else " (no leader)")
                )
            break
        await asyncio.sleep(wait_s)
    return results


async def _list_on_node(
    cluster: Cluster, node: int, group: dict[TopicPartition, int], isolation_level: IsolationLevel
) -> dict[TopicPartition, OffsetResult]:
    conn = await cluster.connection(node)
    version = conn.version_for(ApiKey.LIST_OFFSETS)
    if version < 7 and OffsetSpec.MAX_TIMESTAMP in group.values():
        raise UnsupportedFeatureError("the broker does not support ListOffsets MAX_TIMESTAMP (needs v7)")
    if version < 2 and isolation_level == IsolationLevel.READ_COMMITTED:
        raise UnsupportedFeatureError("the broker does not support read_committed ListOffsets (needs v2)")
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, spec in group.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": spec, "max_num_offsets": 1}
        )
    body = {
        "replica_id": -1,
        "isolation_level": int(isolation_level),
        "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
    }
    resp = await conn.request(ApiKey.LIST_OFFSETS, body, version=version)
    assert resp is not None
    out: dict[TopicPartition, OffsetResult] = {}
    for topic in resp.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            if tp not in group:
                continue
            if part.error_code != ErrorCode.NONE:
                out[tp] = error_for(part.error_code, context=f"ListOffsets {tp}")
            elif part.offset < 0:
                out[tp] = None
            else:
                epoch = part.leader_epoch if part.leader_epoch >= 0 else None
                out[tp] = OffsetAndTimestamp(part.offset, part.timestamp, epoch)
    for tp in group:
        if tp not in out:
            out[tp] = error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for partition", context=f"ListOffsets {tp}")
    return out
