"""The active controller's operations as pure functions: validate against ``ClusterState``,
return the metadata records that carry the change out (or raise ``MetadataError``).

Errors are ``LocalController``'s, so a client sees the same codes and messages whichever
controller serves it. Placement: partition ``i`` of a new batch with replication factor ``r``
gets the live brokers ``(start + i + j) mod brokers`` for ``j < r``, the first of them its leader,
where ``start`` is the number of partitions the cluster already has, so successive topics and
partition additions keep rotating leaders and followers over the brokers. Explicit replica lists
from the request (``assignments``) replace that placement once ``check_assignments`` accepts them.

ISR changes and leader elections are in ``broker.controller.partition_changes``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

from broker.controller.errors import MetadataError
from broker.controller.topics import validate_topic_config, validate_topic_name
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import PartitionImage, TopicImage
from broker.metadata.records import (
    BROKER_RESOURCE,
    ClientQuotaRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.quota.entity import Entity, InvalidQuotaError, make_entity, validate_quota
from pyspark_log.wire.errors import ErrorCode

Assignments = Sequence[Sequence[int]]  # explicit replica lists, one per new partition


def check_assignments(
    assignments: Assignments, live_brokers: Collection[int], replication_factor: int | None = None
) -> int:
    """Validate explicit replica lists (one per new partition, as CreateTopics/CreatePartitions
    carry them) and return their replication factor. Kafka's rules and messages
    (``ReplicationControlManager.validateManualPartitionAssignment``), INVALID_REPLICA_ASSIGNMENT:
    each list non-empty, every id a live broker (Kafka: a registered one; pylog refuses a fenced
    one too, with Kafka's message), no repeats, all of one length — the first list's, or
    ``replication_factor`` (an existing topic's, for CreatePartitions)."""
    if not assignments:
        raise MetadataError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment is empty.")
    live = set(live_brokers)
    expected = replication_factor
    for replicas in assignments:
        if not replicas:
            raise MetadataError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
            )
        previous = None
        for broker_id in sorted(replicas):
            if broker_id not in live:
                raise MetadataError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
                )
            if broker_id == previous:
                raise MetadataError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker_id} more than once.",
                )
            previous = broker_id
        if expected is not None and len(replicas) != expected:
            raise MetadataError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
                f"not consistent with previous partitions, which have {expected} replica(s).",
            )
        expected = len(replicas)
    assert expected is not None
    return expected


def place_partitions(
    state: ClusterState,
    first_partition: int,
    count: int,
    assignments: Assignments | None = None,
    replication_factor: int = 1,
) -> list[PartitionImage]:
    """Partitions ``first_partition ..``: led by the first broker of their explicit replica list
    (validated by the caller), else ``replication_factor`` live brokers each, rotating (module
    docstring). Every replica starts in the ISR."""
    if assignments is not None:
        return [
            PartitionImage(first_partition + i, replicas[0], 0, tuple(replicas), tuple(replicas))
            for i, replicas in enumerate(assignments)
        ]
    live = state.live_brokers()
    if not live:
        raise MetadataError(ErrorCode.INVALID_REPLICATION_FACTOR, "no broker is registered: cannot place partitions")
    if replication_factor > len(live):
        raise MetadataError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the {len(live)} live broker(s)",
        )
    start = state.partition_count()
    placed = []
    for i in range(count):
        replicas = tuple(live[(start + i + j) % len(live)] for j in range(replication_factor))
        placed.append(PartitionImage(first_partition + i, replicas[0], 0, replicas, replicas))
    return placed


def _check_replication_factor(replication_factor: int, brokers: int) -> None:
    if replication_factor < 1 or replication_factor > brokers:
        raise MetadataError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} must be between 1 and {brokers} (live brokers)",
        )


def _partition_record(topic_id: uuid.UUID, part: PartitionImage) -> PartitionRecord:
    return PartitionRecord(
        topic_id, part.partition, part.replicas, part.isr, part.leader, part.leader_epoch, part.partition_epoch
    )


