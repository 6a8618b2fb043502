"""``Partition``: one hosted replica of a topic-partition — its role, ISR, high watermark, leader
epochs, and the produces waiting for the ISR.

Kafka documentation §4.7 "Replication": "each partition has a single leader and zero or more
followers"; "all writes go to the leader of the partition". A ``Partition`` is the leader or a
follower as the metadata image says (``become_leader`` / ``become_follower``, driven by
``ReplicaManager.on_image_change``):

* as **leader** it stamps its leader epoch on every batch it appends (``append_as_leader``), keeps
  the followers' progress from their fetches (``record_follower_fetch``), moves the high watermark
  (``broker.replication.isr``; Kafka's ``Partition.maybeIncrementLeaderHW``) and reports every
  move to its ``listener`` (Kafka's ``Partition.tryCompleteDelayedRequests``): the replica
  manager then re-checks the delayed produces, fetches and DeleteRecords watching this partition
  in its purgatories (``broker.replication.purgatory``);
* as **follower** it appends the leader's batches unchanged (``append_as_follower``: same offsets,
  same ``partitionLeaderEpoch``), learns the high watermark and log start offset from the leader,
  and truncates where its log diverges (``truncate_to``).

The ISR it uses is the metadata's (``isr``) plus, while an AlterPartition it sent is in flight,
the ISR it asked for (``pending_isr``): the high watermark is computed over the union (the
"maximal ISR"), min.insync.replicas over the committed ISR. Changes of ISR reach this object only
through the metadata log (``update_from_image``), never by a side channel.

Every change of the high watermark, the log end or start offset, the role or the ISR calls
``listener`` once the state is consistent (Kafka documentation §4.7 "Replication"). This class
holds no waiters and no futures.

Threading: used from the broker's event loop only. Raises ``PartitionError`` with Kafka codes.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable

from broker.log.errors import LogError
from broker.log.log import Log, LogAppendInfo
from broker.log.scan import iter_headers
from broker.log.validate import AppendOrigin
from broker.metadata.image import PartitionImage
from broker.replication.delete_records import low_watermark
from broker.replication.isr import UNKNOWN_OFFSET
from broker.replication.leader_epoch import LeaderEpochCache, LeaderEpochFile
from broker.replication.replica_state import ReplicaState, ReplicaStateFields
from pyspark_log.records.header import PARTITION_LEADER_EPOCH_POS
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

_EPOCH = struct.Struct(">i")


class PartitionError(Exception):
    """A request for a partition this broker cannot serve; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Partition(ReplicaStateFields):
    """A replica of ``topic``-``partition`` on broker ``node_id`` (see the module docstring): the
    log I/O around the pure ``ReplicaState`` (``state``), whose fields it shows read-only."""

    def __init__(self, node_id: int, topic: str, partition: int, target: Log, high_watermark_hint: int = 0) -> None:
        self.node_id = node_id
        self.topic = topic
        self.partition = partition
        self.log = target
        # AlterReplicaLogDirs: the copy of ``log`` being filled in another log dir (Kafka's
        # ``Partition.futureLog``); truncations cut it too, ``log_generation`` counts them so
        # that a copy read before a truncation is not appended after it
        self.future_log: Log | None = None
        self.log_generation = 0
        self.state = ReplicaState(
            node_id,
            _load_epochs(target),
            max(min(high_watermark_hint, target.log_end_offset), target.log_start_offset),
        )
        # called after every move of the HW, log end/start offset, role or ISR (the replica manager
        # re-checks its purgatories; Kafka's Partition.tryCompleteDelayedRequests)
        self.listener: Callable[[], None] | None = None
        # set when this broker stops hosting the partition (deleted topic, reassignment, shutdown): the
        # error its delayed operations answer
        self.stopped_code: int = ErrorCode.NONE

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, role={self.role}, hw={self.high_watermark})"

    # -- role ----------------------------------------------------------------------------------
    def become_leader(self, image: PartitionImage, now_ms: int, *, record_epoch: bool = True) -> bool:
        """Lead at ``image.leader_epoch`` (``ReplicaState.become_leader``); False when already
        leading at that epoch."""
        started = self.state.become_leader(image, now_ms, self.log.log_end_offset, record_epoch=record_epoch)
        self._changed()
        if started:
            log.info("%s-%s: leader at epoch %d from offset %d, ISR %s", self.topic, self.partition,
                     image.leader_epoch, self.log.log_end_offset, list(image.isr))  # fmt: skip
        return started

    def record_leader_epoch(self) -> None:
        """Record the epoch of a leadership taken before the broker served (``ReplicaState.record_epoch``)."""
        self.state.record_epoch(self.log.log_end_offset)
        self._changed()

    def become_follower(self, image: PartitionImage) -> bool:
        """Follow ``image.leader`` (-1: no leader for now). Produces waiting here fail with
        NOT_LEADER_OR_FOLLOWER (their ``DelayedProduce`` sees the role on its next check).
        Returns False when nothing about the leadership changed."""
        changed = self.state.become_follower(image)
        self._changed()
        if changed:
            log.info("%s-%s: follower of %d at epoch %d", self.topic, self.partition, image.leader, image.leader_epoch)
        return changed

    def update_from_image(self, image: PartitionImage) -> None:
        """Same leader and epoch: the ISR and partition epoch the metadata now shows."""
        self.state.update_from_image(image, self.log.log_end_offset)
        self._changed()  # the ISR may have shrunk, a replica's broker may have died meanwhile

    # -- appends -------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | memoryview, origin: AppendOrigin) -> LogAppendInfo:
        """Validate, stamp this leader's epoch, append; the high watermark moves at once when the
        leader is the whole ISR."""
        self._check_leader()
        info = self.log.append(records, origin=origin, leader_epoch=self.state.leader_epoch)
        if info.batches:
            self.state.on_leader_append(self.log.log_end_offset)
            self._changed()
        return info

    def append_control_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *, commit: bool
    ) -> int:
        self._check_leader()
        offset = self.log.append_control_marker(
            producer_id, producer_epoch, coordinator_epoch, commit=commit, leader_epoch=self.leader_epoch
        )
        self.state.on_leader_append(self.log.log_end_offset)
        self._changed()
        return offset

    def append_as_follower(self, data: bytes | memoryview) -> LogAppendInfo:
        """Append the leader's batches as they are and learn their leader epochs."""
        info = self.log.append_as_follower(data)
        if info.batches:
            view = memoryview(data)
            self.state.on_follower_append(
                (_EPOCH.unpack_from(view, batch.position + PARTITION_LEADER_EPOCH_POS)[0], batch.base_offset)
                for batch in info.batches
            )
            self._changed()
        return info

    def truncate_to(self, offset: int) -> None:
        """Cut the log (and the epoch cache) so that it ends at ``offset``; the high watermark
        follows down if it was above."""
        if self.log.truncate_to(offset):
            log.info("%s-%s: truncated to offset %d", self.topic, self.partition, self.log.log_end_offset)
            self.log_generation += 1
            if self.future_log is not None:
                self.future_log.truncate_to(offset)
        self.state.on_truncate(self.log.log_end_offset)
        self._changed()

    def restart_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (a follower below the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset)
        self.log_generation += 1
        if self.future_log is not None:
            self.future_log.truncate_fully_and_start_at(offset)
        self.state.on_restart(offset)
        self._changed()

    def replace_log(self, new_log: Log) -> None:
        """The future log took the current one's place (AlterReplicaLogDirs): the leader epochs
        are persisted in its directory from now on; role, ISR and high watermark are unchanged."""
        self.log = new_log
        self.future_log = None
        self.state.epochs.persist_to(LeaderEpochFile(new_log.directory, new_log.flusher.sync_before).write)
        self._changed()

    def follower_learns(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """The leader's high watermark and log start offset from a fetch response
        (``ReplicaState.follower_learns``); the log start follows."""
        target = self.log
        new_start = self.state.follower_learns(
            leader_high_watermark, leader_log_start_offset, target.log_start_offset, target.log_end_offset
        )
        if new_start is not None:
            try:
                target.delete_records_before(new_start, self.state.high_watermark)
            except (LogError, OSError) as exc:
                log.warning("%s-%s: cannot follow the leader's log start offset %d: %s",
                            self.topic, self.partition, new_start, exc)  # fmt: skip
        self._changed()

    # -- leader: followers and the high watermark ------------------------------------------------
    def record_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = UNKNOWN_OFFSET
    ) -> None:
        """A follower fetched at ``fetch_offset``; ``log_start_offset`` is the one its request
        carried (Fetch v5+, -1 when unknown)."""
        self.state.record_follower_fetch(replica_id, fetch_offset, self.log.log_end_offset, now_ms, log_start_offset)
        self._changed()  # the HW or the low watermark may have moved (DelayedProduce, DelayedDeleteRecords)

    # -- leader: DeleteRecords ---------------------------------------------------------------------
    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """The lowest log start offset of this leader and its followers on live brokers (Kafka's
        ``Partition.lowWatermarkIfLeader``; ``broker.replication.delete_records``)."""
        self._check_leader()
        return low_watermark(self.log.log_start_offset, self.followers, alive)

    def maybe_advance_high_watermark(self) -> bool:
        """Kafka's ``Partition.maybeIncrementLeaderHW``; tells the listener when it moved."""
        if self.state.maybe_advance_high_watermark(self.log.log_end_offset):
            self._changed()
            return True
        return False

    def _changed(self) -> None:
        if self.listener is not None:
            self.listener()

    def last_stable_offset(self) -> int:
        """The first offset of the earliest ongoing transaction, at most the high watermark."""
        first_unstable = self.log.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None or first_unstable > hw else first_unstable

    def _check_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.node_id} does not lead {self.topic}-{self.partition}"
            )


