"""``StateTopicLog``: a coordinator's state topic (``__consumer_offsets``, ``__transaction_state``)
as the partitions this broker leads, through the replica manager.

Both coordinators need the same five things of their topic: append whole batches to a partition
they lead (stamped with its leader epoch and counted in its high watermark, like any leader
append: ``ReplicaManager.append_internal``), read batches back, the log start and end offsets
for loading, and the high watermark (what the ISR has). Append errors become the codes Kafka's
coordinators answer with (``GroupMetadataManager``, ``TransactionStateManager``): a missing partition →
COORDINATOR_NOT_AVAILABLE; a partition led elsewhere or a failing disk → NOT_COORDINATOR; a too
large batch → UNKNOWN_SERVER_ERROR with ``too_large`` set (offset commits answer
INVALID_COMMIT_OFFSET_SIZE then); producer fencing errors of a transactional offset commit pass
through unchanged; anything else → UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from typing import Protocol

from broker.log.errors import KafkaStorageError, LogError, MessageTooLargeError, RecordListTooLargeError
from broker.replication.replica_manager import PartitionError, ReplicaManager
from pyspark_log.wire.errors import ErrorCode

_PASSED_THROUGH = frozenset(
    {
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.PRODUCER_FENCED,
    }
)


class StoreError(Exception):
    """An append to a state topic failed; ``code`` is what the coordinator answers."""

    def __init__(self, code: int, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.too_large = too_large


class StateLog(Protocol):
    """What a coordinator needs of its state topic (``StateTopicLog``, or a test double)."""

    def append(self, partition: int, records: bytes) -> int:
        """Append whole batches to ``partition``; their first offset. Raises StoreError."""

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """Whole batches from ``offset``: ``(bytes, next offset)``; empty at the end."""

    def log_start_offset(self, partition: int) -> int: ...

    def log_end_offset(self, partition: int) -> int: ...

    def high_watermark(self, partition: int) -> int:
        """The first offset not yet on every ISR member (the log end offset when not hosted)."""


class StateTopicLog:
    """``StateLog`` over this broker's led partitions of ``topic``."""

    def __init__(self, replicas: ReplicaManager, topic: str) -> None:
        self._replicas = replicas
        self.topic = topic

    def append(self, partition: int, records: bytes) -> int:
        try:
            return self._replicas.append_internal(self.topic, partition, records).first_offset
        except PartitionError as exc:
            code = ErrorCode.NOT_COORDINATOR
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise StoreError(code, str(exc)) from exc
        except (MessageTooLargeError, RecordListTooLargeError) as exc:
            raise StoreError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc), too_large=True) from exc
        except KafkaStorageError as exc:
            raise StoreError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        except LogError as exc:
            passed = exc.code in _PASSED_THROUGH
            raise StoreError(exc.code if passed else ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        target = self._replicas.leader_log(self.topic, partition, loading=True)
        with target.read(offset, max_bytes) as chunk:
            return chunk.read_bytes(), chunk.next_offset

    def log_start_offset(self, partition: int) -> int:
        return self._replicas.leader_log(self.topic, partition, loading=True).log_start_offset

    def log_end_offset(self, partition: int) -> int:
        return self._replicas.leader_log(self.topic, partition, loading=True).log_end_offset

    def high_watermark(self, partition: int) -> int:
        found = self._replicas.high_watermark_of(self.topic, partition)
        return found if found is not None else self.log_end_offset(partition)
