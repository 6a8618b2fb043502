"""Applying committed metadata records: ``ClusterState`` in, new ``ClusterState`` out (pure).

Every node (active controller, other voters, observer brokers) applies the committed entries of
the metadata log in log order with ``apply_payload`` and derives the ``MetadataImage`` the
request handlers read with ``build_image``. Same entries, same order -> same state on every node
(KIP-595: the log is the replicated state machine's input).

Applying never raises for a well-formed record that does not fit the state (a partition of an
unknown topic, a fence of an unknown broker): it is skipped, the same way on every node, so one
bad entry cannot stop a node from following the log. An undecodable payload is skipped as a
whole (logged).

This is the replay half of Kafka's ``MetadataDelta`` (``org.apache.kafka.image``): each record
kind moves the part of the state it names (``broker.metadata.records`` lists them);
``broker.metadata.cluster_state`` holds the state and derives the image from it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from broker.metadata.cluster_state import BrokerRegistration, ClusterState
from broker.metadata.image import PartitionImage, TopicImage
from broker.metadata.records import (
    BROKER_RESOURCE,
    NO_CHANGE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    decode_records,
)
from broker.security.acl.binding import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.sasl.scram import ScramCredential

log = logging.getLogger(__name__)


def apply_payload(state: ClusterState, offset: int, payload: bytes | memoryview) -> ClusterState:
    """Apply one committed entry (all its records, in order) at ``offset``."""
    try:
        records = decode_records(payload)
    except MetadataRecordError as exc:
        log.warning("skipping metadata log entry at offset %d: %s", offset, exc)
        return replace(state, applied_offset=offset)
    return replace(apply_records(state, offset, records), applied_offset=offset)


_ACL_RECORDS = (AccessControlEntryRecord, RemoveAccessControlEntryRecord)


def apply_records(state: ClusterState, offset: int, records: Sequence[MetadataRecord]) -> ClusterState:
    """``apply_record`` for each record in order; a run of ACL records (one CreateAcls or
    DeleteAcls) copies the ACL mapping once, not once per ACL."""
    i = 0
    while i < len(records):
        if isinstance(records[i], _ACL_RECORDS):
            j = i
            while j < len(records) and isinstance(records[j], _ACL_RECORDS):
                j += 1
            state = _apply_acls(state, records[i:j])
            i = j
            continue
        state = apply_record(state, offset, records[i])
        i += 1
    return state


def _apply_acls(state: ClusterState, records: Sequence[MetadataRecord]) -> ClusterState:
    acls = dict(state.acls)
    for record in records:
        if isinstance(record, AccessControlEntryRecord):
            acls[record.id] = acl_binding(record)
        elif isinstance(record, RemoveAccessControlEntryRecord):
            acls.pop(record.id, None)
    return replace(state, acls=acls)


def apply_record(state: ClusterState, offset: int, record: MetadataRecord) -> ClusterState:
    """One record's effect (see ``broker.metadata.records`` for each kind)."""
    if isinstance(record, ClusterIdRecord):
        return state if state.cluster_id is not None else replace(state, cluster_id=record.cluster_id)
    if isinstance(record, RegisterBrokerRecord):
        reg = BrokerRegistration(
            record.broker_id,
            offset,
            record.incarnation_id,
            record.host,
            record.port,
            record.rack,
            fenced=False,
            endpoints=record.endpoints,
        )
        return replace(state, registrations={**state.registrations, record.broker_id: reg})
    if isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
        current = state.registrations.get(record.broker_id)
        if current is None or current.epoch != record.broker_epoch:
            return state
        fenced = isinstance(record, FenceBrokerRecord)
        return replace(state, registrations={**state.registrations, record.broker_id: replace(current, fenced=fenced)})
    if isinstance(record, UnregisterBrokerRecord):
        current = state.registrations.get(record.broker_id)
        if current is None or current.epoch != record.broker_epoch:
            return state
        return replace(state, registrations={b: r for b, r in state.registrations.items() if b != record.broker_id})
    if isinstance(record, TopicRecord):
        return _apply_topic(state, record)
    if isinstance(record, PartitionRecord):
        return _apply_partition(state, record)
    if isinstance(record, PartitionChangeRecord):
        return _apply_partition_change(state, record)
    if isinstance(record, ConfigRecord):
        return _apply_config(state, record)
    if isinstance(record, ClientQuotaRecord):
        return apply_client_quota(state, record)
    if isinstance(record, RemoveTopicRecord):
        name = state.topic_ids.get(record.topic_id)
        if name is None:
            return state
        topics = {n: t for n, t in state.topics.items() if n != name}
        topic_ids = {tid: n for tid, n in state.topic_ids.items() if tid != record.topic_id}
        return replace(state, topics=topics, topic_ids=topic_ids)
    if isinstance(record, UserScramCredentialRecord):
        credential = ScramCredential(
            bytes.fromhex(record.salt), bytes.fromhex(record.stored_key), bytes.fromhex(record.server_key),
            record.iterations,
        )  # fmt: skip
        return replace(state, scram={**state.scram, (record.name, record.mechanism): credential})
    if isinstance(record, RemoveUserScramCredentialRecord):
        scram = {key: c for key, c in state.scram.items() if key != (record.name, record.mechanism)}
        return replace(state, scram=scram)
    if isinstance(record, _ACL_RECORDS):
        return _apply_acls(state, [record])
    raise AssertionError(f"unhandled metadata record {record!r}")


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
        record.principal, record.host, Operation(record.operation), Permission(record.permission_type),
    )  # fmt: skip


