"""The replicated log as the Raft core sees it: entries ``(offset, epoch, payload)`` and the
leader-epoch cache.

KIP-595 "Log Structure": *a record is uniquely identified by its offset in the log and the epoch
of the leader that appended it.* The record-batch encoding lives elsewhere
(``pyspark_log.records``); here a payload is opaque ``bytes`` or a control record such as
``LeaderChange``.

``RaftLog`` is an in-memory model owned by one ``RaftCore``. It never touches a file: the core
mutates it and emits the same mutation as an effect (``AppendToLog``, ``TruncateLog``,
``FlushLog``) that the driver applies to the durable log. On restart the driver rebuilds the model
from what is durable (``RaftLog(entries)``).

The leader-epoch cache (Kafka's ``leader-epoch-checkpoint``) maps each epoch present in the log to
its start offset; ``end_offset_for_epoch`` answers the divergence question of the Fetch API.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """An ``(offset, epoch)`` pair; ordering is by epoch first, then offset (Raft's "up to date")."""

    epoch: int
    offset: int


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """KIP-595 ``LeaderChangeMessage``: the control record a new leader appends on election.

    KIP-595 gives it control type 3; Kafka's implementation uses ``ControlRecordType.LEADER_CHANGE
    = 2``. The wire encoding (and that choice) belongs to the record codecs.
    """

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class VoterSpec:
    """One voter of a KIP-853 ``VotersRecord``: its id, directory id (16 bytes, a UUID) and its
    controller endpoint (empty host / port 0 when unknown, as in a static quorum)."""

    voter_id: int
    directory_id: bytes = bytes(16)
    host: str = ""
    port: int = 0


@dataclass(frozen=True, slots=True)
class VotersRecord:
    """KIP-853 ``VotersRecord`` (Kafka's ``ControlRecordType.KRAFT_VOTERS = 6``): the whole voter
    set. It takes effect on every replica as soon as it is appended to its log (not when
    committed), and stops being in effect if the log is truncated below it."""

    voters: tuple[VoterSpec, ...]

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.voter_id for v in self.voters)

    def spec(self, voter_id: int) -> VoterSpec | None:
        return next((v for v in self.voters if v.voter_id == voter_id), None)


Payload = bytes | LeaderChange | VotersRecord


@dataclass(frozen=True, slots=True)
class Entry:
    """One log record: offset, the epoch of the leader that appended it, and its payload."""

    offset: int
    epoch: int
    payload: Payload

    @property
    def is_control(self) -> bool:
        return not isinstance(self.payload, bytes)


