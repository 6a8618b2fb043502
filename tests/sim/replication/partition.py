"""``SimPartition``: ``broker/replication/partition.py`` over a simulated log (see ``model``)."""

from __future__ import annotations

from collections.abc import Callable

from broker.controller.image import PartitionImage
from broker.replication.isr import FollowerState, high_watermark, on_follower_fetch
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from pyspark_log.wire.errors import ErrorCode
from tests.sim.replication.storage import SimDisk

# -- Partition (broker/replication/partition.py) -----------------------------------------------------
Waiter = Callable[[int], None]  # called with an error code (NONE: the high watermark reached it)


def load_epochs(disk: SimDisk, partition: int) -> LeaderEpochCache:
    """``partition._load_epochs`` + ``LeaderEpochFile.load``: the checkpoint's entries below the log
    end, then the epochs of the batches from the recovery point (the flushed offset) on."""
    target = disk.log(partition)
    checked = disk.epoch_checkpoints.get(partition, [])
    if checked is None:  # damaged: rebuilt from every batch (``read_checked`` returned None)
        stored: list[EpochEntry] = []
        scan_from = 0
    else:
        stored = list(checked)
        scan_from = max(stored[-1].start_offset if stored else 0, target.recovery_point)
    cache = LeaderEpochCache(e for e in stored if e.start_offset < target.end)
    for offset in range(scan_from, target.end):
        cache.assign(target.entries[offset][0], offset)

    def write(entries: list[EpochEntry]) -> None:
        previous = disk.epoch_checkpoints.get(partition) or []
        disk.epoch_checkpoints[partition] = list(entries)
        changed = set(previous).symmetric_difference(entries)
        if changed:  # Log.sync_before: durable before the recovery point passes the change
            target.recovery_point = min(target.recovery_point, *(e.start_offset for e in changed))

    cache._on_change = write  # as LeaderEpochFile.load does
    if cache.entries != stored:
        write(cache.entries)
    return cache


class SimPartition:
    """``Partition`` over a ``SimLog`` (same methods, same rules)."""

    def __init__(self, node_id: int, partition: int, disk: SimDisk) -> None:
        self.node_id = node_id
        self.partition = partition
        self.log = disk.log(partition)
        self.epochs = load_epochs(disk, partition)
        self.high_watermark = max(min(disk.hw_checkpoint.get(partition, 0), self.log.end), 0)
        self.role: PartitionImage | None = None
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.waiters: list[tuple[int, Waiter]] = []

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
        if self.is_leader and self.role is not None and self.role.leader_epoch == image.leader_epoch:
            self.update_from_image(image)
            return False
        self.role = image
        self.pending_isr = None
        end = self.log.end
        self.epochs.assign(image.leader_epoch, end)
        self.leader_epoch_start_offset = end
        self.followers = {
            b: FollowerState(last_caught_up_ms=now_ms if b in image.isr else 0)
            for b in image.replicas
            if b != self.node_id
        }
        self.maybe_advance_high_watermark()
        return True

    def become_follower(self, image: PartitionImage) -> bool:
        was = self.role
        self.role = image
        self.pending_isr = None
        self.followers = {}
        self.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return was is None or was.leader != image.leader or was.leader_epoch != image.leader_epoch

    def update_from_image(self, image: PartitionImage) -> None:
        if self.role is None or image.partition_epoch < self.role.partition_epoch:
            return
        if image.partition_epoch > self.role.partition_epoch:
            self.pending_isr = None
        self.role = image
        if self.is_leader:
            self.maybe_advance_high_watermark()
            self._complete_waiters()

    def append_as_leader(self, record_ids: list[int]) -> tuple[int, int]:
        first = self.log.end
        for record_id in record_ids:
            self.log.append(self.leader_epoch, record_id)
        self.maybe_advance_high_watermark()
        return first, self.log.end - 1

    def append_as_follower(self, base_offset: int, records: list[tuple[int, int]]) -> bool:
        """False when the batches do not start at the log end (``LogError`` in the broker)."""
        if base_offset != self.log.end:
            return False
        for index, (epoch, record_id) in enumerate(records):
            self.log.append(epoch, record_id)
            if epoch > self.epochs.latest_epoch:
                self.epochs.assign(epoch, base_offset + index)
        return True

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.epochs.truncate_from_end(self.log.end)
        self.high_watermark = min(self.high_watermark, self.log.end)

    def restart_at(self, offset: int) -> None:  # pragma: no cover - the log start never moves here
        raise AssertionError(f"log start moved to {offset}: retention is not simulated")

    def follower_learns(self, leader_high_watermark: int) -> None:
        self.high_watermark = max(0, min(leader_high_watermark, self.log.end))

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        state = self.followers.get(replica_id, FollowerState())
        self.followers[replica_id] = on_follower_fetch(state, fetch_offset, self.log.end, now_ms)
        self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new = high_watermark(self.high_watermark, self.node_id, self.log.end, self.maximal_isr, self.followers)
        if new == self.high_watermark:
            return False
        self.high_watermark = new
        self._complete_waiters()
        return True

    def wait_for_high_watermark(self, offset: int, waiter: Waiter) -> None:
        if self.high_watermark >= offset:
            waiter(ErrorCode.NONE)
        else:
            self.waiters.append((offset, waiter))

    def _complete_waiters(self) -> None:
        if not self.waiters:
            return
        hw = self.high_watermark
        done = [w for offset, w in self.waiters if offset <= hw]
        self.waiters = [(offset, w) for offset, w in self.waiters if offset > hw]
        for waiter in done:
            waiter(ErrorCode.NONE)

    def fail_waiters(self, code: int) -> None:
        waiters, self.waiters = self.waiters, []
        for _, waiter in waiters:
            waiter(code)
