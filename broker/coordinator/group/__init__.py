"""The group coordinator: consumer groups (classic protocol, KIP-345 static members) and committed
offsets in ``__consumer_offsets`` (Kafka documentation §4.5 "The Consumer", Kafka documentation §5.5 "Distribution").

Modules: ``records`` (the offsets topic's key/value codecs and the coordinator's partition),
``group`` (one group's state machine), ``timers``, ``store`` (persistence and loading),
``manager`` (the cache, partition ownership, offset expiry and the background task),
``rebalance`` (JoinGroup/SyncGroup and the rebalance timers), ``coordinator`` (the API the
request handlers call). ``attach`` builds one for a running broker.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from broker.coordinator.group.coordinator import GroupCoordinator, GroupSummary, JoinRequest, MemberSummary
from broker.coordinator.group.group import GroupState, JoinResult, SyncResult
from broker.coordinator.group.manager import GroupConfig
from broker.coordinator.group.records import OFFSETS_TOPIC, CommittedOffset, partition_for
from broker.coordinator.group.store import OffsetsLog
from broker.coordinator.state_log import StateTopicLog
from broker.metadata.image import MetadataImage
from broker.replication.replica_manager import ReplicaManager

__all__ = [
    "OFFSETS_TOPIC",
    "CommittedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "GroupSummary",
    "JoinRequest",
    "JoinResult",
    "MemberSummary",
    "OffsetsLog",
    "SyncResult",
    "attach",
    "led_offsets_partitions",
    "partition_for",
]


def led_offsets_partitions(image: MetadataImage, node_id: int) -> tuple[int | None, set[int]]:
    """``(partition count, partitions led by node_id)`` of ``__consumer_offsets`` (None: no topic)."""
    topic = image.topics.get(OFFSETS_TOPIC)
    if topic is None:
        return None, set()
    return len(topic.partitions), {p for p, part in topic.partitions.items() if part.leader == node_id}


def attach(
    config_get: Callable[[str, object], object],
    node_id: int,
    replicas: ReplicaManager,
    image: MetadataImage,
    clock_ms: Callable[[], int],
    *,
    rng: random.Random | None = None,
) -> tuple[GroupCoordinator, Callable[[MetadataImage, MetadataImage], None]]:
    """A started coordinator over this broker's offsets partitions, and the metadata listener
    that keeps it in step with leadership and topic deletions (register it after the replica
    manager's, which creates the logs). It listens to the replica manager's transaction markers."""
    coordinator = GroupCoordinator(
        GroupConfig.from_properties(config_get),
        StateTopicLog(replicas, OFFSETS_TOPIC),
        clock_ms,
        node_id=node_id,
        rng=rng,
    )
    from broker.coordinator.consumer_group.config import ConsumerGroupConfig
    from broker.coordinator.consumer_group.coordinator import ConsumerGroups, topics_of

    coordinator.consumer = ConsumerGroups(
        ConsumerGroupConfig.from_properties(config_get), coordinator.manager, clock_ms, rng=rng
    )
    coordinator.consumer.topics = topics_of(image)
    coordinator.startup(*led_offsets_partitions(image, node_id))
    replicas.add_marker_listener(coordinator.on_marker)  # transactional offset commits

    def on_change(old: MetadataImage, new: MetadataImage) -> None:
        gone = {
            name
            for name, topic in old.topics.items()
            if name not in new.topics or new.topics[name].topic_id != topic.topic_id
        }
        gone.discard(OFFSETS_TOPIC)
        if coordinator.consumer is not None:
            coordinator.consumer.topics = topics_of(new)  # before loading: records name topics by id
        coordinator.manager.set_partitions(*led_offsets_partitions(new, node_id))
        if coordinator.consumer is not None:
            coordinator.consumer.drop_unowned()
        if gone:
            coordinator.manager.remove_offsets_of_topics(gone)

    return coordinator, on_change
