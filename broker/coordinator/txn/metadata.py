"""One transactional id's state and the one owner of its transitions (Kafka ``TransactionMetadata``).

Pure: no clock reads, no I/O. Every change is two-phase, as in Kafka: a ``prepare_*`` method
checks the move, marks it pending and returns the ``TxnTransit`` (the whole target state) for the
coordinator to persist in ``__transaction_state``; ``complete_transition`` applies it once the
record is in the log ("persist before you reply", docs/architecture.md),
``abort_transition`` drops
it when the append failed. While a transition is pending no other may start.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from broker.coordinator.txn.records import StoredTxn, TopicPartition, TxnState
from pyspark_log.wire.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue

T = TxnState
VALID_TARGETS: dict[TxnState, frozenset[TxnState]] = {
    T.EMPTY: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.ONGOING: frozenset({T.ONGOING, T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE}),
    T.PREPARE_EPOCH_FENCE: frozenset({T.PREPARE_ABORT}),
    T.PREPARE_COMMIT: frozenset({T.COMPLETE_COMMIT}),
    T.PREPARE_ABORT: frozenset({T.COMPLETE_ABORT}),
    T.COMPLETE_COMMIT: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.COMPLETE_ABORT: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.DEAD: frozenset(),
}


class IllegalTxnTransition(RuntimeError):
    """A move the transition table forbids, or a second transition while one is pending: a bug."""


class TxnError(Exception):
    """A request the current state refuses; ``code`` is the Kafka error the client gets."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"error {code}")
        self.code = code


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch free so that fencing can always bump once more."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The complete target of one transition (what is written to the log)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int

    def stored(self) -> StoredTxn:
        return StoredTxn(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            self.partitions,
            self.update_ms,
            self.start_ms,
        )


