"""Kafka's state-change log (``state.change.logger``): one INFO line per leadership/ISR change.

Kafka writes to this logger (its ``state-change.log``) when the controller decides a partition's
leader and ISR and when a broker applies them. pylog does the same in two places:

* the active controller, for every ``PartitionRecord`` / ``PartitionChangeRecord`` it appends
  to the metadata log (``controller_decided``, called by ``OperationRunner.append``);
* each broker, for every partition naming it a replica whose state in the metadata image changed
  (``broker_applied``, called by ``ReplicaManager.on_image_change``).

Each line names the partition, the leader, the leader epoch, the ISR and the partition epoch (old
and new), and carries them as structured fields (``broker.logging_setup``): ``topic``,
``partition``, ``leader``, ``leader_epoch``, ``isr``, ``partition_epoch``, ``previous_leader``,
``previous_leader_epoch``, ``role`` (broker side) or ``controller`` (controller side).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence

from broker.logging_setup import STATE_CHANGE_LOGGER
from broker.metadata.image import PartitionImage, TopicImage
from broker.metadata.records import MetadataRecord, PartitionChangeRecord, PartitionRecord, TopicRecord
from broker.metadata.replay import partition_after_change

state_log = logging.getLogger(STATE_CHANGE_LOGGER)


def _fields(topic: str, new: PartitionImage, old: PartitionImage | None) -> dict[str, object]:
    return {
        "topic": topic,
        "partition": new.partition,
        "leader": new.leader,
        "leader_epoch": new.leader_epoch,
        "isr": list(new.isr),
        "partition_epoch": new.partition_epoch,
        "previous_leader": old.leader if old is not None else -1,
        "previous_leader_epoch": old.leader_epoch if old is not None else -1,
    }


def broker_applied(node_id: int, topic: str, new: PartitionImage, old: PartitionImage | None) -> None:
    """Broker ``node_id`` applied ``new`` (was ``old``; None: first seen) from the metadata image."""
    if not state_log.isEnabledFor(logging.INFO):
        return
    role = "leader" if new.leader == node_id else "follower"
    state_log.info(
        "[Broker id=%d] %s %s-%d at leader epoch %d with partition epoch %d: leader %d, ISR %s "
        "(previous leader %s, leader epoch %s)",
        node_id, role.capitalize(), topic, new.partition, new.leader_epoch, new.partition_epoch, new.leader,
        list(new.isr), old.leader if old else -1, old.leader_epoch if old else -1,
        extra={"fields": {"role": role, **_fields(topic, new, old)}},
    )  # fmt: skip


def controller_decided(
    node_id: int,
    topics: Mapping[str, TopicImage],
    topic_ids: Mapping[uuid.UUID, str],
    records: Sequence[MetadataRecord],
) -> None:
    """The active controller ``node_id`` is appending ``records``: one line per partition
    created or changed, with the epochs the change will have once applied. ``topics`` and
    ``topic_ids`` are the controller's state before the records (``ClusterState``)."""
    if not state_log.isEnabledFor(logging.INFO):
        return
    names = dict(topic_ids)
    current: dict[tuple[str, int], PartitionImage] = {}
    for record in records:
        if isinstance(record, TopicRecord):
            names[record.topic_id] = record.name
        elif isinstance(record, PartitionRecord):
            topic = names.get(record.topic_id, str(record.topic_id))
            new = PartitionImage(record.partition, record.leader, record.leader_epoch, tuple(record.replicas),
                                 tuple(record.isr), record.partition_epoch)  # fmt: skip
            current[(topic, record.partition)] = new
            state_log.info(
                "[Controller id=%d] Created partition %s-%d: leader %d at leader epoch %d, ISR %s, "
                "partition epoch %d",
                node_id, topic, record.partition, new.leader, new.leader_epoch, list(new.isr), new.partition_epoch,
                extra={"fields": {"controller": node_id, **_fields(topic, new, None)}},
            )  # fmt: skip
        elif isinstance(record, PartitionChangeRecord):
            topic = names.get(record.topic_id, str(record.topic_id))
            old = current.get((topic, record.partition)) or _partition(topics, topic, record.partition)
            if old is None:
                continue
            new = partition_after_change(old, record)
            current[(topic, record.partition)] = new
            what = "Leader and ISR change" if new.leader != old.leader else "ISR change"
            state_log.info(
                "[Controller id=%d] %s for %s-%d: leader %d -> %d, leader epoch %d -> %d, ISR %s -> %s, "
                "partition epoch %d -> %d",
                node_id, what, topic, record.partition, old.leader, new.leader, old.leader_epoch, new.leader_epoch,
                list(old.isr), list(new.isr), old.partition_epoch, new.partition_epoch,
                extra={"fields": {"controller": node_id, **_fields(topic, new, old)}},
            )  # fmt: skip


def _partition(topics: Mapping[str, TopicImage], topic: str, partition: int) -> PartitionImage | None:
    image = topics.get(topic)
    return image.partitions.get(partition) if image is not None else None
