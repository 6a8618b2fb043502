"""``SimPartition``: the real replica core (``broker.replication.replica_state.ReplicaState``) over a
simulated log, as ``broker/replication/partition.py`` drives it over a real one (see ``model``)."""

from __future__ import annotations

from collections.abc import Callable

from broker.metadata.image import PartitionImage
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from broker.replication.replica_state import ReplicaState, ReplicaStateFields
from tests.sim.replication.storage import SimDisk


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
        if changed:  # LogFlusher.sync_before: durable before the recovery point passes the change
            target.recovery_point = min(target.recovery_point, *(e.start_offset for e in changed))

    cache._on_change = write  # as LeaderEpochFile.load does
    if cache.entries != stored:
        write(cache.entries)
    return cache


class SimPartition(ReplicaStateFields):
    """The log I/O around a real ``ReplicaState`` (``state``), as ``Partition`` does around it: the
    same events, over a ``SimLog``; ``listener`` is called after every move, as ``Partition``'s."""

    def __init__(self, node_id: int, partition: int, disk: SimDisk) -> None:
        self.node_id = node_id
        self.partition = partition
        self.log = disk.log(partition)
        self.state = ReplicaState(
            node_id, load_epochs(disk, partition), max(min(disk.hw_checkpoint.get(partition, 0), self.log.end), 0)
        )
        self.listener: Callable[[], None] | None = None

    # -- events --------------------------------------------------------------------------------------
    def become_leader(self, image: PartitionImage, now_ms: int) -> bool:
        started = self.state.become_leader(image, now_ms, self.log.end)
        self._changed()
        return started

    def become_follower(self, image: PartitionImage) -> bool:
        changed = self.state.become_follower(image)
        self._changed()
        return changed

    def append_as_leader(self, record_ids: list[int]) -> tuple[int, int]:
        first = self.log.end
        for record_id in record_ids:
            self.log.append(self.state.leader_epoch, record_id)
        self.state.on_leader_append(self.log.end)
        self._changed()
        return first, self.log.end - 1

    def append_as_follower(self, base_offset: int, records: list[tuple[int, int]]) -> bool:
        """False when the batches do not start at the log end (``LogError`` in the broker)."""
        if base_offset != self.log.end:
            return False
        for epoch, record_id in records:
            self.log.append(epoch, record_id)
        self.state.on_follower_append((epoch, base_offset + i) for i, (epoch, _) in enumerate(records))
        if records:
            self._changed()
        return True

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.state.on_truncate(self.log.end)
        self._changed()

    def follower_learns(self, leader_high_watermark: int) -> None:
        new_start = self.state.follower_learns(leader_high_watermark, 0, 0, self.log.end)
        assert new_start is None, "the log start never moves here: retention is not simulated"
        self._changed()

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        self.state.record_follower_fetch(replica_id, fetch_offset, self.log.end, now_ms)
        self._changed()

    def _changed(self) -> None:
        if self.listener is not None:
            self.listener()
