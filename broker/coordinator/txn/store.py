"""Where transaction state is persisted: the partitions of ``__transaction_state``.

``TxnLog`` is what the coordinator needs of the topic; ``LogTxnLog`` serves it from this broker's
partition logs (appends with ``AppendOrigin.COORDINATOR``). ``PartitionLoad`` replays one partition
into the last state per transactional id (a null value removes the id), in bounded steps so the
coordinator's task serves timers in between; the same design as the group coordinator's
``__consumer_offsets`` store (``broker.coordinator.group.store``).

Append errors become what Kafka's ``TransactionStateManager`` answers: a missing partition →
COORDINATOR_NOT_AVAILABLE, a partition led elsewhere or a failing disk → NOT_COORDINATOR, anything
else → UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import logging
from typing import Protocol

from broker.coordinator.group.store import StoreError
from broker.coordinator.txn.records import (
    TRANSACTION_STATE_TOPIC,
    StoredTxn,
    decode_txn_key,
    decode_txn_value,
)
from broker.log.errors import KafkaStorageError, LogError
from broker.log.validate import AppendOrigin
from broker.replication.replica_manager import NOT_LEADER_OR_FOLLOWER, PartitionError, ReplicaManager
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

LOAD_STEP_BYTES = 1 << 20

__all__ = ["LogTxnLog", "PartitionLoad", "StoreError", "TxnLog", "encode_record"]


class TxnLog(Protocol):
    def append(self, partition: int, records: bytes) -> None:
        """Append whole batches to ``partition``; raises StoreError."""

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """Whole batches from ``offset``: ``(bytes, next offset)``; empty at the end."""

    def log_start_offset(self, partition: int) -> int: ...

    def log_end_offset(self, partition: int) -> int: ...


class LogTxnLog:
    """``TxnLog`` over this broker's logs of ``__transaction_state`` (the partitions it leads)."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def append(self, partition: int, records: bytes) -> None:
        try:
            target = self._replicas.leader_log(TRANSACTION_STATE_TOPIC, partition)
            target.append(records, origin=AppendOrigin.COORDINATOR)
        except PartitionError as exc:
            code = (
                ErrorCode.NOT_COORDINATOR if exc.code == NOT_LEADER_OR_FOLLOWER else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
            raise StoreError(code, str(exc)) from exc
        except KafkaStorageError as exc:
            raise StoreError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        except LogError as exc:
            raise StoreError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        target = self._replicas.leader_log(TRANSACTION_STATE_TOPIC, partition)
        with target.read(offset, max_bytes) as chunk:
            return chunk.read_bytes(), chunk.next_offset

    def log_start_offset(self, partition: int) -> int:
        return self._replicas.leader_log(TRANSACTION_STATE_TOPIC, partition).log_start_offset

    def log_end_offset(self, partition: int) -> int:
        return self._replicas.leader_log(TRANSACTION_STATE_TOPIC, partition).log_end_offset


def encode_record(key: bytes, value: bytes | None, now_ms: int) -> bytes:
    """One uncompressed batch with one record (Kafka writes the transaction log uncompressed)."""
    return encode_batch([ProducerRecord(key, value, now_ms)])


class PartitionLoad:
    """Replays ``partition`` from its log start to the log end offset seen when the load began."""

    def __init__(self, store: TxnLog, partition: int, coordinator_epoch: int) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self._store = store
        self._next = store.log_start_offset(partition)
        self._end = store.log_end_offset(partition)
        self.result: dict[str, StoredTxn | None] = {}  # None: removed (tombstone)
        self.skipped = 0

    @property
    def done(self) -> bool:
        return self._next >= self._end

    def step(self, max_bytes: int = LOAD_STEP_BYTES) -> bool:
        """Replay up to ``max_bytes`` more; True once the whole partition is replayed."""
        if self.done:
            return True
        data, next_offset = self._store.read(self.partition, self._next, max_bytes)
        if not data or next_offset <= self._next:
            self._next = self._end
            return True
        try:
            batches = decode_batches(data)
        except RecordError as exc:
            log.warning("%s-%s: unreadable batch at %s: %s", TRANSACTION_STATE_TOPIC, self.partition, self._next, exc)
            self._next = next_offset
            return self.done
        for header, records in batches:
            if header.is_control:
                continue
            for record in records:
                if record.offset >= self._next and record.key is not None:
                    self._apply(record.key, record.value)
        self._next = next_offset
        return self.done

    def _apply(self, key: bytes, value: bytes | None) -> None:
        try:
            transactional_id = decode_txn_key(key)
            if transactional_id is None:
                self.skipped += 1
                return
            self.result[transactional_id] = None if value is None else decode_txn_value(value)
        except DecodeError as exc:
            self.skipped += 1
            log.warning("%s-%s: skipping an unreadable record: %s", TRANSACTION_STATE_TOPIC, self.partition, exc)
