"""One share-partition's delivery state (KIP-932 "In-flight records"): pure, no I/O, no clock.

A share group consumes a topic-partition through a window of in-flight records between the
share-partition start offset (SPSO) and end offset (SPEO). Every offset in ``[spso, speo)`` has
a state; offsets below the SPSO are done, offsets at or above the SPEO were never acquired.
The transition table (KIP-932 "Record state"; Kafka's ``RecordState``: AVAILABLE 0, ACQUIRED 1,
ACKNOWLEDGED 2, ARCHIVED 4)::

    AVAILABLE    --acquire (delivery count + 1, lock until now + lock duration)-->  ACQUIRED
    ACQUIRED     --accept (ack type 1)-------------------------------------------->  ACKNOWLEDGED
    ACQUIRED     --release (2), lock expiry, member gone, count <  limit---------->  AVAILABLE
    ACQUIRED     --release (2), lock expiry, member gone, count >= limit---------->  ARCHIVED
    ACQUIRED     --reject (3), gap (0)-------------------------------------------->  ARCHIVED

An acknowledgement names offsets the member holds; anything else (another member's records, an
available or finished offset) is refused whole with INVALID_RECORD_STATE (Kafka checks a batch
before changing it). The SPSO moves past every leading ACKNOWLEDGED/ARCHIVED offset; offsets
below a new log start (retention, DeleteRecords) are dropped the same way (``move_start``).
``group.share.partition.max.record.locks`` bounds the in-flight window: no offset at or above
``spso + max_in_flight`` is acquired. The caller (``broker.coordinator.share_group.manager``)
supplies times, reads the log and persists ``snapshot()``; the state is rebuilt from it with
``restore`` (an ACQUIRED record is persisted as AVAILABLE with its delivery count, as Kafka's
persister does: its lock does not survive a restart).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyspark_log.wire.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids, as persisted in ``__share_group_state``."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge ``AcknowledgeTypes`` (KIP-932)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets with one state and delivery count (``StateBatches`` of ShareSnapshot)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class Acquired:
    """A run of acquired offsets with one delivery count (ShareFetch ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AckError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class SharePartition:
    """The delivery state of one (group, topic, partition); see the module docstring."""

    spso: int
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    state_epoch: int = 0
    speo: int = -1  # -1: same as spso (set in __post_init__)
    records: dict[int, InFlight] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.speo = max(self.speo, self.spso)

    # -- acquisition -----------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next read of the log should start: the first AVAILABLE in-flight offset,
        else the SPEO."""
        for offset in range(self.spso, self.speo):
            entry = self.records.get(offset)
            if entry is not None and entry.state is RecordState.AVAILABLE:
                return offset
        return self.speo

    def acquire(  # noqa: PLR0917
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        fetchable_end: int,
        max_records: int,
        now_ms: int,
        lock_duration_ms: int,
    ) -> list[Acquired]:
        """Acquire for ``member_id`` up to ``max_records`` offsets that lie in ``batches`` (the
        ``(base, last)`` offsets of the batches just read from the log), below ``fetchable_end``
        (the high watermark, or the LSO for read_committed) and below the in-flight bound. An
        AVAILABLE in-flight offset is re-acquired; an offset at the SPEO or above is new (the
        SPEO moves past it). Offsets between the SPEO and a batch's base (compacted away, or
        below the start of what was read) are archived as gaps."""
        out: list[Acquired] = []
        taken = 0
        limit = min(fetchable_end, self.spso + self.max_in_flight)
        deadline = now_ms + lock_duration_ms
        for base, last in batches:
            for offset in range(max(base, self.spso), min(last, limit - 1) + 1):
                if taken >= max_records:
                    return _runs(out)
                if offset >= self.speo:
                    for gap in range(self.speo, offset):  # no record at these offsets
                        self.records[gap] = InFlight(RecordState.ARCHIVED)
                    entry = self.records[offset] = InFlight(RecordState.AVAILABLE)
                    self.speo = offset + 1
                else:
                    found = self.records.get(offset)
                    if found is None or found.state is not RecordState.AVAILABLE:
                        continue
                    entry = found
                entry.state = RecordState.ACQUIRED
                entry.delivery_count += 1
                entry.member_id = member_id
                entry.lock_deadline_ms = deadline
                out.append(Acquired(offset, offset, entry.delivery_count))
                taken += 1
        self.advance()
        return _runs(out)

    # -- acknowledgement -------------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: Sequence[int]) -> None:
        """Apply one acknowledgement batch of ``member_id``: ``types`` has one type for the whole
        range or one per offset. Raises AckError (INVALID_REQUEST for a malformed batch,
        INVALID_RECORD_STATE for offsets the member does not hold) without changing anything."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise AckError(ErrorCode.INVALID_REQUEST, f"bad acknowledgement batch {first}-{last}")
        for t in types:
            if t not in AckType._value2member_map_:
                raise AckError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {t}")
        for offset in range(first, last + 1):
            entry = self.records.get(offset)
            if entry is None or entry.state is not RecordState.ACQUIRED or entry.member_id != member_id:
                raise AckError(ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is not acquired by member {member_id}")
        for offset in range(first, last + 1):
            ack = AckType(types[0] if len(types) == 1 else types[offset - first])
            entry = self.records[offset]
            if ack is AckType.ACCEPT:
                self._set(entry, RecordState.ACKNOWLEDGED)
            elif ack is AckType.RELEASE:
                self._release(entry)
            else:  # REJECT, GAP
                self._set(entry, RecordState.ARCHIVED)
        self.advance()

    def _set(self, entry: InFlight, state: RecordState) -> None:
        entry.state = state
        entry.member_id = None
        entry.lock_deadline_ms = 0

    def _release(self, entry: InFlight) -> None:
        limit_reached = entry.delivery_count >= self.delivery_count_limit
        self._set(entry, RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE)

    def expire_locks(self, now_ms: int) -> bool:
        """Release every ACQUIRED offset whose lock deadline has passed; True if any did."""
        changed = False
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.lock_deadline_ms <= now_ms:
                self._release(entry)
                changed = True
        if changed:
            self.advance()
        return changed

    def release_member(self, member_id: str) -> bool:
        """Release what ``member_id`` holds (its share session closed or it left the group)."""
        changed = False
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.member_id == member_id:
                self._release(entry)
                changed = True
        if changed:
            self.advance()
        return changed

    def next_lock_deadline(self) -> int | None:
        deadlines = [e.lock_deadline_ms for e in self.records.values() if e.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- the window ------------------------------------------------------------------------------

    def advance(self) -> None:
        """Move the SPSO past leading ACKNOWLEDGED/ARCHIVED offsets (their entries are dropped)."""
        while self.spso < self.speo:
            entry = self.records.get(self.spso)
            if entry is None or entry.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                self.records.pop(self.spso, None)
                self.spso += 1
            else:
                break

    def move_start(self, offset: int) -> None:
        """The log's start moved to ``offset`` (or an admin reset it): offsets below are gone."""
        if offset <= self.spso:
            return
        for o in range(self.spso, min(offset, self.speo)):
            self.records.pop(o, None)
        self.spso = offset
        self.speo = max(self.speo, offset)

    def reset(self, offset: int) -> None:
        """``kafka-share-groups --reset-offsets``: forget every in-flight record, start at ``offset``."""
        self.records.clear()
        self.spso = self.speo = offset
        self.state_epoch += 1

    def in_flight_count(self) -> int:
        return sum(1 for e in self.records.values() if e.state in (RecordState.AVAILABLE, RecordState.ACQUIRED))

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self) -> list[StateBatch]:
        """The in-flight window as runs (ACQUIRED written as AVAILABLE with its count)."""
        batches: list[StateBatch] = []
        for offset in range(self.spso, self.speo):
            entry = self.records.get(offset)
            if entry is None:
                continue
            state = RecordState.AVAILABLE if entry.state is RecordState.ACQUIRED else entry.state
            prev = batches[-1] if batches else None
            if (
                prev is not None
                and prev.last_offset == offset - 1
                and prev.delivery_state == state
                and prev.delivery_count == entry.delivery_count
            ):
                batches[-1] = StateBatch(prev.first_offset, offset, state, entry.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, int(state), entry.delivery_count))
        return batches

    @classmethod
    def restore(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch],
        *,
        state_epoch: int = 0,
        delivery_count_limit: int = 5,
        max_in_flight: int = 2000,
    ) -> SharePartition:
        """The state a snapshot describes: the SPEO is one past its last batch (or the SPSO)."""
        part = cls(
            start_offset, delivery_count_limit=delivery_count_limit, max_in_flight=max_in_flight,
            state_epoch=state_epoch,
        )  # fmt: skip
        for batch in batches:
            state = RecordState(batch.delivery_state)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                part.records[offset] = InFlight(state, batch.delivery_count)
                part.speo = max(part.speo, offset + 1)
        part.advance()
        return part


def _runs(acquired: list[Acquired]) -> list[Acquired]:
    """Merge consecutive offsets with equal delivery counts into one run."""
    out: list[Acquired] = []
    for a in acquired:
        prev = out[-1] if out else None
        if prev is not None and prev.last_offset + 1 == a.first_offset and prev.delivery_count == a.delivery_count:
            out[-1] = Acquired(prev.first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out
