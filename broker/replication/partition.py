"""``Partition``: one hosted replica of a topic-partition — its role, ISR, high watermark, leader
epochs, and the produces waiting for the ISR.

Seed 000 §4.7: "each partition has a single leader and zero or more followers"; "all writes go to
the leader of the partition". A ``Partition`` is the leader or a follower as the metadata image
says (``become_leader`` / ``become_follower``, driven by ``ReplicaManager.on_image_change``):

* as **leader** it stamps its leader epoch on every batch it appends (``append_as_leader``), keeps
  the followers' progress from their fetches (``record_follower_fetch``), moves the high watermark
  (``broker.replication.isr``) and completes the acks=all produces waiting for it
  (``wait_for_high_watermark``, Kafka's DelayedProduce) and the DeleteRecords waiting for every
  live replica's log start offset (``wait_for_low_watermark``, Kafka's DelayedDeleteRecords);
* as **follower** it appends the leader's batches unchanged (``append_as_follower``: same offsets,
  same ``partitionLeaderEpoch``), learns the high watermark and log start offset from the leader,
  and truncates where its log diverges (``truncate_to``).

The ISR it uses is the metadata's (``isr``) plus, while an AlterPartition it sent is in flight,
the ISR it asked for (``pending_isr``): the high watermark is computed over the union (the
"maximal ISR"), min.insync.replicas over the committed ISR. Changes of ISR reach this object only
through the metadata log (``update_from_image``), never by a side channel.

Threading: used from the broker's event loop only. Raises ``PartitionError`` with Kafka codes.
"""

from __future__ import annotations

import asyncio
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
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (offset needed in the HW, waiter)
        # DeleteRecords waiting for every live replica's log start: (offset, broker liveness, waiter)
        self._low_waiters: list[tuple[int, Callable[[int], bool], asyncio.Future[int]]] = []

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
        self.maybe_advance_high_watermark()
        log.info("%s-%s: leader at epoch %d from offset %d, ISR %s", self.topic, self.partition,
                 image.leader_epoch, end, list(image.isr))  # fmt: skip
        return True

    def become_follower(self, image: PartitionImage) -> bool:
        """Follow ``image.leader`` (-1: no leader for now). Produces waiting here fail with
        NOT_LEADER_OR_FOLLOWER. Returns False when nothing about the leadership changed."""
        was = self.role
        self.role = image
        self.pending_isr = None
        self.followers = {}
        self.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.node_id} no longer leads")
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
            self.maybe_advance_high_watermark()
            self._complete_waiters()
            self.complete_low_watermark_waiters()  # a replica's broker may have died meanwhile

    # -- appends -------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | memoryview, origin: AppendOrigin) -> LogAppendInfo:
        """Validate, stamp this leader's epoch, append; the high watermark moves at once when the
        leader is the whole ISR."""
        self._check_leader()
        info = self.log.append(records, origin=origin, leader_epoch=self.leader_epoch)
        if info.batches:
            self.maybe_advance_high_watermark()
        return info

    def append_control_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, *, commit: bool
    ) -> int:
        self._check_leader()
        offset = self.log.append_control_marker(
            producer_id, producer_epoch, coordinator_epoch, commit=commit, leader_epoch=self.leader_epoch
        )
        self.maybe_advance_high_watermark()
        return offset

    def append_as_follower(self, data: bytes | memoryview) -> LogAppendInfo:
        """Append the leader's batches as they are and learn their leader epochs."""
        info = self.log.append_as_follower(data)
        view = memoryview(data)
        for batch in info.batches:
            (epoch,) = _EPOCH.unpack_from(view, batch.position + PARTITION_LEADER_EPOCH_POS)
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, batch.base_offset)
        return info

    def truncate_to(self, offset: int) -> None:
        """Cut the log (and the epoch cache) so that it ends at ``offset``; the high watermark
        follows down if it was above."""
        if self.log.truncate_to(offset):
            log.info("%s-%s: truncated to offset %d", self.topic, self.partition, self.log.log_end_offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def restart_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (a follower below the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self.high_watermark = offset

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
        self.maybe_advance_high_watermark()
        self.complete_low_watermark_waiters()

    # -- leader: DeleteRecords ---------------------------------------------------------------------
    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """The lowest log start offset of this leader and its followers on live brokers (Kafka's
        ``Partition.lowWatermarkIfLeader``; ``broker.replication.delete_records``)."""
        self._check_leader()
        return low_watermark(self.log.log_start_offset, self.followers, alive)

    def wait_for_low_watermark(self, offset: int, alive: Callable[[int], bool]) -> asyncio.Future[int]:
        """A future of the low watermark once it reaches ``offset`` (at once if it has), failed
        with PartitionError when this broker stops leading (Kafka's DelayedDeleteRecords)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._low_waiters.append((offset, alive, future))
        self.complete_low_watermark_waiters()
        return future

    def complete_low_watermark_waiters(self) -> None:
        if not self._low_waiters or not self.is_leader:
            return
        waiting = []
        for offset, alive, future in self._low_waiters:
            if future.done():
                continue
            low = low_watermark(self.log.log_start_offset, self.followers, alive)
            if low >= offset:
                future.set_result(low)
            else:
                waiting.append((offset, alive, future))
        self._low_waiters = waiting

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new = high_watermark(
            self.high_watermark, self.node_id, self.log.log_end_offset, self.maximal_isr, self.followers
        )
        if new == self.high_watermark:
            return False
        self.high_watermark = new
        self._complete_waiters()
        return True

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future[None]:
        """A future done once the high watermark reaches ``offset`` (at once if it has), or failed
        with PartitionError when this broker stops leading."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            future.set_result(None)
        else:
            self._waiters.append((offset, future))
        return future

    def _complete_waiters(self) -> None:
        if not self._waiters:
            return
        hw = self.high_watermark
        waiting = []
        for offset, future in self._waiters:
            if future.done():
                continue
            if offset <= hw:
                future.set_result(None)
            else:
                waiting.append((offset, future))
        self._waiters = waiting

    def fail_waiters(self, code: int, message: str) -> None:
        waiters, self._waiters = self._waiters, []
        low_waiters, self._low_waiters = self._low_waiters, []
        for future in [f for _, f in waiters] + [f for _, _, f in low_waiters]:
            if not future.done():
                future.set_exception(PartitionError(code, message))

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
    last listed epoch that the last clean flush may not cover (from the recovery point on)."""
    epoch_file = LeaderEpochFile(target.directory)
    stored = epoch_file.read()
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
