"""Where transaction state is persisted: the partitions of ``__transaction_state``.

``TxnLog`` is what the coordinator needs of the topic (``broker.coordinator.state_log``, shared
with the group coordinator). ``PartitionLoad`` replays one partition
into the last state per transactional id (a null value removes the id), in bounded steps so the
coordinator's task serves timers in between; the same design as the group coordinator's
``__consumer_offsets`` store (``broker.coordinator.group.store``).
"""

from __future__ import annotations

import logging

from broker.coordinator.state_log import StateLog, StoreError
from broker.coordinator.txn.records import (
    TRANSACTION_STATE_TOPIC,
    StoredTxn,
    decode_txn_key,
    decode_txn_value,
)
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError

log = logging.getLogger(__name__)

LOAD_STEP_BYTES = 1 << 20

__all__ = ["PartitionLoad", "StoreError", "TxnLog", "encode_record", "encode_records"]


TxnLog = StateLog  # what the transaction coordinator needs of __transaction_state


def encode_record(key: bytes, value: bytes | None, now_ms: int) -> bytes:
    """One uncompressed batch with one record (Kafka writes the transaction log uncompressed)."""
    return encode_batch([ProducerRecord(key, value, now_ms)])


def encode_records(entries: list[tuple[bytes, bytes | None]], now_ms: int) -> bytes:
    """One uncompressed batch of ``(key, value)`` records (expiry writes its tombstones together)."""
    return encode_batch([ProducerRecord(key, value, now_ms) for key, value in entries])


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
