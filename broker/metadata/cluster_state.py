"""``ClusterState``: everything the metadata log has said up to an offset, and the
``MetadataImage`` derived from it (``build_image``). Pure: immutable values, no I/O.

``ClusterState`` keeps what the image does not show: every registration, fenced or not, with its
broker epoch (the offset of its ``RegisterBrokerRecord``, as in Kafka) and incarnation id.
The image lists only unfenced brokers and shows leader -1 (``NO_LEADER``) for partitions whose
leader is fenced. ``broker.metadata.replay`` moves a state forward by one committed entry;
``broker.metadata.snapshot_records`` writes a state as KIP-630 snapshot records and reads it back.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from broker.metadata.image import NO_LEADER, BrokerInfo, MetadataImage, TopicImage
from broker.security.acl.binding import AclBinding
from broker.security.sasl.scram import ScramCredential


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    endpoints: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Everything the metadata log has said so far, up to ``applied_offset``."""

    cluster_id: str | None = None
    registrations: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicImage] = field(default_factory=dict)
    topic_ids: Mapping[uuid.UUID, str] = field(default_factory=dict)
    applied_offset: int = -1
    scram: Mapping[tuple[str, str], ScramCredential] = field(default_factory=dict)
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(default_factory=dict)
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # KIP-226

    def live_brokers(self) -> list[int]:
        """Registered, unfenced broker ids in ascending order."""
        return sorted(b for b, reg in self.registrations.items() if not reg.fenced)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())


def build_image(state: ClusterState, *, cluster_id: str, local_broker_id: int | None) -> MetadataImage:
    """The image handlers read: live brokers only, leader -1 where the leader is fenced.

    ``controller_id`` (Metadata, DescribeCluster) is this node when it is a live broker, else the
    lowest live broker: clients send admin requests there and any broker forwards them to the
    active controller (as Kafka's brokers answer with a random broker id in KRaft mode).
    """
    live = state.live_brokers()
    brokers: dict[int, BrokerInfo] = {}
    for b in live:
        reg = state.registrations[b]
        brokers[b] = BrokerInfo(b, reg.host, reg.port, reg.rack, reg.endpoints)
    fenced = {b for b, reg in state.registrations.items() if reg.fenced}
    topics = dict(state.topics)
    if fenced:
        for name, topic in state.topics.items():
            if any(p.leader in fenced for p in topic.partitions.values()):
                parts = {
                    i: replace(p, leader=NO_LEADER) if p.leader in fenced else p for i, p in topic.partitions.items()
                }
                topics[name] = TopicImage(name, topic.topic_id, parts, topic.configs)
    if local_broker_id is not None and local_broker_id in brokers:
        controller_id = local_broker_id
    else:
        controller_id = live[0] if live else NO_LEADER
    return MetadataImage(
        state.cluster_id or cluster_id,
        controller_id,
        brokers,
        topics,
        dict(state.topic_ids),
        epoch=state.applied_offset + 1,
        scram=dict(state.scram),
        client_quotas={entity: dict(values) for entity, values in state.client_quotas.items()},
        broker_configs={level: dict(values) for level, values in state.broker_configs.items()},
        acls=state.acls,  # shared, never mutated: unchanged ACLs keep their identity (AclAuthority's cache)
    )
