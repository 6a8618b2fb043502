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
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

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


class StateBuilder:
    """A mutable ``ClusterState`` that a batch of committed entries is applied to, then frozen
    once with ``build`` (Kafka's ``MetadataDelta``, which the ``MetadataLoader`` fills with a
    batch of records and publishes as one new image).

    Copy on write, per batch: the first change of a mapping (``topics``, ``registrations``, ...)
    or of one topic's partitions or configs copies it from the base state, later changes of the
    same batch mutate the copy in place, so a record costs what it changes, not the size of the
    state. ``build`` hands the copies over to the new ``ClusterState`` and forgets them: the
    next change copies again, so a built state is never mutated. Mappings the batch left alone
    keep their identity (``build_image`` shares ``acls``; AclAuthority's cache relies on it).

    Pure: no I/O, no clock. One rule per record kind (``apply_record``); the module's
    functions (``apply_payload`` ...) are this builder over one entry or record.
    """

    __slots__ = (
        "_changed",
        "_owned",
        "_owned_levels",
        "_owned_topics",
        "acls",
        "applied_offset",
        "broker_configs",
        "client_quotas",
        "cluster_id",
        "registrations",
        "scram",
        "topic_ids",
        "topics",
    )  # fmt: skip

    def __init__(self, state: ClusterState) -> None:
        self.cluster_id = state.cluster_id
        self.registrations: Mapping[int, BrokerRegistration] = state.registrations
        self.topics: Mapping[str, TopicImage] = state.topics
        self.topic_ids: Mapping[uuid.UUID, str] = state.topic_ids
        self.applied_offset = state.applied_offset
        self.scram: Mapping[tuple[str, str], ScramCredential] = state.scram
        self.client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = state.client_quotas
        self.acls: Mapping[uuid.UUID, AclBinding] = state.acls
        self.broker_configs: Mapping[str, Mapping[str, str]] = state.broker_configs
        self._owned: dict[str, dict[Any, Any]] = {}  # field name -> this batch's copy
        self._owned_topics: set[str] = set()  # topics whose TopicImage (and dicts) this batch created
        self._owned_levels: set[Any] = set()  # (field, key) of nested quota / broker-config dicts copied
        self._changed = False

    def _own(self, name: str) -> dict[Any, Any]:
        """This batch's own copy of the mapping field ``name`` (copied on first use)."""
        owned = self._owned.get(name)
        if owned is None:
            owned = self._owned[name] = dict(getattr(self, name))
            setattr(self, name, owned)
        self._changed = True
        return owned

    def _own_topic(self, name: str) -> TopicImage:
        """This batch's own ``TopicImage`` of topic ``name`` (its dicts copied on first use)."""
        topics = self._own("topics")
        topic = topics[name]
        if name not in self._owned_topics:
            topic = topics[name] = TopicImage(name, topic.topic_id, dict(topic.partitions), dict(topic.configs))
            self._owned_topics.add(name)
        return topic

    def _own_level(self, field_name: str, key: Any) -> dict[Any, Any]:
        """This batch's own inner dict ``field_name[key]`` of a nested mapping (created if absent)."""
        outer = self._own(field_name)
        if (field_name, key) not in self._owned_levels:
            outer[key] = dict(outer.get(key, {}))
            self._owned_levels.add((field_name, key))
        inner: dict[Any, Any] = outer[key]
        return inner

    def build(self) -> ClusterState:
        """The state as of every change so far (frozen: later changes copy again)."""
        state = ClusterState(
            self.cluster_id, self.registrations, self.topics, self.topic_ids, self.applied_offset, self.scram,
            self.client_quotas, self.acls, self.broker_configs,
        )  # fmt: skip
        self._owned = {}
        self._owned_topics = set()
        self._owned_levels = set()
        self._changed = False
        return state

    # -- applying --------------------------------------------------------------------------------
    def apply_payload(self, offset: int, payload: bytes | memoryview) -> None:
        """Apply one committed entry (all its records, in order) at ``offset``; an undecodable
        payload is skipped whole (logged)."""
        try:
            records = decode_records(payload)
        except MetadataRecordError as exc:
            log.warning("skipping metadata log entry at offset %d: %s", offset, exc)
        else:
            for record in records:
                self.apply_record(offset, record)
        self.applied_offset = offset

    def apply_record(self, offset: int, record: MetadataRecord) -> None:
        """One record's effect (see ``broker.metadata.records`` for each kind)."""
        if isinstance(record, ConfigRecord):
            self._config(record)
        elif isinstance(record, PartitionChangeRecord):
            self._partition_change(record)
        elif isinstance(record, PartitionRecord):
            self._partition(record)
        elif isinstance(record, TopicRecord):
            topic_ids = self._own("topic_ids")
            for stale in [tid for tid, n in topic_ids.items() if n == record.name]:
                del topic_ids[stale]
            topic_ids[record.topic_id] = record.name
            self._own("topics")[record.name] = TopicImage(record.name, record.topic_id, {}, {})
            self._owned_topics.add(record.name)
        elif isinstance(record, RemoveTopicRecord):
            name = self.topic_ids.get(record.topic_id)
            if name is not None:
                del self._own("topics")[name]
                self._owned_topics.discard(name)
                del self._own("topic_ids")[record.topic_id]
        elif isinstance(record, ClusterIdRecord):
            if self.cluster_id is None:
                self.cluster_id = record.cluster_id
                self._changed = True
        elif isinstance(record, RegisterBrokerRecord):
            self._own("registrations")[record.broker_id] = BrokerRegistration(
                record.broker_id, offset, record.incarnation_id, record.host, record.port, record.rack,
                fenced=False, endpoints=record.endpoints,
            )  # fmt: skip
        elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord | UnregisterBrokerRecord):
            current = self.registrations.get(record.broker_id)
            if current is None or current.epoch != record.broker_epoch:
                return
            if isinstance(record, UnregisterBrokerRecord):
                del self._own("registrations")[record.broker_id]
            else:
                fenced = isinstance(record, FenceBrokerRecord)
                self._own("registrations")[record.broker_id] = replace(current, fenced=fenced)
        elif isinstance(record, ClientQuotaRecord):
            values = self._own_level("client_quotas", record.entity)
            if record.remove:
                values.pop(record.key, None)
            else:
                values[record.key] = float(record.value)
            if not values:
                del self._own("client_quotas")[record.entity]
                self._owned_levels.discard(("client_quotas", record.entity))
        elif isinstance(record, UserScramCredentialRecord):
            self._own("scram")[(record.name, record.mechanism)] = ScramCredential(
                bytes.fromhex(record.salt), bytes.fromhex(record.stored_key), bytes.fromhex(record.server_key),
                record.iterations,
            )  # fmt: skip
        elif isinstance(record, RemoveUserScramCredentialRecord):
            if (record.name, record.mechanism) in self.scram:
                del self._own("scram")[(record.name, record.mechanism)]
        elif isinstance(record, AccessControlEntryRecord):
            self._own("acls")[record.id] = acl_binding(record)
        elif isinstance(record, RemoveAccessControlEntryRecord):
            if record.id in self.acls:
                del self._own("acls")[record.id]
        else:
            raise AssertionError(f"unhandled metadata record {record!r}")  # noqa: TRY004 - an invariant, not bad input

    def _partition(self, record: PartitionRecord) -> None:
        name = self.topic_ids.get(record.topic_id)
        if name is None:
            return
        self._own_topic(name).partitions[record.partition] = PartitionImage(
            record.partition, record.leader, record.leader_epoch, record.replicas, record.isr, record.partition_epoch
        )

    def _partition_change(self, record: PartitionChangeRecord) -> None:
        """Kafka's rule (``partition_after_change``): every change bumps the partition epoch."""
        name = self.topic_ids.get(record.topic_id)
        if name is None or record.partition not in self.topics[name].partitions:
            return
        partitions = self._own_topic(name).partitions
        partitions[record.partition] = partition_after_change(partitions[record.partition], record)

    def _config(self, record: ConfigRecord) -> None:
        if record.resource_type == BROKER_RESOURCE:
            values = self._own_level("broker_configs", record.resource_name)
            if record.value is None:
                values.pop(record.name, None)
            else:
                values[record.name] = record.value
            if not values:
                del self._own("broker_configs")[record.resource_name]
                self._owned_levels.discard(("broker_configs", record.resource_name))
            return
        if record.resource_type != TOPIC_RESOURCE or record.resource_name not in self.topics:
            return
        configs = self._own_topic(record.resource_name).configs
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value