@dataclass(eq=False)
class TransactionMetadata:
    """A transactional id's transaction; ``_prepare`` is the one place a transition starts.

    Transition table (rows: from, columns: to; PrepareEpochFence is never persisted: it is the
    pending step of fencing an Ongoing transaction, which continues as PrepareAbort)::

        from \\ to          Empty Ongoing PrepCommit PrepAbort ComplCommit ComplAbort Dead Fence
        Empty               yes   yes     -          -         -           -          yes  -
        Ongoing             -     yes     yes        yes       -           -          -    yes
        PrepareEpochFence   -     -       -          yes       -           -          -    -
        PrepareCommit       -     -       -          -         yes         -          -    -
        PrepareAbort        -     -       -          -         -           yes        -    -
        CompleteCommit      yes   yes     -          -         -           -          yes  -
        CompleteAbort       yes   yes     -          -         -           -          yes  -
        Dead                -     -       -          -         -           -          -    -

    What drives each move: InitProducerId (→ Empty with a bumped epoch or a new producer id; on
    Ongoing → PrepareEpochFence → PrepareAbort), AddPartitionsToTxn/AddOffsetsToTxn (→ Ongoing),
    EndTxn (Ongoing → PrepareCommit/PrepareAbort), all markers written (→ CompleteCommit/
    CompleteAbort), the transaction timeout (Ongoing → PrepareEpochFence → PrepareAbort) and
    transactional id expiry (→ Dead, then a tombstone). Illegal moves raise ``IllegalTxnTransition``.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    failed_epoch_fence: bool = False  # a fence's append failed: its bumped epoch was never handed out
    _fencing: bool = False  # the pending PrepareAbort completes an epoch fence

    @classmethod
    def from_stored(cls, transactional_id: str, stored: StoredTxn) -> TransactionMetadata:
        return cls(
            transactional_id,
            stored.producer_id,
            stored.producer_epoch,
            stored.timeout_ms,
            stored.state,
            set(stored.partitions),
            stored.start_ms,
            stored.last_update_ms,
        )

    # -- queries -------------------------------------------------------------------------------

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (T.ONGOING, T.PREPARE_ABORT, T.PREPARE_COMMIT)

    def stored(self) -> StoredTxn:
        return self._transit().stored()

    # -- the one owner of transitions ----------------------------------------------------------

    def _transit(self, **changes: object) -> TxnTransit:
        base = TxnTransit(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
        )
        return replace(base, **changes)  # type: ignore[arg-type]

    def _prepare(self, target: TxnState, **changes: object) -> TxnTransit:
        source = T.PREPARE_EPOCH_FENCE if self.pending is T.PREPARE_EPOCH_FENCE else self.state
        if self.pending is not None and self.pending is not T.PREPARE_EPOCH_FENCE:
            raise IllegalTxnTransition(
                f"{self.transactional_id}: {target.kafka_name} while {self.pending.kafka_name} is pending"
            )
        if target not in VALID_TARGETS[source]:
            raise IllegalTxnTransition(f"{self.transactional_id}: {source.kafka_name} -> {target.kafka_name}")
        transit = self._transit(state=target, **changes)
        if target is not T.DEAD and transit.producer_epoch < 0:
            raise IllegalTxnTransition(f"{self.transactional_id}: epoch {transit.producer_epoch}")
        if transit.producer_id < 0:
            raise IllegalTxnTransition(f"{self.transactional_id}: producer id {transit.producer_id}")
        self.pending = target
        return transit

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply ``transit`` after its record was appended to ``__transaction_state``."""
        if self.pending is not transit.state:
            raise IllegalTxnTransition(
                f"{self.transactional_id}: completing {transit.state.kafka_name}, pending "
                f"{self.pending.kafka_name if self.pending else None}"
            )
        if transit.state in (T.DEAD, T.PREPARE_EPOCH_FENCE):
            raise IllegalTxnTransition(f"{self.transactional_id}: {transit.state.kafka_name} is never completed")
        bumped = transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )
        same = transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        if not same and not (transit.state is T.EMPTY and bumped):
            raise IllegalTxnTransition(f"{self.transactional_id}: epoch {transit.producer_epoch} does not follow")
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.update_ms
        self.state = transit.state
        self.pending = None
        self._fencing = False

    def abort_transition(self) -> None:
        """The append of the pending transition failed: nothing changes (a failed fence keeps its
        bumped epoch so that the next fence does not bump twice, as in Kafka)."""
        if self._fencing:
            self.failed_epoch_fence = True
        self._fencing = False
        self.pending = None

    # -- InitProducerId ------------------------------------------------------------------------

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit:
        """Empty with the next epoch (KIP-360: a retry of a bump that already happened returns
        the current epoch again; an unrelated epoch is fenced)."""
        if self.epoch_exhausted:
            raise IllegalTxnTransition(f"{self.transactional_id}: producer epoch exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise TxnError(ErrorCode.PRODUCER_FENCED, f"epoch {expected_epoch} is not {self.producer_epoch}")
        return self._prepare(
            T.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, *, record_last_epoch: bool
    ) -> TxnTransit:
        """Empty under a new producer id with epoch 0 (the epoch of the old one is exhausted)."""
        if self.has_pending_transaction:
            raise IllegalTxnTransition(f"{self.transactional_id}: rotating producer ids mid-transaction")
        return self._prepare(
            T.EMPTY,
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            update_ms=now_ms,
        )

    def prepare_fence_epoch(self) -> TxnTransit:
        """Start fencing an Ongoing transaction: the epoch goes up by one (not again after a failed
        fence) and the transaction is then aborted with ``prepare_end(commit=False)``."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTxnTransition(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(T.PREPARE_EPOCH_FENCE, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starts = self.state in (T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT)
        return self._prepare(
            T.ONGOING,
            partitions=frozenset(self.partitions) | added,
            start_ms=now_ms if starts else self.start_ms,
            update_ms=now_ms,
        )

    # -- EndTxn and markers --------------------------------------------------------------------

    def prepare_end(self, *, commit: bool, now_ms: int, fence_epoch: int | None = None) -> TxnTransit:
        """Ongoing → PrepareCommit/PrepareAbort. ``fence_epoch``: this abort completes a fence
        (``prepare_fence_epoch``), whose bumped epoch becomes the transaction's."""
        if fence_epoch is not None:
            if self.pending is not T.PREPARE_EPOCH_FENCE or commit:
                raise IllegalTxnTransition(f"{self.transactional_id}: no epoch fence to abort")
            self.producer_epoch = fence_epoch
            self.last_producer_epoch = NO_PRODUCER_EPOCH
        elif self.pending is T.PREPARE_EPOCH_FENCE:
            raise IllegalTxnTransition(f"{self.transactional_id}: an epoch fence is pending")
        target = T.PREPARE_COMMIT if commit else T.PREPARE_ABORT
        transit = self._prepare(target, update_ms=now_ms)
        self._fencing = fence_epoch is not None
        return transit

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """PrepareCommit → CompleteCommit, PrepareAbort → CompleteAbort (all markers written)."""
        self.failed_epoch_fence = False  # the abort that ended a fence is in the log
        if self.state is T.PREPARE_COMMIT:
            return self._prepare(T.COMPLETE_COMMIT, partitions=frozenset(), update_ms=now_ms)
        if self.state is T.PREPARE_ABORT:
            return self._prepare(T.COMPLETE_ABORT, partitions=frozenset(), update_ms=now_ms)
        raise IllegalTxnTransition(f"{self.transactional_id}: completing from {self.state.kafka_name}")

    def prepare_dead(self) -> TxnTransit:
        """The transactional id expired; the coordinator writes a tombstone, then ``complete_dead``."""
        return self._prepare(T.DEAD, partitions=frozenset())

    def complete_dead(self) -> None:
        """The tombstone is in the log: the id is gone (the coordinator drops it from its cache)."""
        if self.pending is not T.DEAD:
            raise IllegalTxnTransition(f"{self.transactional_id}: no pending expiry")
        self.state, self.pending = T.DEAD, None
        self.partitions.clear()
