"""KIP-932 share groups ("queues for Kafka"): many consumers share a partition, each record is
delivered to one of them at a time and acknowledged one by one.

Pure modules: ``partition`` (a share-partition's in-flight records: acquisition locks, delivery
counts, acknowledgements, the SPSO/SPEO window), ``group`` (membership and assignment),
``records`` (Kafka's ShareSnapshot/ShareUpdate records of ``__share_group_state``), ``config``
(``group.share.*``). The driver, ``manager.ShareGroups``, does the I/O; ``attach`` builds it for
a running broker next to the group coordinator (whose timer heap and task it shares).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.controller.image import MetadataImage
from broker.coordinator.share_group.config import ShareGroupConfig, ShareGroupConfigError
from broker.coordinator.share_group.manager import ShareGroups
from broker.coordinator.share_group.records import SHARE_STATE_TOPIC
from broker.replication.replica_manager import ReplicaManager

__all__ = ["SHARE_STATE_TOPIC", "ShareGroupConfig", "ShareGroupConfigError", "ShareGroups", "attach"]


def _topics(image: MetadataImage) -> dict[str, tuple[object, int]]:
    return {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items()}


def _led_state_partitions(image: MetadataImage, node_id: int) -> frozenset[tuple[int, int]]:
    topic = image.topics.get(SHARE_STATE_TOPIC)
    if topic is None:
        return frozenset()
    return frozenset((p, part.leader_epoch) for p, part in topic.partitions.items() if part.leader == node_id)


def attach(  # noqa: PLR0917
    config_get: Callable[[str, object], object],
    node_id: int,
    replicas: ReplicaManager,
    image: MetadataImage,
    clock_ms: Callable[[], int],
    groups: Any,  # broker.coordinator.group.GroupCoordinator
) -> tuple[ShareGroups, Callable[[MetadataImage, MetadataImage], None]]:
    """Share groups for a running broker, and the metadata listener that keeps them in step
    (topics, leadership of share-partitions and of ``__share_group_state``)."""
    share = ShareGroups(ShareGroupConfig.from_properties(config_get), groups.manager, replicas, clock_ms)
    if groups.consumer is not None:
        share.consumer_groups = groups.consumer.groups
    share.topics = _topics(image)
    state = image.topics.get(SHARE_STATE_TOPIC)
    share.state_partitions = len(state.partitions) if state is not None else 0

    def on_change(old: MetadataImage, new: MetadataImage) -> None:
        share.topics = _topics(new)
        state = new.topics.get(SHARE_STATE_TOPIC)
        share.state_partitions = len(state.partitions) if state is not None else 0
        if _led_state_partitions(old, node_id) != _led_state_partitions(new, node_id):
            share.forget_state_cache()

        def led(topic: str, partition: int) -> bool:
            t = new.topics.get(topic)
            part = t.partitions.get(partition) if t is not None else None
            return part is not None and part.leader == node_id

        share.drop_partitions(led)
        share.drop_unowned()

    return share, on_change
