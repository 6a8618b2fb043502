"""Simulated disks: a replica's log (page cache vs flushed) and its checkpoints (see ``model``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.replication.leader_epoch import EpochEntry

# -- disks -------------------------------------------------------------------------------------------
_INFINITY = 1 << 62


class SimLog:
    """One replica's log: ``entries[offset] = (leader epoch, record id)``; ``entries[:flushed]`` is
    on disk, the rest in the page cache. A truncation is durable at once."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []
        self.flushed = 0
        self.recovery_point = 0  # ≤ flushed: lowered by an epoch checkpoint rewrite (sync_before)
        self.changed_from = _INFINITY  # lowest offset changed since the invariants last looked

    @property
    def end(self) -> int:
        return len(self.entries)

    def append(self, epoch: int, record_id: int) -> None:
        self.entries.append((epoch, record_id))

    def truncate_to(self, offset: int) -> bool:
        if offset >= len(self.entries):
            return False
        del self.entries[offset:]
        self.flushed = min(self.flushed, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.changed_from = min(self.changed_from, offset)
        return True

    def flush(self) -> None:
        self.flushed = self.recovery_point = len(self.entries)


@dataclass
class SimDisk:
    logs: dict[int, SimLog] = field(default_factory=dict)
    epoch_checkpoints: dict[int, list[EpochEntry] | None] = field(default_factory=dict)  # None: damaged
    durable_epoch_checkpoints: dict[int, list[EpochEntry]] = field(default_factory=dict)  # as last fsynced
    hw_checkpoint: dict[int, int] = field(default_factory=dict)  # replication-offset-checkpoint

    def log(self, partition: int) -> SimLog:
        return self.logs.setdefault(partition, SimLog())
