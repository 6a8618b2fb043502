"""The transaction cache and its persistence (Kafka ``TransactionStateManager``).

Owns: the transactions of the transactional ids this broker coordinates, which
``__transaction_state`` partitions it leads (with the partition's leader epoch, which is the
coordinator epoch written into markers) and whether each is loaded, the records it appends, and
the one background task (``run``) that loads partitions and fires timers. Requests for an id whose
partition is loading get COORDINATOR_LOAD_IN_PROGRESS; for an id of a partition led elsewhere,
NOT_COORDINATOR. A state change is appended to the partition and waited on until the partition's
high watermark passes it (acks=all, at most ``request.timeout.ms``) before the cache changes and
the client hears the answer (``persist``), as Kafka's ``TransactionStateManager.appendTransactionToLog``
does: a transition a failover could still lose is never acknowledged (Kafka documentation §4.7
"Replication": a record is committed once every in-sync replica has it). While the write is
pending, the transactional id answers CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass

from broker.coordinator.group.timers import Timers
from broker.coordinator.task import CoordinatorTask, PartitionStatus
from broker.coordinator.txn.metadata import TransactionMetadata, TxnTransit
from broker.coordinator.txn.records import partition_for, txn_key, txn_value
from broker.coordinator.txn.store import PartitionLoad, StoreError, TxnLog, encode_record, encode_records
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnConfig:
    """The broker settings of the transaction coordinator (Kafka's names in ``from_properties``)."""

    num_partitions: int = 50
    replication_factor: int = 1
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    marker_retry_backoff_ms: int = 100
    marker_retry_backoff_max_ms: int = 10_000
    request_timeout_ms: int = 30_000

    @classmethod
    def from_properties(cls, get: Callable[[str, object], object]) -> TxnConfig:
        def num(key: str, default: int) -> int:
            return int(str(get(key, default)))

        return cls(
            num_partitions=num("transaction.state.log.num.partitions", 50),
            replication_factor=num("transaction.state.log.replication.factor", 1),
            max_timeout_ms=num("transaction.max.timeout.ms", 900_000),
            id_expiration_ms=num("transactional.id.expiration.ms", 604_800_000),
            abort_timed_out_interval_ms=num("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000),
            remove_expired_interval_ms=num("transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000),
            request_timeout_ms=num("request.timeout.ms", 30_000),
        )


WaitCommitted = Callable[[int, int, int], Awaitable[int]]
"""``(partition, offset, timeout_ms) -> error code`` once ``offset`` of a ``__transaction_state``
partition is below its high watermark (``ReplicaManager.wait_for_acks``)."""

# Kafka's TransactionStateManager.appendTransactionToLog: the codes a failed append answers with.
_APPEND_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


class TxnStateManager(CoordinatorTask):
    """See the module docstring. Lives on the broker's event loop; no locks."""

    task_name = "transaction coordinator"
    state_topic = "__transaction_state"

    def __init__(
        self, config: TxnConfig, store: TxnLog, clock_ms: Callable[[], int], wait_committed: WaitCommitted
    ) -> None:
        self.config = config
        self.store = store
        self.clock_ms = clock_ms
        self.wait_committed = wait_committed
        self._tasks: set[asyncio.Task[object]] = set()
        self.txns: dict[str, TransactionMetadata] = {}
        self.partitions: dict[int, tuple[PartitionStatus, int]] = {}  # partition -> (status, coordinator epoch)
        self.num_partitions: int | None = None
        self.timers = Timers()
        self.active = False
        self._loads: deque[PartitionLoad] = deque()
        self._wake: asyncio.Event | None = None
        self._sleep_until: int | None = None
        self.on_loaded: Callable[[list[TransactionMetadata]], None] = lambda txns: None
        self.on_unloaded: Callable[[list[str]], None] = lambda ids: None

    # -- ownership and status ------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int | None:
        return None if not self.num_partitions else partition_for(transactional_id, self.num_partitions)

    def status(self, transactional_id: str) -> int | None:
        """None if this coordinator serves ``transactional_id`` now, else the error to answer."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_of(transactional_id)
        entry = None if partition is None else self.partitions.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        if entry[0] is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def coordinator_epoch(self, transactional_id: str) -> int:
        partition = self.partition_of(transactional_id)
        entry = None if partition is None else self.partitions.get(partition)
        return -1 if entry is None else entry[1]

    @property
    def loading(self) -> bool:
        return any(status is PartitionStatus.LOADING for status, _ in self.partitions.values())

    def set_partitions(self, num_partitions: int | None, led: Mapping[int, int]) -> None:
        """``__transaction_state`` has ``num_partitions`` (None: no topic) and this broker leads
        ``led`` (partition -> leader epoch): load new ones (or ones led at a new epoch), unload lost ones."""
        self.num_partitions = num_partitions
        wanted = dict(led) if num_partitions else {}
        for partition, (_, epoch) in list(self.partitions.items()):
            if wanted.get(partition) != epoch:
                self._unload_partition(partition)
        for partition in sorted(set(wanted) - set(self.partitions)):
            epoch = wanted[partition]
            if self.store.log_end_offset(partition) <= self.store.log_start_offset(partition):
                self.partitions[partition] = (PartitionStatus.ACTIVE, epoch)
                continue
            self.partitions[partition] = (PartitionStatus.LOADING, epoch)
            self._loads.append(PartitionLoad(self.store, partition, epoch))
            self.wake()

    def _unload_partition(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        self._loads = deque(load for load in self._loads if load.partition != partition)
        gone = [tid for tid in self.txns if self.partition_of(tid) in (partition, None)]
        for tid in gone:
            del self.txns[tid]
        if gone:
            log.info("unloaded %d transactional id(s) of partition %d", len(gone), partition)
            self.on_unloaded(gone)

    # -- loading -------------------------------------------------------------------------------

    def _finish_load(self, load: PartitionLoad) -> None:
        entry = self.partitions.get(load.partition)
        if entry is None or entry != (PartitionStatus.LOADING, load.coordinator_epoch):
            return
        loaded = [
            TransactionMetadata.from_stored(tid, stored) for tid, stored in load.result.items() if stored is not None
        ]
        for txn in loaded:
            self.txns[txn.transactional_id] = txn
        self.partitions[load.partition] = (PartitionStatus.ACTIVE, load.coordinator_epoch)
        log.info("loaded __transaction_state-%s: %d transactional id(s)", load.partition, len(loaded))
        self.on_loaded(loaded)

    # -- persistence ---------------------------------------------------------------------------

    async def persist(self, txn: TransactionMetadata, transit: TxnTransit) -> int:
        """Append ``transit`` for ``txn`` and wait until it is committed, then apply it (or drop it
        on failure); the error code. Kafka's answers: a timeout or too few in-sync replicas →
        COORDINATOR_NOT_AVAILABLE, leadership lost → NOT_COORDINATOR (the client retries, finding
        the coordinator again). If the partition was unloaded or loaded again meanwhile, nothing is
        applied: the new owner's cache is the one that counts. A cancelled wait (the request's
        connection closed) drops the transition too."""
        tid = txn.transactional_id
        partition = self.partition_of(tid)
        if partition is None:
            txn.abort_transition()
            return ErrorCode.NOT_COORDINATOR
        owner = self.partitions.get(partition)
        try:
            code = await self._append_committed(
                partition, encode_record(txn_key(tid), txn_value(transit.stored()), self.clock_ms()), tid
            )
        except asyncio.CancelledError:
            # The request went away (its connection closed) while the record waited for the ISR:
            # drop the transition as a timed-out wait does, so the id does not stay pending
            # (CONCURRENT_TRANSACTIONS) forever; the client retries.
            txn.abort_transition()
            raise
        if self.partitions.get(partition) != owner or self.txns.get(tid) is not txn:
            txn.abort_transition()
            return ErrorCode.NOT_COORDINATOR
        if code:
            log.warning("persisting %s of %s failed: error %s", transit.state.kafka_name, tid, code)
            txn.abort_transition()
            return code
        txn.complete_transition(transit)
        return ErrorCode.NONE

    async def write_tombstones(self, partition: int, transactional_ids: list[str]) -> int:
        """Append the tombstones that remove ``transactional_ids`` (all of ``partition``) as one
        batch and wait until it is committed; the error code."""
        now = self.clock_ms()
        batch = encode_records([(txn_key(tid), None) for tid in transactional_ids], now)
        code = await self._append_committed(partition, batch, f"{len(transactional_ids)} expired id(s)")
        if code:
            log.warning(
                "expiring %d transactional id(s) of partition %d failed: error %s",
                len(transactional_ids),
                partition,
                code,
            )
        return code

    async def _append_committed(self, partition: int, record: bytes, transactional_id: str) -> int:
        try:
            offset = self.store.append(partition, record)
        except StoreError as exc:
            log.warning("appending to %s-%s for %s failed: %s", self.state_topic, partition, transactional_id, exc)
            return _APPEND_ERRORS.get(exc.code, exc.code)
        except Exception:  # whatever failed, the transition must not stay pending (CONCURRENT_TRANSACTIONS forever)
            log.exception("appending to %s-%s for %s failed", self.state_topic, partition, transactional_id)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        try:
            code = await self.wait_committed(partition, offset, self.config.request_timeout_ms)
        except Exception:
            log.exception("waiting for %s-%s to commit offset %s failed", self.state_topic, partition, offset)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return _APPEND_ERRORS.get(code, code)

    def spawn(self, work: Coroutine[object, object, object], name: str) -> None:
        """Run ``work`` (a timer's or a marker callback's write) on the event loop; kept until done
        and cancelled by ``shutdown``. Its failure is logged."""

        def finished(task: asyncio.Task[object]) -> None:
            self._tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("%s failed", name, exc_info=task.exception())

        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(finished)

    async def settle(self) -> None:
        """Wait until every spawned write finished (tests drive the coordinator this way)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def every(self, key: str, interval_ms: int, action: Callable[[], object]) -> None:
        """Run ``action`` every ``interval_ms`` on the task (first run one interval from now)."""

        def fire() -> None:
            try:
                action()
            finally:
                self.every(key, interval_ms, action)

        self.timers.schedule((key,), self.clock_ms() + max(interval_ms, 1), fire)

    def start(self) -> None:
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        self.txns.clear()
        self.partitions.clear()
        self._loads.clear()
        self.timers.clear()
        for task in list(self._tasks):
            task.cancel()
