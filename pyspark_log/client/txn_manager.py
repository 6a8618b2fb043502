"""The producer's transaction manager: producer id and epoch, per-partition sequence numbers and,
with ``transactional.id``, the transaction state machine (KIP-98; KIP-360 epoch bumps; Kafka documentation
§3.3 "Producer Configs" (`enable.idempotence`) and §4.6 "Message Delivery Semantics" (transactions)). It
follows the semantics of Kafka 3.x's Java
``TransactionManager``. Pure: no I/O, no asyncio; the producer and its sender call it on their loop.

States, and the only legal moves (``transition_to`` raises ``IllegalTransactionStateError`` for
any other; every state may move to FATAL_ERROR)::

    from               to
    UNINITIALIZED      INITIALIZING
    INITIALIZING       READY, UNINITIALIZED (InitProducerId failed; init may be called again)
    READY              IN_TRANSACTION, INITIALIZING (idempotent producer: new producer id)
    IN_TRANSACTION     COMMITTING, ABORTING, PREPARED, ABORTABLE_ERROR
    COMMITTING         READY, ABORTABLE_ERROR
    ABORTING           READY, INITIALIZING (epoch bump after the abort, KIP-360)
    ABORTABLE_ERROR    ABORTING, ABORTABLE_ERROR
    PREPARED           (none: the producer may only be closed; the transaction stays open)
    FATAL_ERROR        (none)

An idempotent producer without ``transactional.id`` only uses UNINITIALIZED, INITIALIZING, READY
and FATAL_ERROR.

Sequence numbers (per partition, per producer id and epoch) are assigned when a batch is drained
for sending, not when records are appended, so a batch never waits behind a sequence that was
not sent. A partition's *in-flight* batches are those with a sequence that have not completed
(sent, or queued again for a retry). Ordering under retries, as the Java client does it:

* a retried batch goes back into its queue in sequence order and is only sent again when it is
  the partition's first in-flight batch (so retries run one request at a time);
* a new batch is not drained while the partition still has in-flight batches of an older
  producer id or epoch, nor while the fate of a failed batch is unresolved;
* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next expected one is retried (an
  earlier batch is being retried); for the next expected one it is a real gap: the idempotent
  producer bumps its epoch locally and re-sequences the partition's in-flight batches from 0 (the
  broker accepts a new epoch at sequence 0); a transactional producer's transaction becomes
  abortable and the epoch is bumped through InitProducerId after the abort;
* UNKNOWN_PRODUCER_ID (the broker lost the producer's state, e.g. by retention) is handled the
  same way; DUPLICATE_SEQUENCE_NUMBER counts as success, and so does OUT_OF_ORDER_SEQUENCE_NUMBER
  for a batch whose sequences a later acknowledged batch of the same epoch has passed
  (``written_before``: it was written, and its metadata left the broker's five-batch window);
* a batch that failed after being sent (retries or ``delivery.timeout.ms`` exhausted) leaves its
  sequence *unresolved* until the partition's in-flight batches complete: if a later batch was
  acknowledged the failed one was written, otherwise the epoch is bumped (it was not).

PRODUCER_FENCED / INVALID_PRODUCER_EPOCH are fatal (``ProducerFencedError``).
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable, Iterable

from pyspark_log.client.errors import (
    IllegalTransactionStateError,
    ProducerFencedError,
    TransactionAbortableError,
    UnsupportedFeatureError,
)
from pyspark_log.client.producer_batch import ProducerBatch
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from pyspark_log.wire import ErrorCode, KafkaError

MAX_PRODUCER_EPOCH = 32767
MAX_SEQUENCE = 2**31 - 1
FENCING_ERRORS = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
FATAL_ERRORS = FENCING_ERRORS | {
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_TXN_STATE,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
}


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "Committing"
    ABORTING = "Aborting"
    PREPARED = "Prepared"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState
_MOVES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.INITIALIZING}),
    S.INITIALIZING: frozenset({S.READY, S.UNINITIALIZED}),
    S.READY: frozenset({S.IN_TRANSACTION, S.INITIALIZING}),
    S.IN_TRANSACTION: frozenset({S.COMMITTING, S.ABORTING, S.PREPARED, S.ABORTABLE_ERROR}),
    S.COMMITTING: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.ABORTING: frozenset({S.READY, S.INITIALIZING}),
    S.ABORTABLE_ERROR: frozenset({S.ABORTING, S.ABORTABLE_ERROR}),
    S.PREPARED: frozenset(),
    S.FATAL_ERROR: frozenset(),
}


def fatal_error(code: ErrorCode, message: str) -> KafkaError:
    """The exception a fatal error code surfaces as (fencing: ``ProducerFencedError``)."""
    if code in FENCING_ERRORS:
        return ProducerFencedError(f"{message}: another producer with a newer epoch exists (fenced)", code)
    return KafkaError(code, message)


class PartitionSequences:
    """Sequence bookkeeping of one partition for one producer id and epoch."""

    __slots__ = (
        "first_acked_sequence",
        "in_flight",
        "last_acked_offset",
        "last_acked_sequence",
        "next_sequence",
        "producer_epoch",
        "producer_id",
    )

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.first_acked_sequence = -1
        self.last_acked_sequence = -1
        self.last_acked_offset = -1
        self.in_flight: list[ProducerBatch] = []  # by base sequence

    def add(self, batch: ProducerBatch) -> None:
        if batch not in self.in_flight:
            bisect.insort(self.in_flight, batch, key=lambda b: b.base_sequence)

    def remove(self, batch: ProducerBatch) -> None:
        if batch in self.in_flight:
            self.in_flight.remove(batch)


def last_sequence(batch: ProducerBatch) -> int:
    return (batch.base_sequence + batch.record_count - 1) % (MAX_SEQUENCE + 1)


class TransactionManager:
    """Owns the producer id/epoch, the sequences and the transaction state (see the module doc)."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60000) -> None:
        self.transactional_id = transactional_id
        self.transactional = transactional_id is not None
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.last_error: KafkaError | None = None
        self.epoch_bump_required = False
        self.on_error: Callable[[KafkaError], None] | None = None
        # called after every change of ``state`` (the producer's lane gate listens)
        self.on_transition: Callable[[], None] | None = None
        self._parts: dict[TopicPartition, PartitionSequences] = {}
        self._unresolved: dict[TopicPartition, int] = {}
        self._rewrite: set[TopicPartition] = set()
        # Transaction contents: partitions the coordinator knows, and those still to add.
        self.partitions_in_txn: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.offsets_added = False

    def __repr__(self) -> str:
        ids = f"pid={self.producer_id}, epoch={self.producer_epoch}"
        return f"TransactionManager({self.transactional_id!r}, {self.state.value}, {ids})"

    # -- states ----------------------------------------------------------------------------------

    def transition_to(self, target: TxnState, error: KafkaError | None = None) -> None:
        if target is TxnState.FATAL_ERROR:
            if self.state is not TxnState.FATAL_ERROR:
                self.state = target
                self.last_error = error
                self._transitioned()
                self._notify(error)
            return
        if target not in _MOVES[self.state]:
            raise IllegalTransactionStateError(
                f"invalid transition of transactional producer {self.transactional_id!r}: "
                f"{self.state.value} -> {target.value}"
            )
        self.state = target
        self._transitioned()
        if target is TxnState.ABORTABLE_ERROR:
            self.last_error = error
            self._notify(error)
        elif target in (TxnState.READY, TxnState.IN_TRANSACTION):
            self.last_error = None

    def _transitioned(self) -> None:
        if self.on_transition is not None:
            self.on_transition()

    def _notify(self, error: KafkaError | None) -> None:
        if self.on_error is not None and error is not None:
            self.on_error(error)

    def fail(self, exc: KafkaError) -> None:
        """An error of a transactional request or a produce: fatal ones end the producer, the rest
        make the current transaction abortable (an idempotent producer only knows fatal)."""
        if exc.code in FATAL_ERRORS or isinstance(exc, ProducerFencedError | UnsupportedFeatureError):
            self.transition_to(TxnState.FATAL_ERROR, exc)
        elif self.transactional and self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTABLE_ERROR,
        ):
            self.transition_to(TxnState.ABORTABLE_ERROR, exc)

    @property
    def has_fatal_error(self) -> bool:
        return self.state is TxnState.FATAL_ERROR

    def error_to_raise(self, action: str) -> KafkaError:
        """The exception for ``action`` refused because of an earlier error."""
        err = self.last_error
        if self.state is TxnState.FATAL_ERROR:
            if isinstance(err, ProducerFencedError):
                return err
            code = err.code if err is not None else ErrorCode.UNKNOWN_SERVER_ERROR
            return KafkaError(code, f"cannot {action}: the producer hit a fatal error and must be closed: {err}")
        code = err.code if err is not None else ErrorCode.UNKNOWN_SERVER_ERROR
        return TransactionAbortableError(code, f"cannot {action}: abort_transaction() first; the cause: {err}")

    def require(self, action: str, *allowed: TxnState) -> None:
        """Raise unless the state is one of ``allowed`` (errors raise the recorded cause)."""
        if self.state in allowed:
            return
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            raise self.error_to_raise(action)
        need = " or ".join(s.value for s in allowed)
        raise IllegalTransactionStateError(
            f"cannot {action} in state {self.state.value} (needs {need}); transactional.id={self.transactional_id!r}"
        )

    def check_send(self) -> None:
        """What ``send`` checks first (Kafka's ``failIfNotReadyForSend``)."""
        if self.state is TxnState.FATAL_ERROR or self.state is TxnState.ABORTABLE_ERROR:
            raise self.error_to_raise("send")
        if self.transactional and self.state is not TxnState.IN_TRANSACTION:
            raise IllegalTransactionStateError(
                f"cannot send in state {self.state.value}: call begin_transaction() first "
                f"(init_transactions() once before that)"
            )

    # -- producer id and epoch -------------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A new id or epoch from InitProducerId: every partition starts again at sequence 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._parts.clear()
        self._unresolved.clear()
        self._rewrite.clear()
        self.epoch_bump_required = False

    def begin(self) -> None:
        self.require("begin a transaction", TxnState.READY)
        self.transition_to(TxnState.IN_TRANSACTION)
        self.partitions_in_txn.clear()
        self.pending_partitions.clear()
        self.offsets_added = False

    @property
    def txn_started(self) -> bool:
        """Whether the coordinator knows of the transaction (partitions or offsets were added)."""
        return bool(self.partitions_in_txn or self.offsets_added)

    # -- partitions of the transaction -----------------------------------------------------------

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """Note ``tp`` for AddPartitionsToTxn; True if it is newly pending."""
        if not self.transactional or tp in self.partitions_in_txn or tp in self.pending_partitions:
            return False
        self.pending_partitions.add(tp)
        return True

    def partitions_added(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.pending_partitions.discard(tp)
            self.partitions_in_txn.add(tp)

    # -- the accumulator's hooks -----------------------------------------------------------------

    def _entry(self, tp: TopicPartition) -> PartitionSequences:
        entry = self._parts.get(tp)
        if entry is None:
            entry = self._parts[tp] = PartitionSequences(self.producer_id, self.producer_epoch)
        return entry

    def _stale(self, entry: PartitionSequences) -> bool:
        return (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch)

    def may_drain(self, batch: ProducerBatch, leader: int) -> bool:
        """Whether the head batch of a partition may be sent now, to ``leader`` (Kafka's
        ``shouldStopDrainBatchesForPartition``, negated). Unlike Kafka's, a new batch also waits
        while a batch of the partition is in flight to another node (the leader moved): a new
        leader that never saw this producer id accepts any first sequence (KIP-360), so the new
        batch could be written ahead of the earlier ones, which would then be refused as out of
        sequence."""
        if self.producer_id < 0 or self.state is TxnState.FATAL_ERROR:
            return False
        tp = batch.tp
        if self.transactional and tp not in self.partitions_in_txn:
            return False
        entry = self._parts.get(tp)
        if entry is None or not entry.in_flight:
            return tp not in self._unresolved or batch.base_sequence != NO_SEQUENCE
        if batch.base_sequence == NO_SEQUENCE:
            return (
                not self._stale(entry)
                and tp not in self._unresolved
                and all(sent.sent_to == leader for sent in entry.in_flight)
            )
        return batch.base_sequence == entry.in_flight[0].base_sequence

    def on_drain(self, batch: ProducerBatch) -> None:
        """Give a batch drained for the first time its producer id, epoch and base sequence."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        entry = self._entry(batch.tp)
        if self._stale(entry) and not entry.in_flight:
            entry.__init__(self.producer_id, self.producer_epoch)  # type: ignore[misc]
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.producer_epoch
        batch.base_sequence = entry.next_sequence
        batch.transactional = self.transactional
        entry.next_sequence = (entry.next_sequence + batch.record_count) % (MAX_SEQUENCE + 1)
        entry.add(batch)

    def on_split(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """A batch too large for the broker became ``parts``: they take over its sequence range."""
        entry = self._parts.get(batch.tp)
        if entry is None or batch.base_sequence == NO_SEQUENCE:
            return
        entry.remove(batch)
        seq = batch.base_sequence
        for part in parts:
            part.producer_id, part.producer_epoch = batch.producer_id, batch.producer_epoch
            part.base_sequence, part.transactional = seq, batch.transactional
            seq += part.record_count
            entry.add(part)

    # -- produce responses -----------------------------------------------------------------------

    def _is_next_sequence(self, batch: ProducerBatch) -> bool:
        entry = self._parts.get(batch.tp)
        return entry is not None and entry.last_acked_sequence + 1 == batch.base_sequence

    def written_before(self, batch: ProducerBatch) -> bool:
        """Whether the broker has ``batch`` although it answered OUT_OF_ORDER_SEQUENCE_NUMBER:
        batches of the same producer id and epoch were acknowledged both before it (so the
        partition knew the producer id) and at or past its last sequence, and a partition that
        knows a producer id accepts its sequences only in order. Its metadata has left the
        broker's window of the last five batches (otherwise the answer is
        DUPLICATE_SEQUENCE_NUMBER), so the offset is unknown. Bumping the epoch and sending it
        again would write it twice. An earlier acknowledgement is needed: a partition that never
        saw the producer id accepts any first sequence (KIP-360), so a later batch acknowledged
        alone proves nothing."""
        entry = self._parts.get(batch.tp)
        return (
            entry is not None
            and batch.base_sequence != NO_SEQUENCE
            and self.batch_is_current(batch)
            and not self._stale(entry)
            and 0 <= entry.first_acked_sequence < batch.base_sequence
            and entry.last_acked_sequence >= batch.base_sequence + batch.record_count - 1
        )

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self.epoch_bump_required = True
        if not self.transactional:
            self._rewrite.add(tp)

    def can_retry(self, batch: ProducerBatch, code: ErrorCode, log_start_offset: int = -1) -> bool:
        """Whether a batch that failed with ``code`` may be sent again (Kafka's
        ``TransactionManager.canRetry``; the sender also checks retries and the delivery timeout)."""
        tp = batch.tp
        if code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or batch.sequence_reset:
                return True
            entry = self._parts.get(tp)
            if entry is not None and entry.last_acked_offset < log_start_offset:
                if self.transactional:
                    self._restart_sequences(tp)
                else:
                    self.request_epoch_bump(tp)
                return True
            if not self.transactional:
                self.request_epoch_bump(tp)
                return True
            return False
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if tp not in self._unresolved and (batch.sequence_reset or not self._is_next_sequence(batch)):
                return True
            if not self.transactional:
                unresolved = self._unresolved.get(tp)
                if unresolved is None or batch.base_sequence == (unresolved + 1) % (MAX_SEQUENCE + 1):
                    self.request_epoch_bump(tp)
                return True
            return False
        return code.retriable

    def batch_is_current(self, batch: ProducerBatch) -> bool:
        """Only a batch of the current producer id and epoch may be retried."""
        return (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.producer_epoch)

    def on_completed(self, batch: ProducerBatch, base_offset: int) -> None:
        entry = self._parts.get(batch.tp)
        if entry is None:
            return
        entry.remove(batch)
        if batch.base_sequence != NO_SEQUENCE and not self._stale(entry) and self.batch_is_current(batch):
            if entry.first_acked_sequence < 0 or batch.base_sequence < entry.first_acked_sequence:
                entry.first_acked_sequence = batch.base_sequence
            entry.last_acked_sequence = max(entry.last_acked_sequence, last_sequence(batch))
            if base_offset >= 0:
                entry.last_acked_offset = max(entry.last_acked_offset, base_offset + batch.record_count - 1)

    def on_failed(self, batch: ProducerBatch, exc: KafkaError, *, rejected: bool) -> None:
        """A batch failed for good. ``rejected``: the broker refused it (it was not written);
        otherwise (retries or time ran out) its fate is unknown until later batches resolve it."""
        entry = self._parts.get(batch.tp)
        if entry is not None:
            entry.remove(batch)
        self.fail(exc)
        if self.has_fatal_error or batch.base_sequence == NO_SEQUENCE:
            return
        if self.transactional:
            self.epoch_bump_required = True
            return
        if not self.batch_is_current(batch):
            return
        if rejected or exc.code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID):
            self.request_epoch_bump(batch.tp)
        else:
            seq = last_sequence(batch)
            self._unresolved[batch.tp] = max(seq, self._unresolved.get(batch.tp, -1))

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions whose in-flight batches have all completed."""
        for tp in [tp for tp in self._unresolved if not self._entry(tp).in_flight]:
            seq = self._unresolved.pop(tp)
            if self._entry(tp).last_acked_sequence >= seq:
                continue
            self.request_epoch_bump(tp)

    def bump_idempotent_epoch(self) -> bool:
        """Apply a requested epoch bump of an idempotent producer: the epoch goes up by one (no
        round trip; KIP-360) and the affected partitions' in-flight batches are re-sequenced
        from 0. Returns True when the epoch is exhausted and a new producer id is needed."""
        if self.transactional or not self.epoch_bump_required or self.producer_id < 0:
            return False
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.set_producer_id_and_epoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return True
        self.producer_epoch += 1
        for tp in self._rewrite:
            self._restart_sequences(tp)
            self._unresolved.pop(tp, None)
        self._rewrite.clear()
        self.epoch_bump_required = False
        return False

    def _restart_sequences(self, tp: TopicPartition) -> None:
        entry = self._entry(tp)
        seq = 0
        for batch in entry.in_flight:
            batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
            batch.base_sequence = seq
            batch.sequence_reset = True
            batch.encoded = None
            seq += batch.record_count
        entry.producer_id, entry.producer_epoch = self.producer_id, self.producer_epoch
        entry.next_sequence = seq
        entry.first_acked_sequence = -1
        entry.last_acked_sequence = -1

    def in_flight_count(self, tp: TopicPartition) -> int:
        entry = self._parts.get(tp)
        return len(entry.in_flight) if entry is not None else 0

    def next_sequence(self, tp: TopicPartition) -> int:
        entry = self._parts.get(tp)
        return entry.next_sequence if entry is not None else 0