def apply_payload(state: ClusterState, offset: int, payload: bytes | memoryview) -> ClusterState:
    """Apply one committed entry (all its records, in order) at ``offset``."""
    builder = StateBuilder(state)
    builder.apply_payload(offset, payload)
    return builder.build()


def apply_payloads(state: ClusterState, entries: Iterable[tuple[int, bytes | memoryview]]) -> ClusterState:
    """Apply a batch of committed entries ``(offset, payload)`` in order: the same state as
    ``apply_payload`` entry by entry, built once (``StateBuilder``)."""
    builder = StateBuilder(state)
    for offset, payload in entries:
        builder.apply_payload(offset, payload)
    return builder.build()


def apply_records(state: ClusterState, offset: int, records: Sequence[MetadataRecord]) -> ClusterState:
    """``apply_record`` for each record in order, built once (a CreateAcls of many ACLs copies
    the ACL mapping once, not once per ACL)."""
    builder = StateBuilder(state)
    for record in records:
        builder.apply_record(offset, record)
    return builder.build() if builder._changed else state


def apply_record(state: ClusterState, offset: int, record: MetadataRecord) -> ClusterState:
    """One record's effect (see ``broker.metadata.records`` for each kind); ``state`` itself
    when the record changes nothing (it does not fit the state)."""
    return apply_records(state, offset, (record,))


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
        record.principal, record.host, Operation(record.operation), Permission(record.permission_type),
    )  # fmt: skip


def partition_after_change(current: PartitionImage, record: PartitionChangeRecord) -> PartitionImage:
    """``current`` with ``record`` applied. Kafka's rule: every change bumps the partition epoch;
    a new leader also the leader epoch. A change of the replica set (KIP-455 reassignment) also
    bumps the leader epoch, so the leader starts its epoch again with the new set of followers
    (``broker.controller.reassignment``)."""
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


def apply_broker_config(state: ClusterState, record: ConfigRecord) -> ClusterState:
    """A KIP-226 dynamic broker config set (value) or removed (None) on a broker id or on the
    cluster default (``""``); a resource left without configs disappears."""
    return apply_record(state, state.applied_offset, record)


def apply_client_quota(state: ClusterState, record: ClientQuotaRecord) -> ClusterState:
    """Set or remove one quota of one entity; an entity left without quotas disappears."""
    return apply_record(state, state.applied_offset, record)
