"""A simulated disk for one replica: a quorum-state file and a log that loses unflushed data.

* ``PersistQuorumState`` is atomic and durable at once (write a temp file, fsync, rename).
* ``AppendToLog`` / ``TruncateLog`` change only the *volatile* log (the page cache).
* ``FlushLog`` makes the volatile log durable (fsync).
* ``DeleteLogPrefix`` (KIP-630) rewrites the log from the new start offset, durably (the real
  store copies the tail, page cache included, into a new fsynced file): the tail becomes durable.
* ``InstallSnapshot`` writes the fetched snapshot (atomic, durable) and starts the log at its end.
* ``crash()`` throws the volatile log away: the log is what was last flushed.
* ``wipe()`` loses everything (a replaced disk): a new *lineage* of this replica begins.

The logs hold the entries from ``log_start`` on; ``snapshots`` maps each snapshot id on disk to
its file bytes (written whole and durable at once, as ``write_snapshot`` does).
"""

from __future__ import annotations

from broker.raft.effects import (
    AppendToLog,
    DeleteLogPrefix,
    FlushLog,
    InstallSnapshot,
    PersistEffect,
    PersistQuorumState,
    QuorumStateData,
    TruncateLog,
)
from broker.raft.log import Entry
from broker.raft.snapshot import SnapshotId

_INFINITY = 1 << 62


class SimDisk:
    def __init__(self) -> None:
        self.quorum_state: QuorumStateData | None = None
        self.durable_log: list[Entry] = []
        self.volatile_log: list[Entry] = []
        self.log_start = 0
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.installed = 0  # snapshots fetched from a leader
        self.lineage = 0
        self.flushes = 0
        self._pending_low = _INFINITY  # lowest volatile truncation since the last flush
        self._changed_from = _INFINITY  # lowest durable offset changed since last taken

    @property
    def volatile_end(self) -> int:
        return self.log_start + len(self.volatile_log)

    @property
    def durable_end(self) -> int:
        return self.log_start + len(self.durable_log)

    def latest_snapshot(self) -> SnapshotId | None:
        return max(self.snapshots, default=None)

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.snapshots[snapshot_id] = data

    def apply(self, effect: PersistEffect) -> None:
        if isinstance(effect, PersistQuorumState):
            self.quorum_state = effect.state
        elif isinstance(effect, AppendToLog):
            for entry in effect.entries:
                if entry.offset != self.volatile_end:
                    raise AssertionError(f"disk append at {entry.offset}, log end {self.volatile_end}")
                self.volatile_log.append(entry)
        elif isinstance(effect, TruncateLog):
            if not self.log_start <= effect.end_offset <= self.volatile_end:
                raise AssertionError(f"disk truncation to {effect.end_offset} outside [{self.log_start}, end]")
            del self.volatile_log[effect.end_offset - self.log_start :]
            self._pending_low = min(self._pending_low, effect.end_offset)
        elif isinstance(effect, FlushLog):
            if effect.end_offset != self.volatile_end:
                raise AssertionError(f"flush up to {effect.end_offset}, log end {self.volatile_end}")
            self._make_durable()
            self.flushes += 1
        elif isinstance(effect, DeleteLogPrefix):
            covering = self.latest_snapshot()
            if covering is None or covering.end_offset < effect.start_offset:
                raise AssertionError(f"log prefix below {effect.start_offset} deleted without a snapshot covering it")
            self._delete_prefix(effect.start_offset)
        elif isinstance(effect, InstallSnapshot):
            self.snapshots[effect.snapshot_id] = effect.data
            self.installed += 1
            self._delete_prefix(effect.snapshot_id.end_offset)
        else:  # pragma: no cover - exhaustive
            raise TypeError(effect)

    def _make_durable(self) -> None:
        self._changed_from = min(self._changed_from, self._pending_low, self.durable_end)
        self.durable_log = list(self.volatile_log)
        self._pending_low = _INFINITY

    def _delete_prefix(self, start: int) -> None:
        """The real store rewrites the tail (page cache included) into a new fsynced file."""
        if start <= self.log_start:
            return
        keep_from = min(start, self.volatile_end) - self.log_start
        self.volatile_log = self.volatile_log[keep_from:] if start <= self.volatile_end else []
        self.log_start = start
        self._make_durable()
        ids = sorted(self.snapshots)  # as the driver: the two newest stay
        for snapshot_id in ids[:-2]:
            if snapshot_id.end_offset < start:
                del self.snapshots[snapshot_id]

    def crash(self) -> None:
        """Power loss: unflushed log data is gone; the quorum-state file was always durable."""
        self.volatile_log = list(self.durable_log)
        self._pending_low = _INFINITY

    def wipe(self) -> None:
        """The disk is lost: nothing durable survives."""
        self.quorum_state = None
        self.durable_log = []
        self.volatile_log = []
        self.log_start = 0
        self.snapshots = {}
        self.lineage += 1
        self._pending_low = _INFINITY
        self._changed_from = 0

    def take_changed_from(self) -> int:
        """Lowest durable-log offset that may have changed since the previous call."""
        changed, self._changed_from = self._changed_from, _INFINITY
        return changed
