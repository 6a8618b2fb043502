"""Remote log segment metadata and its lifecycle, as KIP-405 defines them.

KIP-405 ("Kafka Tiered Storage", section "RemoteLogSegmentMetadata"): every segment copied to
the remote tier is described by a ``RemoteLogSegmentMetadata`` whose state moves only along

==========================  ==========================================
from                        to
==========================  ==========================================
(none)                      COPY_SEGMENT_STARTED
COPY_SEGMENT_STARTED        COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED
COPY_SEGMENT_FINISHED       DELETE_SEGMENT_STARTED
DELETE_SEGMENT_STARTED      DELETE_SEGMENT_FINISHED
==========================  ==========================================

:class:`RemoteLogMetadataCache` is the one owner of those transitions for a partition; an
illegal move raises :class:`IllegalStateTransition` (an invariant, never bad client input).
The cache is pure (no I/O): a driver feeds it the records it reads from
``__remote_log_metadata`` and asks it which segment serves an offset, where the remote log
starts and which segments ``retention.*`` lets it delete. State ids are Kafka's
``RemoteLogSegmentState`` ids.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's ``RemoteLogSegmentState`` with its serialized ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


_VALID: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_STARTED}),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset({RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class IllegalStateTransition(Exception):
    """A metadata update that KIP-405's state table forbids (Kafka raises
    ``IllegalStateException`` in ``RemoteLogSegmentMetadata.createWithUpdates``)."""


def is_valid_transition(src: RemoteLogSegmentState, dst: RemoteLogSegmentState) -> bool:
    """True when KIP-405 allows ``src`` -> ``dst``."""
    return dst in _VALID[src]


@dataclass(frozen=True)
class TopicIdPartition:
    """A partition named by its topic id (KIP-516) as well as its name."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """Kafka's ``RemoteLogSegmentId``: the partition and a random segment uuid, unique per copy
    (a segment copied twice after a crash gets two ids; the first is deleted as unreferenced)."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate(cls, tip: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(tip, uuid.uuid4())


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Kafka's ``RemoteLogSegmentMetadata``: offsets are inclusive (``end_offset`` is the last
    offset in the segment), ``segment_leader_epochs`` maps each leader epoch to its first offset
    in the segment, ``broker_id`` is the leader that copied it."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_bytes: int
    segment_leader_epochs: dict[int, int] = field(default_factory=dict)
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        if self.start_offset < 0 or self.end_offset < self.start_offset:
            raise ValueError(f"bad offset range [{self.start_offset}, {self.end_offset}]")
        if not self.segment_leader_epochs:
            raise ValueError("segment_leader_epochs must not be empty")

    def with_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """The metadata after ``update``; raises :class:`IllegalStateTransition`."""
        if update.segment_id != self.segment_id:
            raise ValueError("update is for another segment")
        if not is_valid_transition(self.state, update.state):
            raise IllegalStateTransition(f"{self.state.name} -> {update.state.name}")
        return replace(
            self,
            state=update.state,
            broker_id=update.broker_id,
            event_timestamp_ms=update.event_timestamp_ms,
        )


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate:
    """Kafka's ``RemoteLogSegmentMetadataUpdate``: a state change of one remote segment."""

    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    broker_id: int


