"""``Partition``: one hosted replica of a topic-partition — its role, ISR, high watermark, leader
epochs, and the produces waiting for the ISR.

Seed 000 §4.7: "each partition has a single leader and zero or more followers"; "all writes go to
the leader of the partition". A ``Partition`` is the leader or a follower as the metadata image
says (``become_leader`` / ``become_follower``, driven by ``ReplicaManager.on_image_change``):

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
from dataclasses import replace

from broker.controller.image import PartitionImage
from broker.log.errors import LogError
from broker.log.log import Log, LogAppendInfo
from broker.log.scan import iter_headers
from broker.log.validate import AppendOrigin
from broker.replication.delete_records import low_watermark
from broker.replication.isr import UNKNOWN_OFFSET, FollowerState, high_watermark, on_follower_fetch
from broker.replication.leader_epoch import LeaderEpochCache, LeaderEpochFile
from pyspark_log.records.header import PARTITION_LEADER_EPOCH_POS
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

_EPOCH = struct.Struct(">i")


class PartitionError(Exception):
    """A request for a partition this broker cannot serve; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Partition:
    """A replica of ``topic``-``partition`` on broker ``node_id`` (see the module docstring)."""

    def __init__(self, node_id: int, topic: str, partition: int, target: Log, high_watermark_hint: int = 0) -> None:
        self.node_id = node_id
        self.topic = topic
        self.partition = partition
        self.log = target
        self.epochs: LeaderEpochCache = _load_epochs(target)
        self.high_watermark = max(min(high_watermark_hint, target.log_end_offset), target.log_start_offset)
        self.role: PartitionImage | None = None  # the metadata's view; None until it names this broker a replica
        self.pending_isr: tuple[int, ...] | None = None  # asked of the controller, not yet confirmed
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.leader_high_watermark = 0  # as a follower: the leader's, from its last fetch response
        # called after every move of the HW, log end/start offset, role or ISR (the replica manager
        # re-checks its purgatories; Kafka's Partition.tryCompleteDelayedRequests)
        self.listener: Callable[[], None] | None = None
        # set when this broker stops hosting the partition (deleted topic, reassignment, shutdown): the
        # error its delayed operations answer
        self.stopped_code: int = ErrorCode.NONE

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, role={self.role}, hw={self.high_watermark})"

    # -- role ----------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role is not None and self.role.leader == self.node_id

    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch if self.role is not None else -1

    @property
    def isr(self) -> tuple[int, ...]:
        return self.role.isr if self.role is not None else ()

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    def become_leader(self, image: PartitionImage, now_ms: int) -> bool:
        """Lead at ``image.leader_epoch``: the epoch begins at the log end offset; every follower's
        progress is unknown until its next fetch (ISR members count as caught up now). Returns
        False when already leading at that epoch (then only the ISR may change)."""
        if self.is_leader and self.role is not None and self.role.leader_epoch == image.leader_epoch:
            self.update_from_image(image)
            return False
        self.role = image
        self.pending_isr = None
        end = self.log.log_end_offset
        self.epochs.assign(image.leader_epoch, end)
        self.leader_epoch_start_offset = end
        self.followers = {
            b: FollowerState(last_caught_up_ms=now_ms if b in image.isr else 0)
            for b in image.replicas
            if b != self.node_id
        }
        self._advance_high_watermark()
        self._changed()
        log.info("%s-%s: leader at epoch %d from offset %d, ISR %s", self.topic, self.partition,
                 image.leader_epoch, end, list(image.isr))  # fmt: skip
        return True

    def become_follower(self, image: PartitionImage) -> bool:
        """Follow ``image.leader`` (-1: no leader for now). Produces waiting here fail with
        NOT_LEADER_OR_FOLLOWER (their ``DelayedProduce`` sees the role on its next check).
        Returns False when nothing about the leadership changed."""
        was = self.role
        self.role = image
        self.pending_isr = None
        self.followers = {}
        self._changed()
        changed = was is None or was.leader != image.leader or was.leader_epoch != image.leader_epoch
        if changed:
            log.info("%s-%s: follower of %d at epoch %d", self.topic, self.partition, image.leader, image.leader_epoch)
        return changed

    def update_from_image(self, image: PartitionImage) -> None:
        """Same leader and epoch: take the ISR and partition epoch the metadata now shows (an older
        partition epoch than ours is a stale view and is ignored)."""
        if self.role is None or image.partition_epoch < self.role.partition_epoch:
            return
        if image.partition_epoch > self.role.partition_epoch:
            self.pending_isr = None  # the controller decided on what was proposed
        self.role = image
        if self.is_leader:
            self._advance_high_watermark()
        self._changed()  # the ISR may have shrunk, a replica's broker may have died meanwhile

    # -- appends -------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | memoryview, origin: AppendOrigin) -> LogAppendInfo:
        """Validate, stamp this leader's epoch, append; the high watermark moves at once when the
        leader is the whole ISR."""
        self._check_leader()
        info = self.log.append(records, origin=origin, leader_epoch=self.leader_epoch)
        if info.batches:
            self._advance_high_watermark()
            self._changed()
        return info

    def append_control_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *, commit: bool
    ) -> int:
        self._check_leader()
        offset = self.log.append_control_marker(
            producer_id, producer_epoch, coordinator_epoch, commit=commit, leader_epoch=self.leader_epoch
        )
        self._advance_high_watermark()
        self._changed()
        return offset

    def append_as_follower(self, data: bytes | memoryview) -> LogAppendInfo:
        """Append the leader's batches as they are and learn their leader epochs."""
        info = self.log.append_as_follower(data)
        view = memoryview(data)
        for batch in info.batches:
            (epoch,) = _EPOCH.unpack_from(view, batch.position + PARTITION_LEADER_EPOCH_POS)
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, batch.base_offset)
        if info.batches:
            self._changed()
        return info

    def truncate_to(self, offset: int) -> None:
        """Cut the log (and the epoch cache) so that it ends at ``offset``; the high watermark
        follows down if it was above."""
        if self.log.truncate_to(offset):
            log.info("%s-%s: truncated to offset %d", self.topic, self.partition, self.log.log_end_offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._changed()

    def restart_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (a follower below the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self.high_watermark = offset
        self._changed()

    def follower_learns(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """A follower's high watermark is the leader's, capped at its own log end; its log start
        offset follows the leader's (DeleteRecords, retention), capped at that high watermark (as
        Kafka's fetcher raises it with ``maybeIncrementLogStartOffset`` after the high watermark)."""
        self.leader_high_watermark = leader_high_watermark
        self.high_watermark = max(self.log.log_start_offset, min(leader_high_watermark, self.log.log_end_offset))
        new_start = min(leader_log_start_offset, self.high_watermark)
        if new_start > self.log.log_start_offset:
            try:
                self.log.delete_records_before(new_start, self.high_watermark)
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
        state = on_follower_fetch(
            self.followers.get(replica_id, FollowerState()), fetch_offset, self.log.log_end_offset, now_ms
        )
        if log_start_offset >= 0:
            state = replace(state, log_start_offset=log_start_offset)
        self.followers[replica_id] = state
        self._advance_high_watermark()
        self._changed()  # the low watermark may have moved (DelayedDeleteRecords)

    # -- leader: DeleteRecords ---------------------------------------------------------------------
    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """The lowest log start offset of this leader and its followers on live brokers (Kafka's
        ``Partition.lowWatermarkIfLeader``; ``broker.replication.delete_records``)."""
        self._check_leader()
        return low_watermark(self.log.log_start_offset, self.followers, alive)

    def maybe_advance_high_watermark(self) -> bool:
        """Move the leader's high watermark to the smallest log end offset over the maximal ISR
        (Kafka's ``Partition.maybeIncrementLeaderHW``); tell the listener when it moved."""
        if self._advance_high_watermark():
            self._changed()
            return True
        return False

    def _advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new = high_watermark(
            self.high_watermark, self.node_id, self.log.log_end_offset, self.maximal_isr, self.followers
        )
        if new == self.high_watermark:
            return False
        self.high_watermark = new
        return True

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
    point passes a changed entry (``Log.sync_before``), which is what makes scanning from the
    recovery point enough. A damaged file (a machine crash during a rewrite) is rebuilt from
    every batch from the log start."""
    epoch_file = LeaderEpochFile(target.directory, target.sync_before)
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
