"""The transaction coordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the
transaction timeout and transactional id expiry (KIP-98; Kafka documentation §4.6 "Message Delivery
Semantics", transactions; Kafka 3.7
``TransactionCoordinator``).

Rules, as Kafka 3.7:

* InitProducerId without a transactional id hands out a fresh producer id with epoch 0. With one:
  a timeout above ``transaction.max.timeout.ms`` (or ≤ 0) is INVALID_TRANSACTION_TIMEOUT; a new id
  gets a new producer id; an existing one gets its epoch bumped, which fences the previous
  producer (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH on its later requests). An Ongoing
  transaction is first aborted with a bumped epoch and the caller hears CONCURRENT_TRANSACTIONS
  (it retries and gets the next epoch); so does a caller while a commit or abort completes. An
  exhausted epoch rotates to a new producer id. KIP-360 (v3+): a producer that names its current
  id and epoch gets its epoch bumped; a retry of that bump gets the same answer; other ids or
  epochs are PRODUCER_FENCED.
* AddPartitionsToTxn/AddOffsetsToTxn need the current producer id (INVALID_PRODUCER_ID_MAPPING)
  and epoch (PRODUCER_FENCED); they move the transaction to Ongoing (CONCURRENT_TRANSACTIONS while
  a commit/abort completes).
* EndTxn may come from any connection with the transaction's ids. Ongoing → PrepareCommit/
  PrepareAbort is persisted, then markers go to every partition, then CompleteCommit/
  CompleteAbort is persisted. A retry of an outcome that already completed succeeds; the other
  outcome is INVALID_TXN_STATE; while the same outcome completes, CONCURRENT_TRANSACTIONS.
* Every state change is answered only once its ``__transaction_state`` record is committed (acks=all,
  ``TxnStateManager.persist``); meanwhile the id answers CONCURRENT_TRANSACTIONS.
* Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` Ongoing transactions older
  than their timeout are aborted with a bumped epoch (the zombie is fenced); every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle (Empty or Complete*) for
  ``transactional.id.expiration.ms`` are removed (tombstone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.coordinator.txn.listing import TxnFilter, select
from broker.coordinator.txn.manager import TxnConfig, TxnStateManager, WaitCommitted
from broker.coordinator.txn.markers import MarkerJob, TxnMarkerChannel
from broker.coordinator.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnError,
    is_epoch_exhausted,
)
from broker.coordinator.txn.records import TopicPartition, TxnState
from broker.coordinator.txn.store import TxnLog
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

S = TxnState


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """One broker's transaction coordinator; the cache, persistence and timers live in ``manager``."""

    def __init__(
        self,
        config: TxnConfig,
        store: TxnLog,
        clock_ms: Callable[[], int],
        generate_producer_id: Callable[[], int],
        markers: TxnMarkerChannel,
        *,
        wait_committed: WaitCommitted,
    ) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.manager = TxnStateManager(config, store, clock_ms, wait_committed)
        self.timed_out_aborts = 0  # transactions aborted by the coordinator for their timeout
        self.markers = markers
        self._generate = generate_producer_id
        self.manager.on_loaded = self._on_loaded
        self.manager.on_unloaded = self._on_unloaded
        self.markers.on_reschedule = self._schedule_marker_retry

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self, num_partitions: int | None, led: Mapping[int, int]) -> None:
        self.manager.start()
        self.manager.every("abort-timed-out", self.config.abort_timed_out_interval_ms, self.abort_timed_out)
        self.manager.every(
            "expire-ids",
            self.config.remove_expired_interval_ms,
            lambda: self.manager.spawn(self.expire_transactional_ids(), "expiring transactional ids"),
        )
        self.manager.set_partitions(num_partitions, led)

    def shutdown(self) -> None:
        self.markers.close()
        self.manager.shutdown()

    async def run(self) -> None:
        await self.manager.run()

    def _on_loaded(self, txns: list[TransactionMetadata]) -> None:
        """Transactions loaded in PrepareCommit/PrepareAbort get their markers (again)."""
        for txn in txns:
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(txn, commit=txn.state is S.PREPARE_COMMIT)

    def _on_unloaded(self, transactional_ids: list[str]) -> None:
        for tid in transactional_ids:
            self.markers.remove(tid)

    def _new_producer_id(self) -> int:
        try:
            return self._generate()
        except Exception as exc:
            log.exception("allocating a producer id failed")
            raise TxnError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc

    # -- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitProducerIdResult:
        try:
            return await self._init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch)
        except TxnError as exc:
            return InitProducerIdResult(exc.code)

    async def _init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> InitProducerIdResult:
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if transactional_id is None:
            return InitProducerIdResult(ErrorCode.NONE, self._new_producer_id(), 0)
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error = self.manager.status(transactional_id)
        if error is not None:
            return InitProducerIdResult(error)
        now = self.clock_ms()
        txn = self.manager.txns.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(
                transactional_id, self._new_producer_id(), timeout_ms=timeout_ms, last_update_ms=now
            )
            self.manager.txns[transactional_id] = txn
        if txn.pending_in_progress:
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._valid_producer_id(txn, *expected):
            return InitProducerIdResult(ErrorCode.PRODUCER_FENCED)
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state is S.ONGOING:
            # Abort with a bumped epoch (never handed out); the client retries and gets the next one.
            return InitProducerIdResult(await self._fence(txn) or ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise AssertionError(f"{transactional_id} in state {txn.state.kafka_name} at InitProducerId")
        if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            transit = txn.prepare_producer_id_rotation(
                self._new_producer_id(), timeout_ms, now, record_last_epoch=expected is not None
            )
        else:
            transit = txn.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
        error = await self.manager.persist(txn, transit)
        if error:
            return InitProducerIdResult(error)
        log.info("transactional id %s: producer id %d epoch %d", transactional_id, txn.producer_id, txn.producer_epoch)
        return InitProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    @staticmethod
    def _valid_producer_id(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: the id was just created, or it is the current id, or the previous one whose
        epoch ran out (a retry of the bump that rotated it)."""
        return (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == txn.producer_id
            or (producer_id == txn.last_producer_id and is_epoch_exhausted(producer_epoch))
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        """The transaction of ``transactional_id`` if these are its current ids; raises TxnError."""
        if not transactional_id:
            raise TxnError(ErrorCode.INVALID_REQUEST)
        error = self.manager.status(transactional_id)
        if error is not None:
            raise TxnError(error)
        txn = self.manager.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        return txn

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> int:
        """Add ``partitions`` to the transaction (starting it); the error code for all of them."""
        added = frozenset(partitions)
        try:
            txn = self._current(transactional_id, producer_id, producer_epoch)
        except TxnError as exc:
            return exc.code
        if txn.pending_in_progress or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is S.ONGOING and added <= txn.partitions:
            return ErrorCode.NONE
        return await self.manager.persist(txn, txn.prepare_add_partitions(added, self.clock_ms()))

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4 ``verify_only`` (KIP-890): whether each partition is in the
        transaction (INVALID_TXN_STATE if not)."""
        wanted = list(partitions)
        try:
            txn = self._current(transactional_id, producer_id, producer_epoch)
        except TxnError as exc:
            return dict.fromkeys(wanted, exc.code)
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(wanted, int(ErrorCode.CONCURRENT_TRANSACTIONS))
        return {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.INVALID_TXN_STATE for tp in wanted}

    # -- EndTxn --------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool) -> int:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error = self.manager.status(transactional_id)
        if error is not None:
            return error
        txn = self.manager.txns.get(transactional_id)
        if txn is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return await self._end(txn, producer_id, producer_epoch, commit=commit, from_client=True)

    async def _end(
        self,
        txn: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool = False,
        fence_epoch: int | None = None,
    ) -> int:
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != txn.producer_epoch) or producer_epoch < txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_in_progress and txn.pending is not S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is S.ONGOING:
            transit = txn.prepare_end(commit=commit, now_ms=self.clock_ms(), fence_epoch=fence_epoch)
            error = await self.manager.persist(txn, transit)
            if error:
                return error
            self._send_markers(txn, commit=commit)
            return ErrorCode.NONE
        if state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return ErrorCode.NONE
        if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            log.info("%s: %s in state %s", txn.transactional_id, "commit" if commit else "abort", state.kafka_name)
            return ErrorCode.INVALID_TXN_STATE
        raise AssertionError(f"{txn.transactional_id} in state {state.kafka_name} at EndTxn")

    async def _fence(self, txn: TransactionMetadata) -> int:
        """Abort an Ongoing transaction under a bumped epoch (zombie fencing); the error code
        (CONCURRENT_TRANSACTIONS if it is no longer Ongoing or another change is pending). A
        failure is logged and leaves no transition pending."""
        if txn.state is not S.ONGOING or txn.pending_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        try:
            fence = txn.prepare_fence_epoch()
            return await self._end(
                txn, fence.producer_id, fence.producer_epoch, commit=False, fence_epoch=fence.producer_epoch
            )
        except Exception:
            log.exception("aborting the transaction of %s under a new epoch failed", txn.transactional_id)
            if txn.pending is S.PREPARE_EPOCH_FENCE:
                txn.abort_transition()
            return ErrorCode.UNKNOWN_SERVER_ERROR

    # -- markers and completion ----------------------------------------------------------------

    def _send_markers(self, txn: TransactionMetadata, *, commit: bool) -> None:
        tid, pid, epoch = txn.transactional_id, txn.producer_id, txn.producer_epoch
        job = MarkerJob(
            tid,
            pid,
            epoch,
            self.manager.coordinator_epoch(tid),
            commit,
            set(txn.partitions),
            on_done=lambda: self._complete(tid, pid, epoch),
            on_abandon=lambda code: self._resend_later(txn, commit=commit),
        )
        self.markers.add(job)
        self._schedule_marker_retry()

    def _schedule_marker_retry(self) -> None:
        """Keep the one marker-retry timer at the earliest job's next attempt (never in the past,
        so that ``run_due`` cannot spin on it)."""
        key = ("marker-retry",)
        due = self.markers.next_retry_ms()
        if due is None or not self.manager.active:
            self.manager.timers.cancel(key)
            return
        due = max(due, self.clock_ms() + 1)
        current = self.manager.timers.deadline(key)
        if current is None or current > due:
            self.manager.timers.schedule(key, due, self._retry_markers)

    def _retry_markers(self) -> None:
        try:
            self.markers.retry()
        finally:
            self._schedule_marker_retry()

    def _resend_later(self, txn: TransactionMetadata, *, commit: bool) -> None:
        """Its markers were refused (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED). Kafka
        leaves the transaction in PrepareCommit/PrepareAbort until its coordinator partition is
        loaded again, which rewrites the markers; here they are written again after
        ``marker_retry_backoff_max_ms`` (while this coordinator still holds the same transaction),
        so that a transient refusal does not leave the transactional id busy forever."""
        tid, pid, epoch = txn.transactional_id, txn.producer_id, txn.producer_epoch
        prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT

        def resend() -> None:
            if self.manager.txns.get(tid) is not txn or (txn.producer_id, txn.producer_epoch) != (pid, epoch):
                return
            if txn.state is not prepared or txn.pending_in_progress or tid in self.markers.jobs:
                return
            log.warning("transaction of %s is still %s: writing its markers again", tid, prepared.kafka_name)
            self._send_markers(txn, commit=commit)

        self.manager.timers.schedule(("resend", tid), self.clock_ms() + self.config.marker_retry_backoff_max_ms, resend)

    def _complete(self, transactional_id: str, producer_id: int, producer_epoch: int, attempt: int = 0) -> None:
        """Every marker is written: persist CompleteCommit/CompleteAbort (retried with a capped
        exponential backoff on failure)."""
        self.manager.spawn(
            self._write_complete(transactional_id, producer_id, producer_epoch, attempt),
            f"completing the transaction of {transactional_id}",
        )

    async def _write_complete(self, transactional_id: str, producer_id: int, producer_epoch: int, attempt: int) -> None:
        txn = self.manager.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id or txn.producer_epoch != producer_epoch:
            return
        if txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or txn.pending_in_progress:
            return
        error = await self.manager.persist(txn, txn.prepare_complete(self.clock_ms()))
        if error and error != ErrorCode.NOT_COORDINATOR and self.manager.active:
            config = self.config
            delay = min(config.marker_retry_backoff_ms << min(attempt, 30), config.marker_retry_backoff_max_ms)
            self.manager.timers.schedule(
                ("complete", transactional_id),
                self.clock_ms() + delay,
                lambda: self._complete(transactional_id, producer_id, producer_epoch, attempt + 1),
            )

    # -- ListTransactions / DescribeTransactions (KIP-664, KIP-994) ---------------------------

    def list_transactions(self, wanted: TxnFilter) -> tuple[int, list[TransactionMetadata]]:
        """``(error code, transactions)`` of the partitions this coordinator serves (``listing``):
        COORDINATOR_NOT_AVAILABLE before start-up, COORDINATOR_LOAD_IN_PROGRESS while one loads."""
        if not self.manager.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if self.manager.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, select(self.manager.txns.values(), wanted, self.clock_ms())

    def describe_transaction(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """``(error code, transaction)``: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
        COORDINATOR_NOT_AVAILABLE as for other requests, INVALID_REQUEST for the empty id,
        TRANSACTIONAL_ID_NOT_FOUND for one unknown or Dead."""
        if not self.manager.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        status = self.manager.status(transactional_id)
        if status is not None:
            return status, None
        txn = self.manager.txns.get(transactional_id)
        if txn is None or txn.state is S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, txn

    # -- timeouts and expiry -------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Start aborting (with a bumped epoch) every Ongoing transaction older than its timeout;
        how many. The aborts' writes run on the event loop (``manager.spawn``)."""
        now = self.clock_ms() if now_ms is None else now_ms
        timed_out = [
            txn
            for txn in self.manager.txns.values()
            if txn.state is S.ONGOING and not txn.pending_in_progress and txn.start_ms + txn.timeout_ms < now
        ]
        self.timed_out_aborts += len(timed_out)  # on /metrics (broker.metrics.collectors)
        for txn in timed_out:
            log.info("aborting transaction of %s: open longer than %d ms", txn.transactional_id, txn.timeout_ms)
            # a failure is logged there; the other transactions are still aborted
            self.manager.spawn(self._fence(txn), f"aborting the timed-out transaction of {txn.transactional_id}")
        return len(timed_out)

    async def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Remove ids idle for ``transactional.id.expiration.ms`` (Empty, CompleteCommit,
        CompleteAbort): one batch of tombstones per ``__transaction_state`` partition, as Kafka's
        ``TransactionStateManager`` writes them; how many were removed."""
        now = self.clock_ms() if now_ms is None else now_ms
        horizon = now - self.config.id_expiration_ms
        by_partition: dict[int, list[TransactionMetadata]] = {}
        for txn in self.manager.txns.values():
            if txn.pending_in_progress or txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                continue
            partition = self.manager.partition_of(txn.transactional_id)
            if txn.last_update_ms > horizon or partition is None or self.manager.status(txn.transactional_id):
                continue
            by_partition.setdefault(partition, []).append(txn)
        expired = 0
        for partition, idle in by_partition.items():
            for txn in idle:
                txn.prepare_dead()
            code = await self.manager.write_tombstones(partition, [txn.transactional_id for txn in idle])
            for txn in idle:
                if code == ErrorCode.NONE and self.manager.txns.get(txn.transactional_id) is txn:
                    self.manager.txns.pop(txn.transactional_id)
                    txn.complete_dead()
                    expired += 1
                else:
                    txn.abort_transition()
        if expired:
            log.info("expired %d transactional id(s)", expired)
        return expired
