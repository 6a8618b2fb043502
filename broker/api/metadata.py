"""Metadata (3): brokers, cluster id, controller, and topics with their partitions' leaders.

Brokers are listed with the host and port of the listener the request came in on (a broker
without that listener is left out, as Kafka does). Each partition lists its replicas, ISR and
offline replicas (replicas on brokers that are not live); a partition without a leader is
answered LEADER_NOT_AVAILABLE, as Kafka does, so clients refresh and retry until one is elected.

Null topics (v1+) or an empty list at v0 mean every topic. Unknown topics are auto-created when
the request allows it (v4+ ``allow_auto_topic_creation``, always before) and the broker has
``auto.create.topics.enable``; internal topics (``__…``) are never auto-created.

v8+ ``include_topic_authorized_operations`` (and v8-v10 ``include_cluster_authorized_operations``,
KIP-430): without an authorizer every supported operation is allowed, so the fields carry all of
them, as Kafka's do; with one, ``broker.security.acl.topic_rules`` replaces them with what the ACLs allow.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.api.topics import auto_create, auto_create_enabled
from broker.metadata.image import TopicImage
from broker.security.acl.authorizer import SUPPORTED_OPERATIONS
from broker.security.acl.binding import ResourceType
from pyspark_log.wire.errors import ErrorCode

# KIP-430 bit fields of every operation Kafka reports per resource type (no authorizer: all allowed)
ALL_TOPIC_OPERATIONS = sum(1 << int(op) for op in SUPPORTED_OPERATIONS[ResourceType.TOPIC])
ALL_CLUSTER_OPERATIONS = sum(1 << int(op) for op in SUPPORTED_OPERATIONS[ResourceType.CLUSTER])


def handle_metadata(broker: Broker, request: Request) -> Any:
    return _metadata(broker, request)


async def _metadata(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    image = broker.image()
    topics_out: list[dict[str, Any]] = []
    requested = body.topics
    if requested is None or (request.version == 0 and not requested):
        topics_out.extend(_topic_entry(t, image.brokers) for t in sorted(image.topics.values(), key=lambda t: t.name))
    else:
        allow_create = (body.allow_auto_topic_creation if request.version >= 4 else True) and auto_create_enabled(
            broker
        )
        for wanted in requested:
            name = wanted.name
            if name is None:
                topic_id = wanted.topic_id
                found = image.topic_ids.get(topic_id) if topic_id is not None else None
                if found is None:
                    topics_out.append(_error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                    continue
                name = found
            topic: TopicImage | None = image.topics.get(name)
            if topic is None and allow_create and not name.startswith("__"):
                topic, code = await auto_create(broker, name)
                image = broker.image()
                if topic is None:
                    topics_out.append(_error_entry(name, code))
                    continue
            if topic is None:
                topics_out.append(_error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            topics_out.append(_topic_entry(topic, image.brokers))
    out: dict[str, Any] = {
        "throttle_time_ms": 0,
        "brokers": [  # Kafka: the endpoints of the listener the request came in on
            {"node_id": b.node_id, "host": endpoint[0], "port": endpoint[1], "rack": b.rack}
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if (endpoint := b.endpoint(request.connection.listener)) is not None
        ],
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics_out,
    }
    if request.version >= 8 and getattr(body, "include_topic_authorized_operations", False):
        for entry in topics_out:
            if entry["error_code"] == 0:
                entry["topic_authorized_operations"] = ALL_TOPIC_OPERATIONS
    if 8 <= request.version <= 10 and getattr(body, "include_cluster_authorized_operations", False):
        out["cluster_authorized_operations"] = ALL_CLUSTER_OPERATIONS
    return out


def _error_entry(name: str | None, code: int, topic_id: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"error_code": code, "name": name, "is_internal": False, "partitions": []}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


def _topic_entry(topic: TopicImage, live: Collection[int]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": 0 if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": [b for b in p.replicas if b not in live],
            }
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        ],
    }