def create_topic(
    state: ClusterState, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str],
    *, topic_id: uuid.UUID, assignments: Assignments | None = None,
) -> tuple[list[MetadataRecord], TopicImage]:  # fmt: skip
    """Records for a new topic, and the topic as it will look once applied. With ``assignments``
    (replica list of partition i at index i) they decide the partition count and placement."""
    validate_topic_name(name)
    if name in state.topics:
        raise MetadataError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if assignments is not None:
        num_partitions = len(assignments)
        replication_factor = check_assignments(assignments, state.live_brokers())
    if num_partitions < 1:
        raise MetadataError(
            ErrorCode.INVALID_PARTITIONS, f"number of partitions must be at least 1, got {num_partitions}"
        )
    _check_replication_factor(replication_factor, len(state.live_brokers()))
    for key, value in configs.items():
        validate_topic_config(key, value)
    parts = place_partitions(state, 0, num_partitions, assignments, replication_factor)
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    records.extend(_partition_record(topic_id, p) for p in parts)
    records.extend(ConfigRecord(name, key, value) for key, value in sorted(configs.items()))
    return records, TopicImage(name, topic_id, {p.partition: p for p in parts}, dict(configs))


def delete_topic(state: ClusterState, name: str, *, deletion_enabled: bool) -> list[MetadataRecord]:
    if not deletion_enabled:
        raise MetadataError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return [RemoveTopicRecord(topic.topic_id)]


def check_new_partitions(
    name: str, current: int, total_count: int, assignments: Assignments | None,
    live_brokers: Collection[int], *, replication_factor: int | None = None,
) -> None:  # fmt: skip
    """CreatePartitions' rules: the count grows; explicit assignments name exactly the new ones,
    each with the topic's ``replication_factor`` (Kafka's messages)."""
    if total_count <= current:
        raise MetadataError(
            ErrorCode.INVALID_PARTITIONS,
            f"topic {name!r} has {current} partitions; the new count must be larger, got {total_count}",
        )
    if assignments is not None:
        if len(assignments) != total_count - current:
            raise MetadataError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {total_count - current} additional partition(s), but only {len(assignments)} "
                "assignment(s) were specified.",
            )
        _check_replication_factor(check_assignments(assignments, live_brokers, replication_factor), len(live_brokers))


def create_partitions(
    state: ClusterState, name: str, total_count: int, assignments: Assignments | None = None
) -> list[MetadataRecord]:
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    current = len(topic.partitions)
    replication_factor = max((len(p.replicas) for p in topic.partitions.values()), default=1)
    check_new_partitions(
        name, current, total_count, assignments, state.live_brokers(), replication_factor=replication_factor
    )
    placed = place_partitions(state, current, total_count - current, assignments, replication_factor)
    return [_partition_record(topic.topic_id, p) for p in placed]


def alter_topic_configs(state: ClusterState, name: str, changes: Mapping[str, str | None]) -> list[MetadataRecord]:
    topic = state.topics.get(name)
    if topic is None:
        raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    for key, value in changes.items():
        validate_topic_config(key, value)
    return [ConfigRecord(name, key, value) for key, value in changes.items()]


def alter_broker_configs(resource_name: str, changes: Mapping[str, str | None]) -> list[MetadataRecord]:
    """KIP-226: ConfigRecords of resource type BROKER (checked by the handler,
    ``broker.dynamic_config.check_changes``)."""
    return [ConfigRecord(resource_name, key, value, BROKER_RESOURCE) for key, value in changes.items()]


def alter_client_quotas(
    entity_pairs: Sequence[tuple[str, str | None]], changes: Mapping[str, float | None]
) -> list[MetadataRecord]:
    """AlterClientQuotas for one entity (Kafka documentation §4.9 "Quotas": quotas live in the metadata, every
    broker reads quota overrides and applies them at once): one ClientQuotaRecord per key, value None removes
    it.
    INVALID_REQUEST for an unknown entity type or key, a repeated key, or a value out of range."""
    try:
        entity: Entity = make_entity(entity_pairs)
        for key, value in changes.items():
            if value is not None:
                validate_quota(entity, key, value)
    except InvalidQuotaError as exc:
        raise MetadataError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return [
        ClientQuotaRecord(entity, key, 0.0, remove=True) if value is None else ClientQuotaRecord(entity, key, value)
        for key, value in changes.items()
    ]
