"""The pylog client: connections and metadata, Producer, Consumer, Admin (asyncio core, sync facade).

Sync (no event loop needed; each instance runs its core on a private loop thread)::

    from pyspark_log.client import Producer, Consumer, AdminClient, TopicPartition

    with Producer({"bootstrap.servers": "localhost:9092"}) as p:
        p.send("events", b"hello", key=b"k").result()

Async (on the caller's loop): ``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``.

Modules: ``config`` (Kafka key names), ``connection`` (one broker connection, version
negotiation), ``cluster`` (metadata cache, connection pool), ``partitioner``, ``accumulator``,
``bufferpool``, ``sender``, ``producer``, ``txn_manager`` (idempotence and transaction state),
``transactions`` (transactional requests, ``complete_transaction``), ``fetcher``, ``consumer``,
``offsets``, ``groups``, ``admin``,
``group/`` (consumer-group membership: ``subscribe``), ``sync``, ``sync_consumer``, ``loop_thread``,
``errors``, ``types``.

The names below are imported on first use (PEP 562), so that importing one submodule (say
``pyspark_log.client.types`` in a Spark planner process) does not import the whole client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark_log.client.admin import (
        AlterConfigOp,
        AlterOp,
        AsyncAdmin,
        ClusterDescription,
        ConfigEntry,
        ConfigResource,
        ElectionType,
        NewTopic,
        ResourceType,
    )
    from pyspark_log.client.cluster import (
        BrokerNode,
        ClusterMetadata,
        PartitionMetadata,
        TopicMetadata,
    )
    from pyspark_log.client.consumer import (
        AsyncConsumer,
        RawFetch,
    )
    from pyspark_log.client.errors import (
        BrokerConnectionError,
        BufferExhaustedError,
        ClientClosedError,
        CommitFailedError,
        ConfigError,
        ErrorCode,
        IllegalTransactionStateError,
        KafkaError,
        KafkaTimeoutError,
        OffsetOutOfRangeError,
        ProducerFencedError,
        ProtocolError,
        RecordTooLargeError,
        TopicAlreadyExistsError,
        TransactionAbortableError,
        UnknownTopicOrPartitionError,
        UnsupportedFeatureError,
    )
    from pyspark_log.client.futures import DeliveryFuture
    from pyspark_log.client.group.subscription import ConsumerRebalanceListener
    from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
    from pyspark_log.client.partitioner import (
        murmur2,
        partition_for_key,
        to_positive,
    )
    from pyspark_log.client.producer import AsyncProducer
    from pyspark_log.client.quotas import (
        ClientQuotaAlteration,
        ClientQuotaFilterComponent,
    )
    from pyspark_log.client.sync import (
        AdminClient,
        Consumer,
        Producer,
    )
    from pyspark_log.client.transactions import (
        TransactionHandle,
        complete_transaction,
    )
    from pyspark_log.client.types import (
        AbortedTransaction,
        ConsumerRecord,
        IsolationLevel,
        OffsetAndTimestamp,
        OffsetSpec,
        RecordMetadata,
        TimestampType,
        TopicPartition,
    )

#: public name -> the submodule that defines it
_EXPORTS: dict[str, str] = {
    "AlterConfigOp": "pyspark_log.client.admin",
    "AlterOp": "pyspark_log.client.admin",
    "AsyncAdmin": "pyspark_log.client.admin",
    "ClusterDescription": "pyspark_log.client.admin",
    "ConfigEntry": "pyspark_log.client.admin",
    "ConfigResource": "pyspark_log.client.admin",
    "ElectionType": "pyspark_log.client.admin",
    "NewTopic": "pyspark_log.client.admin",
    "ResourceType": "pyspark_log.client.admin",
    "BrokerNode": "pyspark_log.client.cluster",
    "ClusterMetadata": "pyspark_log.client.cluster",
    "PartitionMetadata": "pyspark_log.client.cluster",
    "TopicMetadata": "pyspark_log.client.cluster",
    "AsyncConsumer": "pyspark_log.client.consumer",
    "RawFetch": "pyspark_log.client.consumer",
    "BrokerConnectionError": "pyspark_log.client.errors",
    "BufferExhaustedError": "pyspark_log.client.errors",
    "ClientClosedError": "pyspark_log.client.errors",
    "CommitFailedError": "pyspark_log.client.errors",
    "ConfigError": "pyspark_log.client.errors",
    "ErrorCode": "pyspark_log.client.errors",
    "IllegalTransactionStateError": "pyspark_log.client.errors",
    "KafkaError": "pyspark_log.client.errors",
    "KafkaTimeoutError": "pyspark_log.client.errors",
    "OffsetOutOfRangeError": "pyspark_log.client.errors",
    "ProducerFencedError": "pyspark_log.client.errors",
    "ProtocolError": "pyspark_log.client.errors",
    "RecordTooLargeError": "pyspark_log.client.errors",
    "TopicAlreadyExistsError": "pyspark_log.client.errors",
    "TransactionAbortableError": "pyspark_log.client.errors",
    "UnknownTopicOrPartitionError": "pyspark_log.client.errors",
    "UnsupportedFeatureError": "pyspark_log.client.errors",
    "DeliveryFuture": "pyspark_log.client.futures",
    "ConsumerRebalanceListener": "pyspark_log.client.group.subscription",
    "ConsumerGroupMetadata": "pyspark_log.client.groups",
    "OffsetAndMetadata": "pyspark_log.client.groups",
    "murmur2": "pyspark_log.client.partitioner",
    "partition_for_key": "pyspark_log.client.partitioner",
    "to_positive": "pyspark_log.client.partitioner",
    "AsyncProducer": "pyspark_log.client.producer",
    "ClientQuotaAlteration": "pyspark_log.client.quotas",
    "ClientQuotaFilterComponent": "pyspark_log.client.quotas",
    "AdminClient": "pyspark_log.client.sync",
    "Consumer": "pyspark_log.client.sync",
    "Producer": "pyspark_log.client.sync",
    "TransactionHandle": "pyspark_log.client.transactions",
    "complete_transaction": "pyspark_log.client.transactions",
    "AbortedTransaction": "pyspark_log.client.types",
    "ConsumerRecord": "pyspark_log.client.types",
    "IsolationLevel": "pyspark_log.client.types",
    "OffsetAndTimestamp": "pyspark_log.client.types",
    "OffsetSpec": "pyspark_log.client.types",
    "RecordMetadata": "pyspark_log.client.types",
    "TimestampType": "pyspark_log.client.types",
    "TopicPartition": "pyspark_log.client.types",
}

__all__ = [
    "AbortedTransaction",
    "AdminClient",
    "AlterConfigOp",
    "AlterOp",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "BrokerConnectionError",
    "BrokerNode",
    "BufferExhaustedError",
    "ClientClosedError",
    "ClientQuotaAlteration",
    "ClientQuotaFilterComponent",
    "ClusterDescription",
    "ClusterMetadata",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "DeliveryFuture",
    "ElectionType",
    "ErrorCode",
    "IllegalTransactionStateError",
    "IsolationLevel",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "OffsetSpec",
    "PartitionMetadata",
    "Producer",
    "ProducerFencedError",
    "ProtocolError",
    "RawFetch",
    "RecordMetadata",
    "RecordTooLargeError",
    "ResourceType",
    "TimestampType",
    "TopicAlreadyExistsError",
    "TopicMetadata",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionHandle",
    "UnknownTopicOrPartitionError",
    "UnsupportedFeatureError",
    "complete_transaction",
    "murmur2",
    "partition_for_key",
    "to_positive",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
