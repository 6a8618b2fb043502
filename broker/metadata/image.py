"""The cluster metadata image: what every request handler reads to answer about topics and brokers.

Immutable values: a change produces a new image (``MetadataImage.with_topic`` …), so a handler
that took an image sees one consistent version for the whole request.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from broker.security.acl.binding import AclBinding
from broker.security.sasl.scram import ScramCredential

Endpoint = tuple[str, str, int]  # (listener name, host, port), as BrokerRegistration lists them
NO_LEADER = -1  # PartitionImage.leader of a partition without a leader (offline, or its leader fenced)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. ``host``/``port``: its inter-broker listener; ``endpoints``: every listener
    it serves clients on (empty for registrations written before listeners were recorded)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where a client that came in on ``listener`` reaches this broker (Kafka: the endpoint of
        the same listener name); None when the broker has no such listener."""
        if not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0  # bumped by every change of ISR or leader (KIP-497)
    adding_replicas: tuple[int, ...] = ()  # KIP-455: a reassignment in progress adds these ...
    removing_replicas: tuple[int, ...] = ()  # ... and removes these once the added ones are in the ISR


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicImage]
    topic_ids: dict[uuid.UUID, str]
    epoch: int = 0
    # SCRAM credentials by (user, mechanism): salt, StoredKey, ServerKey, iterations (never a password)
    scram: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    # Client quotas (Kafka documentation §4.9 "Quotas"): entity (``broker.quota.entity.Entity``) -> {quota key: value}
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    # ACLs by their id (AccessControlEntryRecord); replaced, never mutated, when an ACL changes
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=dict)
    # KIP-226 dynamic broker configs (ConfigRecords of resource type BROKER): "" (the cluster
    # default) or a broker id -> {key: value}
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def empty(cls, cluster_id: str, controller_id: int) -> MetadataImage:
        return cls(cluster_id, controller_id, {}, {}, {})

    def with_broker(self, broker: BrokerInfo) -> MetadataImage:
        return replace(self, brokers={**self.brokers, broker.node_id: broker}, epoch=self.epoch + 1)

    def with_topic(self, topic: TopicImage) -> MetadataImage:
        topic_ids = {tid: name for tid, name in self.topic_ids.items() if name != topic.name}
        topic_ids[topic.topic_id] = topic.name
        return replace(self, topics={**self.topics, topic.name: topic}, topic_ids=topic_ids, epoch=self.epoch + 1)

    def without_topic(self, name: str) -> MetadataImage:
        topic = self.topics[name]
        topics = {n: t for n, t in self.topics.items() if n != name}
        topic_ids = {tid: n for tid, n in self.topic_ids.items() if tid != topic.topic_id}
        return replace(self, topics=topics, topic_ids=topic_ids, epoch=self.epoch + 1)
