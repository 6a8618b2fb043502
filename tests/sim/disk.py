"""A simulated disk for one replica: a quorum-state file and a log that loses unflushed data.

* ``PersistQuorumState`` is atomic and durable at once (write a temp file, fsync, rename).
* ``AppendToLog`` / ``TruncateLog`` change only the *volatile* log (the page cache).
* ``FlushLog`` makes the volatile log durable (fsync).
* ``crash()`` throws the volatile log away: the log is what was last flushed.
* ``wipe()`` loses everything (a replaced disk): a new *lineage* of this replica begins.
"""

from __future__ import annotations

from broker.raft.effects import AppendToLog, FlushLog, PersistEffect, PersistQuorumState, QuorumStateData, TruncateLog
from broker.raft.log import Entry

_INFINITY = 1 << 62


class SimDisk:
    def __init__(self) -> None:
        self.quorum_state: QuorumStateData | None = None
        self.durable_log: list[Entry] = []
        self.volatile_log: list[Entry] = []
        self.lineage = 0
        self.flushes = 0
        self._pending_low = _INFINITY  # lowest volatile truncation since the last flush
        self._changed_from = _INFINITY  # lowest durable offset changed since last taken

    def apply(self, effect: PersistEffect) -> None:
        if isinstance(effect, PersistQuorumState):
            self.quorum_state = effect.state
        elif isinstance(effect, AppendToLog):
            for entry in effect.entries:
                if entry.offset != len(self.volatile_log):
                    raise AssertionError(f"disk append at {entry.offset}, log end {len(self.volatile_log)}")
                self.volatile_log.append(entry)
        elif isinstance(effect, TruncateLog):
            if effect.end_offset > len(self.volatile_log):
                raise AssertionError(f"disk truncation to {effect.end_offset} beyond {len(self.volatile_log)}")
            del self.volatile_log[effect.end_offset :]
            self._pending_low = min(self._pending_low, effect.end_offset)
        elif isinstance(effect, FlushLog):
            if effect.end_offset != len(self.volatile_log):
                raise AssertionError(f"flush up to {effect.end_offset}, log end {len(self.volatile_log)}")
            self._changed_from = min(self._changed_from, self._pending_low, len(self.durable_log))
            self.durable_log = list(self.volatile_log)
            self._pending_low = _INFINITY
            self.flushes += 1
        else:  # pragma: no cover - exhaustive
            raise TypeError(effect)

    def crash(self) -> None:
        """Power loss: unflushed log data is gone; the quorum-state file was always durable."""
        self.volatile_log = list(self.durable_log)
        self._pending_low = _INFINITY

    def wipe(self) -> None:
        """The disk is lost: nothing durable survives."""
        self.quorum_state = None
        self.durable_log = []
        self.volatile_log = []
        self.lineage += 1
        self._pending_low = _INFINITY
        self._changed_from = 0

    def take_changed_from(self) -> int:
        """Lowest durable-log offset that may have changed since the previous call."""
        changed, self._changed_from = self._changed_from, _INFINITY
        return changed
