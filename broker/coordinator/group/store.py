"""Where group state is persisted: the partitions of ``__consumer_offsets``.

``OffsetsLog`` is what the coordinator needs of the topic (append record batches to a partition,
read them back); ``LogOffsetsLog`` serves it from this broker's partition logs. ``PartitionLoad``
replays one partition into groups and offsets (seed 002 §5.5: "when the broker becomes the
coordinator … it reads the offsets topic partition into the cache"), in bounded steps so the
coordinator's task can serve timers in between; the last record of a key wins and a null value
(tombstone) removes it, which is what compaction will keep.

Append errors become the codes Kafka's coordinator answers with (``GroupMetadataManager``):
a missing partition → COORDINATOR_NOT_AVAILABLE, a partition led elsewhere or a failing disk →
NOT_COORDINATOR, a too large batch → INVALID_COMMIT_OFFSET_SIZE (offset commits) or
UNKNOWN_SERVER_ERROR (group metadata).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

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
from broker.log.errors import KafkaStorageError, LogError, MessageTooLargeError, RecordListTooLargeError
from broker.log.validate import AppendOrigin
from broker.replication.replica_manager import (
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    PartitionError,
    ReplicaManager,
)
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

LOAD_STEP_BYTES = 1 << 20


class StoreError(Exception):
    """An append to ``__consumer_offsets`` failed; ``code`` is what the coordinator answers."""

    def __init__(self, code: int, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.too_large = too_large


class OffsetsLog(Protocol):
    def append(self, partition: int, records: bytes) -> None:
        """Append whole batches to ``partition``; raises StoreError."""

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """Whole batches from ``offset``: ``(bytes, next offset)``; empty at the end."""

    def log_start_offset(self, partition: int) -> int: ...

    def log_end_offset(self, partition: int) -> int: ...


class LogOffsetsLog:
    """``OffsetsLog`` over this broker's logs of ``__consumer_offsets`` (the partitions it leads)."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def append(self, partition: int, records: bytes) -> None:
        try:
            target = self._replicas.leader_log(OFFSETS_TOPIC, partition)
            target.append(records, origin=AppendOrigin.COORDINATOR)
        except PartitionError as exc:
            code = (
                ErrorCode.NOT_COORDINATOR if exc.code == NOT_LEADER_OR_FOLLOWER else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
            if exc.code == UNKNOWN_TOPIC_OR_PARTITION:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise StoreError(code, str(exc)) from exc
        except (MessageTooLargeError, RecordListTooLargeError) as exc:
            raise StoreError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc), too_large=True) from exc
        except KafkaStorageError as exc:
            raise StoreError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        except LogError as exc:
            raise StoreError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        target = self._replicas.leader_log(OFFSETS_TOPIC, partition)
        with target.read(offset, max_bytes) as chunk:
            return chunk.read_bytes(), chunk.next_offset

    def log_start_offset(self, partition: int) -> int:
        return self._replicas.leader_log(OFFSETS_TOPIC, partition).log_start_offset

    def log_end_offset(self, partition: int) -> int:
        return self._replicas.leader_log(OFFSETS_TOPIC, partition).log_end_offset


def encode_records(entries: Sequence[tuple[bytes, bytes | None]], now_ms: int) -> bytes:
    """One uncompressed batch of ``(key, value)`` records (value None: a tombstone)."""
    return encode_batch([ProducerRecord(key, value, now_ms) for key, value in entries])


@dataclass
class LoadedPartition:
    """The state one partition replays to: last group record and last offsets per group."""

    groups: dict[str, StoredGroup | None] = field(default_factory=dict)  # None: removed
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)


class PartitionLoad:
    """Replays ``partition`` from its log start to the log end offset seen when the load began."""

    def __init__(self, store: OffsetsLog, partition: int) -> None:
        self.partition = partition
        self._store = store
        self._next = store.log_start_offset(partition)
        self._end = store.log_end_offset(partition)
        self.result = LoadedPartition()
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
            self._next = self._end  # nothing more is readable
            return True
        try:
            batches = decode_batches(data)
        except RecordError as exc:
            log.warning("%s-%s: unreadable batch at offset %s: %s", OFFSETS_TOPIC, self.partition, self._next, exc)
            self._next = next_offset
            return self.done
        for header, records in batches:
            if header.is_control:
                continue
            for record in records:
                if record.offset < self._next or record.key is None:
                    continue
                self._apply(record.key, record.value)
        self._next = next_offset
        return self.done

    def _apply(self, key_bytes: bytes, value: bytes | None) -> None:
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                offsets = self.result.offsets.setdefault(key.group, {})
                tp = (key.topic, key.partition)
                if value is None:
                    offsets.pop(tp, None)
                else:
                    offsets[tp] = decode_offset_value(value)
            elif isinstance(key, GroupKey):
                self.result.groups[key.group] = None if value is None else decode_group_value(value)
            else:
                self.skipped += 1
        except DecodeError as exc:
            self.skipped += 1
            log.warning("%s-%s: skipping an unreadable record: %s", OFFSETS_TOPIC, self.partition, exc)
