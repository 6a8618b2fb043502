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
"""

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
from pyspark_log.client.cluster import BrokerNode, ClusterMetadata, PartitionMetadata, TopicMetadata
from pyspark_log.client.consumer import AsyncConsumer, RawFetch
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
from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.partitioner import murmur2, partition_for_key, to_positive
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.quotas import ClientQuotaAlteration, ClientQuotaFilterComponent
from pyspark_log.client.sync import AdminClient, Consumer, Producer
from pyspark_log.client.transactions import TransactionHandle, complete_transaction
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