def _load_epochs(target: Log) -> LeaderEpochCache:
    """The partition's epoch cache from its checkpoint file, completed from the batches after the
    last listed epoch that the last clean flush may not cover (from the recovery point on). The
    file is rewritten without fsync; the log's next flush makes it durable before the recovery
    point passes a changed entry (``LogFlusher.sync_before``), which is what makes scanning from the
    recovery point enough. A damaged file (a machine crash during a rewrite) is rebuilt from
    every batch from the log start."""
    epoch_file = LeaderEpochFile(target.directory, target.flusher.sync_before)
    stored = epoch_file.read_checked()
    if stored is None:
        scan_from = target.log_start_offset
    else:
        scan_from = max(stored[-1].start_offset if stored else target.log_start_offset, target.recovery_point)
    return epoch_file.load(target.log_end_offset, _batch_epochs(target, scan_from))


def _batch_epochs(target: Log, start_offset: int) -> Iterable[tuple[int, int]]:
    """``(partitionLeaderEpoch, base offset)`` of each batch from ``start_offset`` to the log end."""
    for segment in target.segments:
        if segment.next_offset <= start_offset:
            continue
        position = segment.position_of(start_offset)[0] if segment.base_offset <= start_offset else 0
        for _, header in iter_headers(segment.fd, position, segment.size_bytes):
            if header.partition_leader_epoch >= 0:
                yield header.partition_leader_epoch, header.base_offset
