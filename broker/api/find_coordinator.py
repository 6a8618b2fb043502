"""FindCoordinator (10): which broker coordinates a group (key type 0), a transactional id (1)
or a share-partition's state (2, SHARE: KIP-932's share coordinator).

Kafka documentation §5.5 "Distribution": a consumer "issues a FindCoordinatorRequest to any Kafka broker" to learn its
group's coordinator: the leader of partition ``abs(hashCode(group)) % partitions`` of
``__consumer_offsets``. That internal topic (``cleanup.policy=compact``) is created on first use
with ``offsets.topic.num.partitions`` partitions and ``offsets.topic.segment.bytes``, as Kafka
does. A transactional id (key type 1; Kafka documentation §4.6 "Message Delivery Semantics", the transaction
coordinator) is coordinated by the leader of partition
``abs(hashCode(transactional id)) % partitions`` of ``__transaction_state``, created on first use
the same way (``transaction.state.log.num.partitions``, ``transaction.state.log.replication.factor``,
``transaction.state.log.segment.bytes``, compacted, uncompressed).

Why serve FindCoordinator even without a coordinator: librdkafka (confluent-kafka, kcat) enables
LZ4 only for brokers that advertise FindCoordinator (``rdkafka_feature.c``: the LZ4 feature
"depends on" FindCoordinator v0, the API released with LZ4 in Kafka 0.8.2).

A SHARE key is ``groupId:topicId:partition`` (Kafka's ``SharePartitionKey``; anything else is
INVALID_REQUEST): the leader of ``abs(hashCode(key)) % partitions`` of ``__share_group_state``,
which exists once a share group first fetched (``broker.api.share_groups``).

v0-v3 carry one key; v4+ (KIP-699) a list, answered per key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.controller.errors import MetadataError
from broker.coordinator.group import OFFSETS_TOPIC, partition_for
from broker.coordinator.txn import TRANSACTION_STATE_TOPIC
from broker.coordinator.txn import partition_for as txn_partition_for
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

BATCHED_VERSION = 4
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
# Kafka's fixed configs of the internal topics; segment.bytes comes from offsets.topic.segment.bytes /
# transaction.state.log.segment.bytes (default 104857600) when the topic is created.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}
TXN_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed"}
DEFAULT_SEGMENT_BYTES = 104857600

Answer = tuple[int, str | None, int, str, int]  # error, message, node id, host, port


def handle_find_coordinator(broker: Broker, request: Request) -> Any:
    body = request.body
    keys = list(body.coordinator_keys) if request.version >= BATCHED_VERSION else [body.key]
    if body.key_type == GROUP_KEY and broker.groups is not None and OFFSETS_TOPIC not in broker.image().topics:
        return _after_creating_topic(broker, request, keys)
    if (
        body.key_type == TRANSACTION_KEY
        and broker.txn is not None
        and TRANSACTION_STATE_TOPIC not in broker.image().topics
    ):
        return _after_creating_topic(broker, request, keys)
    return _respond(request, [(key, _answer(broker, body.key_type, key, request.connection.listener)) for key in keys])


async def _after_creating_topic(broker: Broker, request: Request, keys: list[str]) -> Mapping[str, Any]:
    if request.body.key_type == TRANSACTION_KEY:
        await ensure_transaction_topic(broker)
    else:
        await ensure_offsets_topic(broker)
    return _respond(
        request, [(key, _answer(broker, request.body.key_type, key, request.connection.listener)) for key in keys]
    )


async def ensure_offsets_topic(broker: Broker) -> None:
    """Create ``__consumer_offsets`` unless it exists (a concurrent creation is success)."""
    config = broker.config
    partitions = int(config.get("offsets.topic.num.partitions", 50))
    replication = _capped_replication(broker, OFFSETS_TOPIC, int(config.get("offsets.topic.replication.factor", 3)))
    try:
        segment_bytes = str(config.get("offsets.topic.segment.bytes", DEFAULT_SEGMENT_BYTES))
        configs = {**OFFSETS_TOPIC_CONFIGS, "segment.bytes": segment_bytes}
        await broker.controller.create_topic(OFFSETS_TOPIC, partitions, replication, configs)
        log.info("created %s with %d partition(s)", OFFSETS_TOPIC, partitions)
    except MetadataError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc.message)


async def ensure_transaction_topic(broker: Broker) -> None:
    """Create ``__transaction_state`` unless it exists (a concurrent creation is success)."""
    config = broker.config
    partitions = int(config.get("transaction.state.log.num.partitions", 50))
    wanted = int(config.get("transaction.state.log.replication.factor", 3))
    replication = _capped_replication(broker, TRANSACTION_STATE_TOPIC, wanted)
    min_isr = min(int(config.get("transaction.state.log.min.isr", 2)), replication)
    segment_bytes = str(config.get("transaction.state.log.segment.bytes", DEFAULT_SEGMENT_BYTES))
    configs = {**TXN_TOPIC_CONFIGS, "min.insync.replicas": str(min_isr), "segment.bytes": segment_bytes}
    try:
        await broker.controller.create_topic(TRANSACTION_STATE_TOPIC, partitions, replication, configs)
        log.info("created %s with %d partition(s)", TRANSACTION_STATE_TOPIC, partitions)
    except MetadataError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc.message)


def _capped_replication(broker: Broker, topic: str, wanted: int) -> int:
    """The internal topic's replication factor: the configured one (Kafka's default 3), capped to
    the live brokers with a warning, so a single node works with no settings."""
    live = max(len(broker.image().brokers), 1)
    if wanted > live:
        log.warning(
            "creating %s with replication factor %d: only %d broker(s) are live (configured %d)",
            topic, live, live, wanted,
        )  # fmt: skip
    return max(1, min(wanted, live))


def _by_txn_hash(key: str, partitions: int) -> int:
    return txn_partition_for(key, partitions)


def _by_group_hash(key: str, partitions: int) -> int:
    return partition_for(key, partitions)


def _answer(broker: Broker, key_type: int, key: str, listener: str) -> Answer:
    if key_type == TRANSACTION_KEY:
        if broker.txn is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not running", -1, "", -1
        if not key:
            return ErrorCode.INVALID_REQUEST, "empty transactional id", -1, "", -1
        internal, hash_partition = TRANSACTION_STATE_TOPIC, _by_txn_hash
    elif key_type == GROUP_KEY:
        if broker.groups is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running", -1, "", -1
        internal, hash_partition = OFFSETS_TOPIC, _by_group_hash
    elif key_type == SHARE_KEY:
        rest = key.rsplit(":", 2)  # groupId:topicId:partition (the group id may hold colons)
        if broker.groups is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the share coordinator is not running", -1, "", -1
        if len(rest) != 3 or not rest[0] or not rest[1] or not rest[2].lstrip("-").isdigit():
            return ErrorCode.INVALID_REQUEST, f"invalid share coordinator key {key}", -1, "", -1
        internal, hash_partition = "__share_group_state", _by_group_hash  # the same abs(hashCode) % n
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    image = broker.image()
    topic = image.topics.get(internal)
    if topic is None or not topic.partitions:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{internal} does not exist yet", -1, "", -1
    part = topic.partitions.get(hash_partition(key, len(topic.partitions)))
    node = image.brokers.get(part.leader) if part is not None else None
    endpoint = node.endpoint(listener) if node is not None else None
    if node is None or endpoint is None:  # Kafka: a leader without the client's listener is not available
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator's partition has no leader", -1, "", -1
    return ErrorCode.NONE, None, node.node_id, *endpoint


def _respond(request: Request, answers: list[tuple[str, Answer]]) -> Mapping[str, Any]:
    if request.version >= BATCHED_VERSION:
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {"key": key, "node_id": n, "host": h, "port": p, "error_code": c, "error_message": m}
                for key, (c, m, n, h, p) in answers
            ],
        }
    code, message, node, host, port = answers[0][1]
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "node_id": node,
        "host": host,
        "port": port,
    }