def _apply_topic(state: ClusterState, record: TopicRecord) -> ClusterState:
    topic_ids = {tid: n for tid, n in state.topic_ids.items() if n != record.name}
    topic_ids[record.topic_id] = record.name
    topic = TopicImage(record.name, record.topic_id, {}, {})
    return replace(state, topics={**state.topics, record.name: topic}, topic_ids=topic_ids)


def _apply_partition(state: ClusterState, record: PartitionRecord) -> ClusterState:
    name = state.topic_ids.get(record.topic_id)
    if name is None:
        return state
    topic = state.topics[name]
    part = PartitionImage(
        record.partition, record.leader, record.leader_epoch, record.replicas, record.isr, record.partition_epoch
    )
    updated = TopicImage(name, topic.topic_id, {**topic.partitions, record.partition: part}, topic.configs)
    return replace(state, topics={**state.topics, name: updated})


def _apply_partition_change(state: ClusterState, record: PartitionChangeRecord) -> ClusterState:
    """Kafka's rule: every change bumps the partition epoch; a new leader also the leader epoch."""
    name = state.topic_ids.get(record.topic_id)
    if name is None:
        return state
    topic = state.topics[name]
    current = topic.partitions.get(record.partition)
    if current is None:
        return state
    part = partition_after_change(current, record)
    updated = TopicImage(name, topic.topic_id, {**topic.partitions, record.partition: part}, topic.configs)
    return replace(state, topics={**state.topics, name: updated})


def partition_after_change(current: PartitionImage, record: PartitionChangeRecord) -> PartitionImage:
    """``current`` with ``record`` applied (the rule of ``_apply_partition_change``). A change of
    the replica set (KIP-455 reassignment) also bumps the leader epoch, so the leader starts its
    epoch again with the new set of followers (``broker.controller.reassignment``)."""
    isr = current.isr if record.isr is None else record.isr
    leader, leader_epoch = current.leader, current.leader_epoch
    if record.leader not in (NO_CHANGE, current.leader):
        leader, leader_epoch = record.leader, current.leader_epoch + 1
    elif record.replicas is not None and record.replicas != current.replicas:
        leader_epoch = current.leader_epoch + 1
    return replace(
        current, leader=leader, leader_epoch=leader_epoch, isr=isr, partition_epoch=current.partition_epoch + 1,
        replicas=current.replicas if record.replicas is None else record.replicas,
        adding_replicas=current.adding_replicas if record.adding_replicas is None else record.adding_replicas,
        removing_replicas=current.removing_replicas if record.removing_replicas is None else record.removing_replicas,
    )  # fmt: skip


def _apply_config(state: ClusterState, record: ConfigRecord) -> ClusterState:
    if record.resource_type == BROKER_RESOURCE:
        return apply_broker_config(state, record)
    topic = state.topics.get(record.resource_name) if record.resource_type == TOPIC_RESOURCE else None
    if topic is None:
        return state
    configs = dict(topic.configs)
    if record.value is None:
        configs.pop(record.name, None)
    else:
        configs[record.name] = record.value
    updated = TopicImage(topic.name, topic.topic_id, topic.partitions, configs)
    return replace(state, topics={**state.topics, topic.name: updated})


def apply_broker_config(state: ClusterState, record: ConfigRecord) -> ClusterState:
    """A KIP-226 dynamic broker config set (value) or removed (None) on a broker id or on the
    cluster default (``""``); a resource left without configs disappears."""
    configs = {level: dict(values) for level, values in state.broker_configs.items()}
    values = configs.setdefault(record.resource_name, {})
    if record.value is None:
        values.pop(record.name, None)
    else:
        values[record.name] = record.value
    if not values:
        del configs[record.resource_name]
    return replace(state, broker_configs=configs)


def apply_client_quota(state: ClusterState, record: ClientQuotaRecord) -> ClusterState:
    """Set or remove one quota of one entity; an entity left without quotas disappears."""
    quotas = {entity: dict(values) for entity, values in state.client_quotas.items()}
    values = quotas.setdefault(record.entity, {})
    if record.remove:
        values.pop(record.key, None)
    else:
        values[record.key] = float(record.value)
    if not values:
        del quotas[record.entity]
    return replace(state, client_quotas=quotas)
