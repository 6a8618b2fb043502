"""Where group state is persisted: the partitions of ``__consumer_offsets``.

``OffsetsLog`` is what the coordinator needs of the topic (``broker.coordinator.state_log``: the
same adapter serves both coordinators). ``PartitionLoad``
replays one partition into groups and offsets (Kafka documentation §5.5 "Distribution": "when the broker becomes the
coordinator … it reads the offsets topic partition into the cache"), in bounded steps so the
coordinator's task can serve timers in between; the last record of a key wins and a null value
(tombstone) removes it, which is what compaction will keep. Transactional offset commits
(TxnOffsetCommit) are batches of the producer: replayed as pending until that producer's COMMIT
marker (then committed, unless a later plain commit of the partition exists) or ABORT marker
(dropped); those still open at the end stay pending (``txn_offsets``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.coordinator.group.records import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    StoredGroup,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from broker.coordinator.group.txn_offsets import StagedOffset
from broker.coordinator.state_log import StateLog, StoreError
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.control import ControlType, decode_control_key
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError

log = logging.getLogger(__name__)

LOAD_STEP_BYTES = 1 << 20
OffsetsLog = StateLog  # what the group coordinator needs of __consumer_offsets

__all__ = ["LoadedPartition", "OffsetsLog", "PartitionLoad", "StoreError", "encode_records", "encode_txn_records"]


def encode_records(entries: Sequence[tuple[bytes, bytes | None]], now_ms: int) -> bytes:
    """One uncompressed batch of ``(key, value)`` records (value None: a tombstone)."""
    return encode_batch([ProducerRecord(key, value, now_ms) for key, value in entries])


def encode_txn_records(
    entries: Sequence[tuple[bytes, bytes | None]], now_ms: int, producer_id: int, producer_epoch: int
) -> bytes:
    """One transactional batch of the producer (a TxnOffsetCommit; sequence 0, as Kafka writes it)."""
    return encode_batch(
        [ProducerRecord(key, value, now_ms) for key, value in entries],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        transactional=True,
    )


@dataclass
class LoadedPartition:
    """The state one partition replays to: last group record and last offsets per group."""

    groups: dict[str, StoredGroup | None] = field(default_factory=dict)  # None: removed
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    positions: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)  # log offset of each
    # producer id -> group -> partition -> staged offset: transactional commits without a marker yet
    pending: dict[int, dict[str, dict[tuple[str, int], StagedOffset]]] = field(default_factory=dict)
    # records of other types (KIP-848 consumer groups: broker.coordinator.consumer_group.records), in log order
    other: list[tuple[bytes, bytes | None]] = field(default_factory=list)


class PartitionLoad:
    """Replays ``partition`` from its log start to its log end offset.

    The end is read again at every step (as Kafka's loader re-reads ``logEndOffset`` each round):
    while the partition loads, COMMIT/ABORT markers of transactions can still land on it (the
    transaction coordinator writes them as soon as its own partition is loaded) and must be
    replayed, since no cached group exists yet for ``GroupManager.complete_txn`` to update. The
    load finishes in the same step that reads up to the end, so nothing lands in between."""

    def __init__(self, store: OffsetsLog, partition: int) -> None:
        self.partition = partition
        self._store = store
        self._next = store.log_start_offset(partition)
        self.result = LoadedPartition()
        self.skipped = 0
        self._exhausted = False  # a read returned nothing below the log end: stop there

    @property
    def done(self) -> bool:
        return self._exhausted or self._next >= self._store.log_end_offset(self.partition)

    def step(self, max_bytes: int = LOAD_STEP_BYTES) -> bool:
        """Replay up to ``max_bytes`` more; True once the whole partition is replayed."""
        if self.done:
            return True
        data, next_offset = self._store.read(self.partition, self._next, max_bytes)
        if not data or next_offset <= self._next:
            self._exhausted = True  # nothing more is readable
            return True
        try:
            batches = decode_batches(data)
        except RecordError as exc:
            log.warning("%s-%s: unreadable batch at offset %s: %s", OFFSETS_TOPIC, self.partition, self._next, exc)
            self._next = next_offset
            return self.done
        for header, records in batches:
            if header.is_control:
                if records and records[0].offset >= self._next:
                    self._marker(header.producer_id, records[0].key)
                continue
            txn_producer = header.producer_id if header.is_transactional else None
            for record in records:
                if record.offset < self._next or record.key is None:
                    continue
                self._apply(record.key, record.value, header.base_offset, txn_producer)
        self._next = next_offset
        return self.done

    def _marker(self, producer_id: int, key: bytes | None) -> None:
        try:
            kind = decode_control_key(key)
        except RecordError:
            return
        staged = self.result.pending.pop(producer_id, {})
        if kind != ControlType.COMMIT:
            return
        for group, entries in staged.items():
            offsets = self.result.offsets.setdefault(group, {})
            positions = self.result.positions.setdefault(group, {})
            for tp, entry in entries.items():
                later = positions.get(tp)
                if tp in offsets and later is not None and entry.position is not None and later > entry.position:
                    continue
                offsets[tp] = entry.value
                if entry.position is not None:
                    positions[tp] = entry.position

    def _apply(self, key_bytes: bytes, value: bytes | None, position: int, txn_producer: int | None) -> None:
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if txn_producer is not None:
                    staged = self.result.pending.setdefault(txn_producer, {}).setdefault(key.group, {})
                    if value is None:
                        staged.pop(tp, None)
                    else:
                        staged[tp] = StagedOffset(decode_offset_value(value), position)
                    return
                offsets = self.result.offsets.setdefault(key.group, {})
                positions = self.result.positions.setdefault(key.group, {})
                if value is None:
                    offsets.pop(tp, None)
                    positions.pop(tp, None)
                else:
                    offsets[tp] = decode_offset_value(value)
                    positions[tp] = position
            elif isinstance(key, GroupKey):
                self.result.groups[key.group] = None if value is None else decode_group_value(value)
            else:
                self.skipped += 1
                if txn_producer is None:
                    self.result.other.append((bytes(key_bytes), None if value is None else bytes(value)))
        except DecodeError as exc:
            self.skipped += 1
            log.warning("%s-%s: skipping an unreadable record: %s", OFFSETS_TOPIC, self.partition, exc)