class RemoteLogMetadataCache:
    """The remote segments of one partition, keyed by segment id (Kafka's
    ``RemoteLogMetadataCache``). Only segments in COPY_SEGMENT_FINISHED serve reads; a segment in
    DELETE_SEGMENT_FINISHED is forgotten. Not thread-safe: one owner (the driver) calls it."""

    def __init__(self) -> None:
        self._segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}

    def add_copy_in_progress(self, md: RemoteLogSegmentMetadata) -> None:
        """Record a COPY_SEGMENT_STARTED segment; raises on any other state or a duplicate id."""
        if md.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise IllegalStateTransition(f"a new segment must be COPY_SEGMENT_STARTED: {md.state}")
        if md.segment_id.id in self._segments:
            raise IllegalStateTransition(f"segment {md.segment_id.id} already known")
        self._segments[md.segment_id.id] = md

    def update(self, upd: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Apply ``upd``; raises :class:`KeyError` for an unknown segment and
        :class:`IllegalStateTransition` for a move KIP-405 forbids."""
        md = self._segments[upd.segment_id.id].with_update(upd)
        if md.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self._segments[upd.segment_id.id]
        else:
            self._segments[upd.segment_id.id] = md
        return md

    def all(self) -> list[RemoteLogSegmentMetadata]:
        """Every known segment (any state but DELETE_SEGMENT_FINISHED), by start offset."""
        return sorted(self._segments.values(), key=lambda m: (m.start_offset, m.end_offset))

    def copied(self) -> list[RemoteLogSegmentMetadata]:
        """Segments in COPY_SEGMENT_FINISHED, by start offset: the readable remote log."""
        return [m for m in self.all() if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]

    def segment_for_offset(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The copied segment holding ``offset`` (Kafka's ``remoteLogSegmentMetadata(epoch,
        offset)`` without the epoch filter), else ``None``."""
        for md in self.copied():
            if md.start_offset <= offset <= md.end_offset:
                return md
        return None

    def next_segment_after(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The first copied segment starting above ``offset`` (to skip a gap left by
        compaction or aborted data), else ``None``."""
        for md in self.copied():
            if md.start_offset > offset:
                return md
        return None

    def log_start_offset(self) -> int | None:
        """The remote log start offset (the start of the first copied segment), else ``None``."""
        copied = self.copied()
        return copied[0].start_offset if copied else None

    def highest_copied_offset(self) -> int:
        """Kafka's ``highestOffsetForEpoch`` over all epochs: the last offset copied, -1 if none.
        The copier resumes with the first local segment starting above it."""
        return max((m.end_offset for m in self.copied()), default=-1)

    def retention_candidates(
        self,
        *,
        now_ms: int,
        retention_ms: int,
        retention_bytes: int,
        local_log_bytes: int,
        log_start_offset: int,
    ) -> list[RemoteLogSegmentMetadata]:
        """Copied segments that ``retention.*`` removes from the tier, oldest first.

        Follows Kafka's ``RemoteLogManager`` remote retention: a segment goes when its max
        timestamp is older than ``retention.ms`` (-1 = unlimited), when the total size (remote
        plus the local bytes not yet tiered, ``local_log_bytes``) exceeds ``retention.bytes``
        (-1 = unlimited) by at least the segment's size, or when it ends below
        ``log_start_offset`` (DeleteRecords). Segments still being copied are never candidates.
        """
        out: list[RemoteLogSegmentMetadata] = []
        copied = self.copied()
        total = sum(m.segment_size_bytes for m in copied) + local_log_bytes
        for md in copied:
            expired = retention_ms >= 0 and now_ms - md.max_timestamp_ms > retention_ms
            oversize = retention_bytes >= 0 and total - md.segment_size_bytes >= retention_bytes
            below_start = md.end_offset < log_start_offset
            if not (expired or oversize or below_start):
                break
            out.append(md)
            total -= md.segment_size_bytes
        return out

    def orphaned_copies(self) -> list[RemoteLogSegmentMetadata]:
        """Segments stuck in COPY_SEGMENT_STARTED (a leader crashed mid-copy) or
        DELETE_SEGMENT_STARTED (crashed mid-delete): a new leader deletes them (KIP-405)."""
        return [
            m
            for m in self.all()
            if m.state in (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        ]


def rebuild(
    events: Iterable[RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate],
) -> RemoteLogMetadataCache:
    """A cache from the partition's metadata records in log order (how a broker replays
    ``__remote_log_metadata`` after a restart). Raises on an illegal sequence."""
    cache = RemoteLogMetadataCache()
    for ev in events:
        if isinstance(ev, RemoteLogSegmentMetadata):
            cache.add_copy_in_progress(ev)
        else:
            cache.update(ev)
    return cache
