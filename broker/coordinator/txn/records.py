"""The records of ``__transaction_state`` (Kafka documentation §4.6 "Message Delivery Semantics",
transactions: the transaction coordinator
writes every transaction's state to the internal topic ``__transaction_state``, an internal Kafka topic, never
the producer itself) and the coordinator's partition.

Every record is keyed by the transactional id; the value is the whole state of its transaction
(the last record of a key wins; a null value is a tombstone written when the id expires)::

    key   TransactionLogKey   v0: transactional_id string
    value TransactionLogValue v0-v1 (v1 flexible):
          producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
          transaction_status int8 (``TxnState``), transaction_partitions [topic string,
          partition_ids []int32] (null in Empty), last_update_timestamp_ms int64,
          start_timestamp_ms int64 (-1: no transaction started)

Both start with an int16 version. We write what Kafka 3.7 writes: key v0, value v0; a value of a
newer version is read with our newest schema (KIP-915: later fields are tagged).

The coordinator of a transactional id is the leader of partition
``abs(hashCode(transactional id)) % transaction.state.log.num.partitions``, the same hash as the
group coordinator's.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from broker.coordinator.group.records import java_string_hashcode, kafka_abs
from pyspark_log.wire.dsl import parse_fields
from pyspark_log.wire.errors import DecodeError
from pyspark_log.wire.schema import Schema, Versions

TRANSACTION_STATE_TOPIC = "__transaction_state"
TopicPartition = tuple[str, int]

_INT16 = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


class TxnState(enum.IntEnum):
    """A transaction's states; the numbers are Kafka's ``TransactionState.id`` on disk."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name of the state (``DescribeTransactions``): ``PrepareCommit``, ..."""
        return "".join(part.capitalize() for part in self.name.split("_"))


TXN_LOG_KEY = Schema(
    "TransactionLogKey",
    parse_fields("transactional_id  string", None, "TransactionLogKey"),
    Versions.parse("0"),
    Versions.parse("none"),
)

TXN_LOG_VALUE = Schema(
    "TransactionLogValue",
    parse_fields(
        """
        producer_id                int64
        producer_epoch             int16
        transaction_timeout_ms     int32
        transaction_status         int8
        transaction_partitions     []     null
          topic                    string
          partition_ids            []int32
        last_update_timestamp_ms   int64
        start_timestamp_ms         int64
        """,
        None,
        "TransactionLogValue",
    ),
    Versions.parse("0-1"),
    Versions.parse("1+"),
)


def partition_for(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition whose leader coordinates ``transactional_id``."""
    return kafka_abs(java_string_hashcode(transactional_id)) % partitions


@dataclass(frozen=True, slots=True)
class StoredTxn:
    """One transaction state value: what survives a coordinator restart."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int


def txn_key(transactional_id: str) -> bytes:
    body = TXN_LOG_KEY.encode({"transactional_id": transactional_id}, KEY_VERSION)
    return _INT16.pack(KEY_VERSION) + body


def txn_value(txn: StoredTxn) -> bytes:
    """The value record; Empty carries no partitions (null), as Kafka writes it."""
    if txn.state is TxnState.EMPTY and txn.partitions:
        raise ValueError("an Empty transaction has no partitions")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    body = {
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "transaction_timeout_ms": txn.timeout_ms,
        "transaction_status": int(txn.state),
        "transaction_partitions": None
        if txn.state is TxnState.EMPTY
        else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "last_update_timestamp_ms": txn.last_update_ms,
        "start_timestamp_ms": txn.start_ms,
    }
    return _INT16.pack(VALUE_VERSION) + TXN_LOG_VALUE.encode(body, VALUE_VERSION)


def _split(buf: bytes, what: str) -> tuple[int, bytes]:
    if len(buf) < 2:
        raise DecodeError(f"{what}: {len(buf)} bytes is too short for a version")
    return _INT16.unpack_from(buf)[0], buf[2:]


def decode_txn_key(buf: bytes) -> str | None:
    """The transactional id of a key; None for a key version we do not know (skipped, as Kafka does)."""
    version, body = _split(buf, "transaction log key")
    if version != KEY_VERSION:
        return None
    return str(TXN_LOG_KEY.decode(body, version).transactional_id)


def decode_txn_value(buf: bytes) -> StoredTxn:
    version, body = _split(buf, "transaction log value")
    if version < 0:
        raise DecodeError(f"transaction log value version {version}")
    v = TXN_LOG_VALUE.decode(body, min(version, TXN_LOG_VALUE.valid.hi))
    try:
        state = TxnState(v.transaction_status)
    except ValueError as exc:
        raise DecodeError(f"unknown transaction status {v.transaction_status}") from exc
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TxnState.EMPTY and v.transaction_partitions is not None:
        partitions = frozenset((t.topic, p) for t in v.transaction_partitions for p in t.partition_ids)
    return StoredTxn(
        v.producer_id,
        v.producer_epoch,
        v.transaction_timeout_ms,
        state,
        partitions,
        v.last_update_timestamp_ms,
        v.start_timestamp_ms,
    )