class RaftLog:
    """In-memory log model and leader-epoch cache. Offsets are dense from ``start_offset``.

    KIP-630: once a snapshot covers a prefix of the log, the prefix may be deleted; the log then
    starts at the snapshot's end offset (``start_offset``) and ``start_epoch`` is the snapshot's
    epoch (the epoch of the entry at ``start_offset - 1``), so an empty log after a snapshot still
    answers ``last_epoch`` and the divergence question for that epoch.

    Raises ``ValueError`` on a non-contiguous append, a decreasing epoch, or a truncation outside
    the log. It has no lock: it belongs to one core, which is driven by one thread.
    """

    __slots__ = ("_entries", "_epoch_offsets", "_epochs", "_released", "start_epoch", "start_offset")

    def __init__(self, entries: Iterable[Entry] = (), *, start_offset: int = 0, start_epoch: int = 0) -> None:
        self._entries: list[Entry] = []
        self._epochs: list[int] = []  # epochs present, ascending
        self._epoch_offsets: list[int] = []  # start offset of each epoch in _epochs
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        self._released = start_offset  # data payloads below this offset were released
        if start_offset > 0 and start_epoch > 0:
            self._epochs.append(start_epoch)
            self._epoch_offsets.append(start_offset)
        self.append(tuple(entries))

    # -- queries -------------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next appended entry gets."""
        return self.start_offset + len(self._entries)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, 0 for an empty log (epoch 0 never has a leader)."""
        return self._epochs[-1] if self._epochs else 0

    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.last_epoch, self.end_offset)

    def entries(self) -> Sequence[Entry]:
        """A read-only view of every entry from ``start_offset`` on (do not mutate)."""
        return self._entries

    def entry(self, offset: int) -> Entry:
        if offset < self.start_offset:
            raise IndexError(f"offset {offset} is below the log start offset {self.start_offset}")
        return self._entries[offset - self.start_offset]

    def read(self, start_offset: int, max_records: int) -> tuple[Entry, ...]:
        """Entries from ``start_offset`` (inclusive), at most ``max_records`` of them."""
        if not self.start_offset <= start_offset <= self.end_offset:
            raise ValueError(f"read at {start_offset} outside [{self.start_offset}, {self.end_offset}]")
        first = start_offset - self.start_offset
        return tuple(self._entries[first : first + max_records])

    def epoch_cache(self) -> list[tuple[int, int]]:
        """``[(epoch, start_offset), ...]`` ascending: the leader-epoch checkpoint contents."""
        return list(zip(self._epochs, self._epoch_offsets, strict=True))

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch ``<= epoch`` in this log and its end offset (exclusive).

        After a snapshot the snapshot's epoch counts as present from ``start_offset`` on.
        The end offset of an epoch is the start offset of the next epoch in the log, or the log end
        offset for the last epoch. ``OffsetAndEpoch(0, 0)`` if no epoch ``<= epoch`` is present.
        """
        index = bisect.bisect_right(self._epochs, epoch) - 1
        if index < 0:
            return OffsetAndEpoch(0, 0)
        end = self._epoch_offsets[index + 1] if index + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(self._epochs[index], end)

    def first_offset_after_epoch(self, epoch: int) -> int:
        """The smallest offset whose entry has an epoch ``> epoch`` (the log end offset if none)."""
        index = bisect.bisect_right(self._epochs, epoch)
        return self._epoch_offsets[index] if index < len(self._epochs) else self.end_offset

    def truncation_offset_for(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        """KIP-595 Fetch response handling, rule 2, as one offset to truncate to.

        *Truncate every offset >= DivergingEpoch.EndOffset and every offset whose epoch is larger
        than DivergingEpoch.Epoch.*
        """
        return min(diverging_end_offset, self.first_offset_after_epoch(diverging_epoch), self.end_offset)

    # -- mutations -----------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset:
                raise ValueError(f"append at offset {entry.offset}, log end offset is {self.end_offset}")
            if entry.epoch < self.last_epoch or entry.epoch <= 0:
                raise ValueError(f"append of epoch {entry.epoch} after epoch {self.last_epoch}")
            if entry.epoch != self.last_epoch:
                self._epochs.append(entry.epoch)
                self._epoch_offsets.append(entry.offset)
            self._entries.append(entry)

    def release_payloads(self, end_offset: int) -> None:
        """Replace the payload of every data entry below ``end_offset`` by ``b""``, keeping its
        offset and epoch (control entries keep theirs). For an owner that holds the bytes
        elsewhere (the driver's log file) and has handed them on already: what the log is
        asked about afterwards (epochs, offsets, divergence, control records) is unchanged."""
        stop = min(end_offset, self.end_offset)
        entries = self._entries
        for index in range(max(self._released, self.start_offset) - self.start_offset, stop - self.start_offset):
            entry = entries[index]
            if isinstance(entry.payload, bytes) and entry.payload:
                entries[index] = Entry(entry.offset, entry.epoch, b"")
        self._released = max(self._released, stop)

    def truncate_to(self, end_offset: int) -> None:
        """Remove every entry with ``offset >= end_offset`` and the epochs that start there."""
        if not self.start_offset <= end_offset <= self.end_offset:
            raise ValueError(f"truncation to {end_offset} outside [{self.start_offset}, {self.end_offset}]")
        self._released = min(self._released, end_offset)
        del self._entries[end_offset - self.start_offset :]
        keep = bisect.bisect_left(self._epoch_offsets, end_offset)
        if end_offset == self.start_offset and self.start_epoch > 0:
            keep = max(keep, 1)  # the snapshot's epoch stays in the cache
        del self._epochs[keep:]
        del self._epoch_offsets[keep:]

    def delete_prefix(self, start_offset: int, start_epoch: int) -> None:
        """KIP-630: drop every entry below ``start_offset`` (covered by a snapshot whose id is
        ``(start_offset, start_epoch)``). A start beyond the log end empties the log (a replica
        that installed a fetched snapshot continues from its end offset)."""
        if start_offset <= self.start_offset:
            return
        if start_offset <= self.end_offset:
            del self._entries[: start_offset - self.start_offset]
        else:
            self._entries.clear()
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        epochs = [start_epoch] if start_epoch > 0 else []
        offsets = [start_offset] if start_epoch > 0 else []
        if self._entries:
            first_epoch = self._entries[0].epoch
            for epoch, offset in zip(self._epochs, self._epoch_offsets, strict=True):
                if epoch >= first_epoch and (not epochs or epoch != epochs[-1]):
                    epochs.append(epoch)
                    offsets.append(max(offset, start_offset))
        self._epochs, self._epoch_offsets = epochs, offsets
