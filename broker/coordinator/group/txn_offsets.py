"""Transactional offset commits of a group (KIP-98 TxnOffsetCommit, KIP-447; Kafka ``GroupMetadata``'s
pending transactional offsets).

A TxnOffsetCommit is appended to ``__consumer_offsets`` as a transactional batch of the producer
and staged here per producer id: pending, not visible to OffsetFetch. When the transaction's
COMMIT marker lands on that offsets partition the staged offsets become the committed ones, unless
a plain commit of the same partition was appended later (the later record in the log wins, as
compaction would keep it); an ABORT marker drops them. OffsetFetch with ``require_stable``
(KIP-447) answers UNSTABLE_OFFSET_COMMIT for a partition with a staged offset.

``PendingOffsets`` is the per-group table; ``position`` is the log offset of the record's batch
(None while the append is under way).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinator.group.records import CommittedOffset

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class StagedOffset:
    value: CommittedOffset
    position: int | None


@dataclass
class PendingOffsets:
    """Staged transactional offsets of one group, by producer id."""

    by_producer: dict[int, dict[TopicPartition, StagedOffset]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    def stage(
        self, producer_id: int, offsets: dict[TopicPartition, CommittedOffset]
    ) -> dict[TopicPartition, StagedOffset | None]:
        """Stage ``offsets`` (position unknown until ``appended``); returns what they replaced,
        for ``restore`` should the append fail."""
        staged = self.by_producer.setdefault(producer_id, {})
        previous = {tp: staged.get(tp) for tp in offsets}
        for tp, value in offsets.items():
            staged[tp] = StagedOffset(value, None)
        return previous

    def restore(self, producer_id: int, previous: dict[TopicPartition, StagedOffset | None]) -> None:
        """The append of a ``stage`` failed: put back what it replaced. An earlier TxnOffsetCommit
        of the same producer and partition is in the log and stays staged (its transaction's
        marker still decides it)."""
        staged = self.by_producer.get(producer_id)
        if staged is None:
            return
        for tp, entry in previous.items():
            if entry is None:
                staged.pop(tp, None)
            else:
                staged[tp] = entry
        if not staged:
            del self.by_producer[producer_id]

    def appended(self, producer_id: int, offsets: dict[TopicPartition, CommittedOffset], position: int | None) -> None:
        """The staged records are in the log at ``position``."""
        staged = self.by_producer.get(producer_id)
        if staged is None:
            return
        for tp, value in offsets.items():
            current = staged.get(tp)
            if current is not None and current.value == value:
                staged[tp] = StagedOffset(value, position)

    def drop(self, producer_id: int, partitions: list[TopicPartition]) -> None:
        """Forget what the producer staged for ``partitions``."""
        staged = self.by_producer.get(producer_id)
        if staged is None:
            return
        for tp in partitions:
            staged.pop(tp, None)
        if not staged:
            del self.by_producer[producer_id]

    def has(self, tp: TopicPartition) -> bool:
        return any(tp in staged for staged in self.by_producer.values())

    def has_producer(self, producer_id: int) -> bool:
        return producer_id in self.by_producer

    def complete(
        self,
        producer_id: int,
        commit: bool,
        offsets: dict[TopicPartition, CommittedOffset],
        positions: dict[TopicPartition, int],
    ) -> int:
        """Apply the producer's COMMIT (into ``offsets``/``positions``) or ABORT; how many applied."""
        staged = self.by_producer.pop(producer_id, None)
        if not staged or not commit:
            return 0
        applied = 0
        for tp, entry in staged.items():
            current = positions.get(tp)
            if tp in offsets and current is not None and entry.position is not None and current > entry.position:
                continue  # a plain commit appended after this one stays
            offsets[tp] = entry.value
            if entry.position is not None:
                positions[tp] = entry.position
            applied += 1
        return applied

    def remove(self, partitions: list[TopicPartition]) -> None:
        """Offsets of these partitions were deleted: drop what is staged for them too."""
        for producer_id in list(self.by_producer):
            self.drop(producer_id, partitions)
