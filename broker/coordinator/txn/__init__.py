"""The transaction coordinator: producer ids, transactions and their state in
``__transaction_state`` (KIP-98; Kafka documentation §4.6 "Message Delivery Semantics", Kafka documentation
§4.6 "Message Delivery Semantics", transactions).

Modules: ``records`` (the topic's key/value codecs, the states, the coordinator's partition),
``metadata`` (one transactional id's state machine), ``producer_ids`` (cluster-unique producer
ids), ``store`` (persistence and loading), ``manager`` (the cache, partition ownership, the
background task), ``markers`` and ``sender`` (COMMIT/ABORT markers to local and remote
partitions), ``coordinator`` (the API the request handlers call). ``attach`` builds one for a
running broker, mirroring ``broker.coordinator.group``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker.coordinator.state_log import StateTopicLog
from broker.coordinator.txn.coordinator import InitProducerIdResult, TransactionCoordinator
from broker.coordinator.txn.manager import TxnConfig
from broker.coordinator.txn.markers import ControlMarkerAppender, TxnMarkerChannel
from broker.coordinator.txn.producer_ids import ProducerIdManager
from broker.coordinator.txn.records import TRANSACTION_STATE_TOPIC, TxnState, partition_for
from broker.coordinator.txn.sender import BrokerSender
from broker.metadata.image import MetadataImage
from broker.network.dial import Dialer
from broker.replication.replica_manager import ReplicaManager

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "InitProducerIdResult",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnState",
    "attach",
    "led_txn_partitions",
    "partition_for",
]


def led_txn_partitions(image: MetadataImage, node_id: int) -> tuple[int | None, dict[int, int]]:
    """``(partition count, {partition: leader epoch} led by node_id)`` of ``__transaction_state``."""
    topic = image.topics.get(TRANSACTION_STATE_TOPIC)
    if topic is None:
        return None, {}
    led = {p: part.leader_epoch for p, part in topic.partitions.items() if part.leader == node_id}
    return len(topic.partitions), led


def attach(
    config_get: Callable[[str, object], object],
    node_id: int,
    log_dir: str | Path,
    *,
    replicas: ReplicaManager,
    markers: ControlMarkerAppender,
    image: Callable[[], MetadataImage],
    clock_ms: Callable[[], int],
    dialer: Dialer | None = None,
) -> tuple[TransactionCoordinator, Callable[[MetadataImage, MetadataImage], None]]:
    """A started coordinator over this broker's ``__transaction_state`` partitions and the
    metadata listener that keeps it in step with leadership (register it after the replica
    manager's, which creates the logs). ``markers`` writes local markers (the replica manager)."""
    ids = ProducerIdManager(node_id, log_dir)
    config = TxnConfig.from_properties(config_get)
    channel = TxnMarkerChannel(
        node_id,
        image,
        markers,
        BrokerSender(dialer=dialer),
        clock_ms=clock_ms,
        retry_backoff_ms=config.marker_retry_backoff_ms,
        retry_backoff_max_ms=config.marker_retry_backoff_max_ms,
    )

    async def wait_committed(partition: int, offset: int, timeout_ms: int) -> int:
        return await replicas.wait_for_acks(TRANSACTION_STATE_TOPIC, partition, offset, timeout_ms)

    coordinator = TransactionCoordinator(
        config,
        StateTopicLog(replicas, TRANSACTION_STATE_TOPIC),
        clock_ms,
        ids.generate,
        channel,
        wait_committed=wait_committed,
    )
    coordinator.startup(*led_txn_partitions(image(), node_id))

    def on_change(old: MetadataImage, new: MetadataImage) -> None:
        coordinator.manager.set_partitions(*led_txn_partitions(new, node_id))

    return coordinator, on_change
