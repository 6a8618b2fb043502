"""KIP-932 share groups ("queues for Kafka"): many consumers share a partition, each record is
delivered to one of them at a time and acknowledged one by one.

Pure modules: ``partition`` (a share-partition's in-flight records: acquisition locks, delivery
counts, acknowledgements, the SPSO/SPEO window), ``group`` (membership and assignment),
``records`` (Kafka's ShareSnapshot/ShareUpdate records of ``__share_group_state``),
``group_records`` (Kafka's share-group records of ``__consumer_offsets``), ``config``
(``group.share.*``, ``share.coordinator.*``). The share coordinator (``coordinator``) keeps the
share-partition state of the ``__share_group_state`` partitions this broker leads; the
``persister`` reaches the share coordinator of any share-partition (locally or with KIP-932's
persister RPCs). The driver, ``manager.ShareGroups``, does the rest of the I/O; ``attach``
builds them for a running broker next to the group coordinator (whose timer heap, task and
``__consumer_offsets`` partitions it shares).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.coordinator.share_group.config import ShareGroupConfig, ShareGroupConfigError
from broker.coordinator.share_group.coordinator import ShareCoordinator
from broker.coordinator.share_group.manager import ShareGroups
from broker.coordinator.share_group.persister import Persister
from broker.coordinator.share_group.records import SHARE_STATE_TOPIC
from broker.coordinator.state_log import StateTopicLog
from broker.coordinator.txn.sender import BrokerSender
from broker.metadata.image import MetadataImage
from broker.network.dial import Dialer
from broker.replication.replica_manager import ReplicaManager

__all__ = [
    "SHARE_STATE_TOPIC", "ShareCoordinator", "ShareGroupConfig", "ShareGroupConfigError", "ShareGroups", "attach",
]  # fmt: skip


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
    *,
    current_image: Callable[[], MetadataImage] | None = None,
    dialer: Dialer | None = None,
) -> tuple[ShareGroups, Callable[[MetadataImage, MetadataImage], None]]:
    """Share groups and the share coordinator for a running broker, and the metadata listener
    that keeps them in step (topics, leadership of share-partitions and of
    ``__share_group_state``). ``current_image`` gives the latest metadata (where the share
    coordinators are); ``dialer`` reaches other brokers' inter-broker listener."""
    config = ShareGroupConfig.from_properties(config_get)
    share = ShareGroups(config, groups.manager, replicas, clock_ms)
    if groups.consumer is not None:
        share.consumer_groups = groups.consumer.groups
    share.topics = _topics(image)
    latest = [image]

    def led(sp: int) -> bool:
        topic = latest[0].topics.get(SHARE_STATE_TOPIC)
        part = topic.partitions.get(sp) if topic is not None else None
        hosted = replicas.get_partition(SHARE_STATE_TOPIC, sp)
        return part is not None and part.leader == node_id and hosted is not None and hosted.is_leader

    async def wait_committed(sp: int, offset: int, timeout_ms: int) -> int:
        return await replicas.wait_for_acks(SHARE_STATE_TOPIC, sp, offset, timeout_ms)

    coordinator = ShareCoordinator(
        StateTopicLog(replicas, SHARE_STATE_TOPIC), wait_committed, led, clock_ms,
        updates_per_snapshot=config.snapshot_update_records_per_snapshot, write_timeout_ms=config.write_timeout_ms,
    )  # fmt: skip
    state = image.topics.get(SHARE_STATE_TOPIC)
    coordinator.num_partitions = len(state.partitions) if state is not None else 0
    share.coordinator = coordinator
    share.persister = Persister(
        node_id, current_image or (lambda: latest[0]), coordinator, BrokerSender("pylog-share-persister", dialer)
    )
    before = groups.manager.on_records_loaded

    def on_records_loaded(partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        before(partition, records)  # KIP-848 consumer groups
        share.load_groups(partition, records)

    groups.manager.on_records_loaded = on_records_loaded

    def on_change(old: MetadataImage, new: MetadataImage) -> None:
        latest[0] = new
        share.topics = _topics(new)
        state = new.topics.get(SHARE_STATE_TOPIC)
        coordinator.num_partitions = len(state.partitions) if state is not None else 0
        was, now = _led_state_partitions(old, node_id), _led_state_partitions(new, node_id)
        if was != now:
            coordinator.forget({p for p, _ in was ^ now})

        def led_here(topic: str, partition: int) -> bool:
            t = new.topics.get(topic)
            part = t.partitions.get(partition) if t is not None else None
            return part is not None and part.leader == node_id

        share.drop_partitions(led_here)
        share.drop_unowned()

    return share, on_change
