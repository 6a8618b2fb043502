"""The active controller's operations as pure functions: validate against ``ClusterState``,
return the metadata records that carry the change out (or raise ``MetadataError``).

Errors are ``LocalController``'s, so a client sees the same codes and messages whichever
controller serves it. Placement (seed 001 issue text, replication factor 1 until replication
exists): partition ``i`` of a new batch of ``n`` partitions goes to live broker
``(start + i) mod brokers``, where ``start`` is the number of partitions the cluster already has,
so successive topics and partition additions keep rotating over the brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from broker.controller import errors as err
from broker.controller.errors import MetadataError
from broker.controller.image import PartitionImage, TopicImage
from broker.controller.image_builder import ClusterState
from broker.controller.records import (
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.controller.topics import validate_topic_config, validate_topic_name

MAX_REPLICATION_FACTOR = 1  # until partitions are replicated


def place_partitions(state: ClusterState, first_partition: int, count: int) -> list[PartitionImage]:
    """Round-robin leaders for partitions ``first_partition ..`` over the live brokers."""
    live = state.live_brokers()
    if not live:
        raise MetadataError(err.INVALID_REPLICATION_FACTOR, "no broker is registered: cannot place partitions")
    start = state.partition_count()
    placed = []
    for i in range(count):
        leader = live[(start + i) % len(live)]
        placed.append(PartitionImage(first_partition + i, leader, 0, (leader,), (leader,)))
    return placed


def _partition_record(topic_id: uuid.UUID, part: PartitionImage) -> PartitionRecord:
    return PartitionRecord(topic_id, part.partition, part.replicas, part.isr, part.leader, part.leader_epoch)


def create_topic(
    state: ClusterState, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str],
    *, topic_id: uuid.UUID,
) -> tuple[list[MetadataRecord], TopicImage]:  # fmt: skip
    """Records for a new topic, and the topic as it will look once applied."""
    validate_topic_name(name)
    if name in state.topics:
        raise MetadataError(err.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if num_partitions < 1:
        raise MetadataError(err.INVALID_PARTITIONS, f"number of partitions must be at least 1, got {num_partitions}")
    brokers = len(state.live_brokers())
    if replication_factor < 1 or replication_factor > brokers:
        raise MetadataError(
            err.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} must be between 1 and {brokers} (live brokers)",
        )
    if replication_factor > MAX_REPLICATION_FACTOR:
        raise MetadataError(
            err.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is not supported: partitions are not replicated yet (max 1)",
        )
    for key, value in configs.items():
        validate_topic_config(key, value)
    parts = place_partitions(state, 0, num_partitions)
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    records.extend(_partition_record(topic_id, p) for p in parts)
    records.extend(ConfigRecord(name, key, value) for key, value in sorted(configs.items()))
    return records, TopicImage(name, topic_id, {p.partition: p for p in parts}, dict(configs))


def delete_topic(state: ClusterState, name: str, *, deletion_enabled: bool) -> list[MetadataRecord]:
    if not deletion_enabled:
        raise MetadataError(err.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return [RemoveTopicRecord(topic.topic_id)]


def create_partitions(state: ClusterState, name: str, total_count: int) -> list[MetadataRecord]:
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    current = len(topic.partitions)
    if total_count <= current:
        raise MetadataError(
            err.INVALID_PARTITIONS,
            f"topic {name!r} has {current} partitions; the new count must be larger, got {total_count}",
        )
    return [_partition_record(topic.topic_id, p) for p in place_partitions(state, current, total_count - current)]


def alter_topic_configs(state: ClusterState, name: str, changes: Mapping[str, str | None]) -> list[MetadataRecord]:
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(err.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    for key, value in changes.items():
        validate_topic_config(key, value)
    return [ConfigRecord(name, key, value) for key, value in changes.items()]
