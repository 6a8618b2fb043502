"""Transactional requests and flows of the producer, and ``complete_transaction`` (KIP-98; Kafka documentation
§4.6 "Message Delivery Semantics", transactions; Kafka 3.x Java producer semantics).

* ``TxnRequests`` sends InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
  EndTxn to the right coordinator (FindCoordinator key type 1 for a transactional id, 0 for a
  group), finding it again after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or a broken
  connection, and retrying COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS and other
  retriable errors with backoff. Other errors are raised (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH
  as ``ProducerFencedError``).
* ``ProducerTransactions`` is the flow behind ``AsyncProducer.init_transactions`` & co. Each call
  waits at most its ``timeout_ms`` (default ``max.block.ms``); the operation itself goes on, and
  calling the same method again waits for it (Kafka's "retry the call after a timeout"). Another
  transactional call while one is pending raises ``IllegalTransactionStateError``.
  Partitions are added to the transaction (AddPartitionsToTxn) by a background task before their
  first batch is drained. ``commit_transaction`` flushes, then EndTxn(commit);
  ``abort_transaction`` fails the batches not yet sent, waits for those in flight, EndTxn(abort),
  and, when a produce error left sequence numbers unusable, bumps the epoch with InitProducerId
  carrying the current id and epoch (KIP-360). ``prepare_transaction`` flushes and returns a
  ``TransactionHandle``; after it the producer may only be closed and ``close`` leaves the
  transaction open for ``complete_transaction`` (from any process) to commit or abort.
  ``send_offsets_to_transaction`` sends AddOffsetsToTxn, then TxnOffsetCommit with the consumer's
  ``group_metadata()`` (generation or member epoch, member and instance id; KIP-447 "Producer
  scalability for exactly once semantics") or, given a bare group id, without membership; a
  generation that is over (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) raises ``CommitFailedError``
  and leaves the transaction to be aborted, as Java's ``CommitFailedException``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pyspark_log.client import config as cfg
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.cluster import Cluster
from pyspark_log.client.connection import Connector, open_tcp
from pyspark_log.client.errors import (
    CommitFailedError,
    IllegalTransactionStateError,
    KafkaTimeoutError,
    TransactionAbortableError,
    UnsupportedFeatureError,
    error_for,
)
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.loop_thread import LoopThread, _wait_s
from pyspark_log.client.offset_commit import offset_commit_topics
from pyspark_log.client.tasks import cancel_and_wait
from pyspark_log.client.txn_manager import FATAL_ERRORS, TransactionManager, TxnState, fatal_error
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)
T = TypeVar("T")

KEY_GROUP, KEY_TRANSACTION = 0, 1
COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
RETRY_CODES = COORDINATOR_MOVED | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
}
NO_BUMP_VERSION = 3  # InitProducerId carries producer_id/producer_epoch from v3 (KIP-360)
TXN_OFFSET_COMMIT_MEMBERSHIP_VERSION = 3  # TxnOffsetCommit carries the group membership from v3 (KIP-447)
GENERATION_OVER = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID})


@dataclass(frozen=True, slots=True)
class TransactionHandle:
    """What ``prepare_transaction`` returns and ``complete_transaction`` needs (picklable).

    ``empty``: nothing was sent and no offsets were added, so the coordinator has no
    transaction to complete and ``complete_transaction`` does nothing."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    empty: bool = False


def _worst(codes: list[int]) -> ErrorCode:
    """The code that decides a multi-partition answer: fatal, then others, then retriable."""
    errs = [ErrorCode.of(c) for c in codes if c != ErrorCode.NONE]
    if not errs:
        return ErrorCode.NONE
    for pick in (
        lambda e: e in FATAL_ERRORS,
        lambda e: not e.retriable and e not in RETRY_CODES and e != ErrorCode.OPERATION_NOT_ATTEMPTED,
        lambda e: True,
    ):
        found = [e for e in errs if pick(e)]
        if found:
            return found[0]
    return errs[0]


def _raise_for(code: ErrorCode, what: str) -> KafkaError:
    if code in FATAL_ERRORS:
        return fatal_error(code, what)
    return error_for(code, context=what)


class TxnRequests:
    """Coordinator lookup plus the retry loop of every transactional request."""

    def __init__(self, cluster: Cluster, backoff: ExponentialBackoff) -> None:
        self._cluster = cluster
        self._backoff = backoff
        self._coordinators: dict[tuple[int, str], int] = {}

    async def coordinator(self, key_type: int, key: str) -> int:
        node = self._coordinators.get((key_type, key))
        if node is not None:
            return node
        kind = "transaction" if key_type == KEY_TRANSACTION else "group"
        node = await self._cluster.find_coordinator(key_type, key, context=f"find the {kind} coordinator of {key!r}")
        self._coordinators[(key_type, key)] = node
        return node

    async def call(
        self,
        key_type: int | None,
        key: str,
        api: int,
        body: dict[str, Any] | Callable[[int], dict[str, Any]],
        check: Callable[[Message], ErrorCode],
        *,
        what: str,
        deadline_s: float | None = None,
    ) -> Message:
        """Send ``body`` (or ``body(version)``) to the coordinator of ``key`` (any broker when
        ``key_type`` is None) until ``check`` finds no error, a non-retriable one is raised, or
        ``deadline_s`` (loop time) passes (``KafkaTimeoutError``)."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            try:
                if key_type is None:
                    conn = await self._cluster.any_connection()
                else:
                    conn = await self._cluster.connection(await self.coordinator(key_type, key))
                payload = body(conn.version_for(api)) if callable(body) else body
                resp = await conn.request(api, payload)
                assert resp is not None
                code = check(resp)
                if code == ErrorCode.NONE:
                    return resp
                last: KafkaError = _raise_for(code, what)
            except KafkaError as exc:
                if not (exc.retriable or exc.code in RETRY_CODES):
                    raise
                code, last = exc.code, exc
            if code not in RETRY_CODES and not code.retriable:
                raise last
            if key_type is not None and (code in COORDINATOR_MOVED or code == ErrorCode.NETWORK_EXCEPTION):
                self._coordinators.pop((key_type, key), None)
            wait_s = self._backoff.backoff_ms(attempt) / 1000.0
            attempt += 1
            if deadline_s is not None and loop.time() + wait_s >= deadline_s:
                raise KafkaTimeoutError(f"{what}: no success before the deadline; last error: {last}")
            log.debug("%s: retrying after %s", what, last)
            await asyncio.sleep(wait_s)

    async def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        *,
        current: tuple[int, int] | None = None,
        deadline_s: float | None = None,
    ) -> tuple[int, int]:
        """InitProducerId: a new producer id (``current`` None) or, with ``current=(id, epoch)``, the
        same id with a bumped epoch (KIP-360, v3+). Returns ``(producer_id, producer_epoch)``."""

        def body(version: int) -> dict[str, Any]:
            if current is not None and version < NO_BUMP_VERSION:
                raise UnsupportedFeatureError("the broker cannot bump a producer epoch (InitProducerId < v3)")
            pid, epoch = current if current is not None else (-1, -1)
            return {
                "transactional_id": transactional_id,
                "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": pid,
                "producer_epoch": epoch,
            }

        key_type = KEY_TRANSACTION if transactional_id is not None else None
        resp = await self.call(
            key_type,
            transactional_id or "",
            ApiKey.INIT_PRODUCER_ID,
            body,
            lambda r: ErrorCode.of(r.error_code),
            what=f"InitProducerId for {transactional_id!r}" if transactional_id else "InitProducerId",
            deadline_s=deadline_s,
        )
        return resp.producer_id, resp.producer_epoch

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, deadline_s: float | None
    ) -> None:
        body = {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "committed": commit,
        }
        what = f"EndTxn({'commit' if commit else 'abort'}) of {transactional_id!r}"
        await self.call(
            KEY_TRANSACTION,
            transactional_id,
            ApiKey.END_TXN,
            body,
            lambda r: ErrorCode.of(r.error_code),
            what=what,
            deadline_s=deadline_s,
        )


def _add_partitions_check(resp: Message) -> ErrorCode:
    return _worst([p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition])


def _offsets_check(resp: Message) -> ErrorCode:
    return _worst([p.error_code for t in resp.topics for p in t.partitions])


class TransactionalProducer(Protocol):
    """What the transactional flows use of their producer (``producer.AsyncProducer``, which imports
    this module; so this one names no type of it)."""

    max_block_ms: float

    def wakeup_sender(self) -> None: ...

    def fail_unsent(self, exc: BaseException) -> None: ...

    async def flush(self, timeout_ms: float | None = None) -> None: ...


class ProducerTransactions:
    """The transactional calls of one ``AsyncProducer`` (see the module doc)."""

    def __init__(self, producer: TransactionalProducer, txn: TransactionManager, requests: TxnRequests) -> None:
        self._producer = producer
        self.txn = txn
        self.requests = requests
        self._pending: tuple[str, asyncio.Task[Any]] | None = None
        self._adder: asyncio.Task[None] | None = None
        self.preparing = False

    @property
    def _tid(self) -> str:
        assert self.txn.transactional_id is not None
        return self.txn.transactional_id

    async def _run(self, name: str, start: Callable[[], Awaitable[T]] | None, timeout_ms: float | None) -> T:
        """Start (``start`` given) or resume the pending operation ``name``; wait up to ``timeout_ms``."""
        if self._pending is not None and self._pending[0] == name:
            task = self._pending[1]
        elif self._pending is not None:
            raise IllegalTransactionStateError(
                f"cannot {name}: {self._pending[0]} timed out earlier and must be called again first"
            )
        else:
            assert start is not None
            task = asyncio.get_running_loop().create_task(start(), name=f"pylog-txn-{name}")  # type: ignore[arg-type]
            self._pending = (name, task)
        budget_ms = self._producer.max_block_ms if timeout_ms is None else timeout_ms
        try:
            async with asyncio.timeout(budget_ms / 1000.0):
                return await asyncio.shield(task)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"{name} did not complete within {budget_ms:.0f} ms; call it again to keep waiting"
            ) from None
        finally:
            if task.done() and self._pending is not None and self._pending[1] is task:
                self._pending = None
                if not task.cancelled():
                    task.exception()  # retrieved: no "never retrieved" warning

    def _resuming(self, name: str) -> bool:
        return self._pending is not None and self._pending[0] == name

    # -- init ------------------------------------------------------------------------------------

    async def init_transactions(self, timeout_ms: float | None) -> None:
        if not self._resuming("init_transactions"):
            self.txn.require("init_transactions", TxnState.UNINITIALIZED)
            self.txn.transition_to(TxnState.INITIALIZING)
        await self._run("init_transactions", self._init, timeout_ms)

    async def _init(self, bump: bool = False) -> None:
        txn = self.txn
        current = (txn.producer_id, txn.producer_epoch) if bump else None
        try:
            pid, epoch = await self.requests.init_producer_id(self._tid, txn.transaction_timeout_ms, current=current)
        except KafkaError as exc:
            txn.transition_to(TxnState.FATAL_ERROR, exc)
            raise
        txn.set_producer_id_and_epoch(pid, epoch)
        txn.transition_to(TxnState.READY)
        self._producer.wakeup_sender()

    def begin_transaction(self) -> None:
        if self._pending is not None:
            raise IllegalTransactionStateError(f"cannot begin a transaction while {self._pending[0]} is pending")
        self.txn.begin()
        self.preparing = False

    # -- partitions ------------------------------------------------------------------------------

    def on_append(self, tp: TopicPartition) -> None:
        """A record went to ``tp``: make sure the coordinator hears of it before it is sent."""
        if self.txn.maybe_add_partition(tp) and (self._adder is None or self._adder.done()):
            self._adder = asyncio.get_running_loop().create_task(self._add_partitions(), name="pylog-txn-add")

    async def _add_partitions(self) -> None:
        txn = self.txn
        while txn.pending_partitions and txn.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            tps = sorted(txn.pending_partitions)
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body = {
                "v3_and_below_transactional_id": self._tid,
                "v3_and_below_producer_id": txn.producer_id,
                "v3_and_below_producer_epoch": txn.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
            try:
                await self.requests.call(
                    KEY_TRANSACTION,
                    self._tid,
                    ApiKey.ADD_PARTITIONS_TO_TXN,
                    body,
                    _add_partitions_check,
                    what=f"AddPartitionsToTxn of {self._tid!r}",
                )
            except KafkaError as exc:
                txn.fail(exc)
                return
            txn.partitions_added(tps)
            self._producer.wakeup_sender()

    async def _partitions_settled(self) -> None:
        while self._adder is not None and not self._adder.done():
            await asyncio.shield(self._adder)

    # -- offsets ---------------------------------------------------------------------------------

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: str | ConsumerGroupMetadata,
        timeout_ms: float | None,
    ) -> None:
        if not self._resuming("send_offsets_to_transaction"):
            self.txn.require("send offsets to the transaction", TxnState.IN_TRANSACTION)
            if self.preparing:
                raise IllegalTransactionStateError("cannot send offsets while the transaction is being prepared")
        frozen = dict(offsets)
        meta = group if isinstance(group, ConsumerGroupMetadata) else ConsumerGroupMetadata(group)
        await self._run("send_offsets_to_transaction", lambda: self._send_offsets(frozen, meta), timeout_ms)

    async def _send_offsets(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], meta: ConsumerGroupMetadata
    ) -> None:
        txn = self.txn
        group_id = meta.group_id

        def txn_offset_commit(version: int) -> dict[str, Any]:
            if version < TXN_OFFSET_COMMIT_MEMBERSHIP_VERSION and meta.has_membership:
                raise UnsupportedFeatureError(
                    f"the group coordinator of {group_id!r} takes no group membership with a transaction's "
                    f"offsets (TxnOffsetCommit < v{TXN_OFFSET_COMMIT_MEMBERSHIP_VERSION}): pass the group id alone"
                )
            return {
                "transactional_id": self._tid,
                "group_id": group_id,
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "generation_id": meta.generation_id,
                "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": offset_commit_topics(offsets),
            }

        try:
            await self.requests.call(
                KEY_TRANSACTION,
                self._tid,
                ApiKey.ADD_OFFSETS_TO_TXN,
                {
                    "transactional_id": self._tid,
                    "producer_id": txn.producer_id,
                    "producer_epoch": txn.producer_epoch,
                    "group_id": group_id,
                },
                lambda r: ErrorCode.of(r.error_code),
                what=f"AddOffsetsToTxn of {self._tid!r} for group {group_id!r}",
            )
            txn.offsets_added = True
            await self.requests.call(
                KEY_GROUP,
                group_id,
                ApiKey.TXN_OFFSET_COMMIT,
                txn_offset_commit,
                _offsets_check,
                what=f"TxnOffsetCommit of {self._tid!r} for group {group_id!r}",
            )
        except KafkaError as exc:
            if exc.code in GENERATION_OVER:  # KIP-447: this member's generation is over
                exc = CommitFailedError(exc.code, f"offsets of group {group_id!r} for the transaction: {exc}")
            txn.fail(exc)
            raise exc from None

    # -- commit, abort, prepare ------------------------------------------------------------------

    async def _flush_transaction(self, action: str) -> None:
        """Every record of the transaction acknowledged and every partition added, or raise."""
        await self._producer.flush()
        await self._partitions_settled()
        await self._producer.flush()  # records appended while partitions were being added
        if self.txn.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            raise self.txn.error_to_raise(action)

    async def commit_transaction(self, timeout_ms: float | None) -> None:
        if not self._resuming("commit_transaction"):
            self.txn.require("commit the transaction", TxnState.IN_TRANSACTION)
            if self.preparing:
                raise IllegalTransactionStateError("cannot commit a transaction that is being prepared")
            self.txn.transition_to(TxnState.COMMITTING)
        await self._run("commit_transaction", self._commit, timeout_ms)

    async def _commit(self) -> None:
        txn = self.txn
        await self._flush_transaction("commit the transaction")
        if txn.txn_started:
            try:
                await self.requests.end_txn(self._tid, txn.producer_id, txn.producer_epoch, True, None)
            except KafkaError as exc:
                txn.fail(exc)
                raise
        txn.transition_to(TxnState.READY)

    async def abort_transaction(self, timeout_ms: float | None) -> None:
        if not self._resuming("abort_transaction"):
            self.txn.require("abort the transaction", TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR)
            self.txn.transition_to(TxnState.ABORTING)
            self.preparing = False
        await self._run("abort_transaction", self._abort, timeout_ms)

    async def _abort(self) -> None:
        txn = self.txn
        producer = self._producer
        producer.fail_unsent(TransactionAbortableError(ErrorCode.UNKNOWN_SERVER_ERROR, "the transaction was aborted"))
        await self._partitions_settled()
        txn.pending_partitions.clear()
        await producer.flush()  # batches already sent complete (or fail) before the markers go out
        try:
            if txn.txn_started and (
                txn.last_error is None or txn.last_error.code != ErrorCode.INVALID_PRODUCER_ID_MAPPING
            ):
                await self.requests.end_txn(self._tid, txn.producer_id, txn.producer_epoch, False, None)
            if txn.epoch_bump_required:
                txn.transition_to(TxnState.INITIALIZING)
                await self._init(bump=True)
                return
        except KafkaError as exc:
            txn.transition_to(TxnState.FATAL_ERROR, exc)
            raise
        txn.transition_to(TxnState.READY)

    async def prepare_transaction(self, timeout_ms: float | None) -> TransactionHandle:
        if not self._resuming("prepare_transaction"):
            self.txn.require("prepare the transaction", TxnState.IN_TRANSACTION)
            self.preparing = True
        return await self._run("prepare_transaction", self._prepare, timeout_ms)

    async def _prepare(self) -> TransactionHandle:
        txn = self.txn
        await self._flush_transaction("prepare the transaction")
        handle = TransactionHandle(self._tid, txn.producer_id, txn.producer_epoch, empty=not txn.txn_started)
        txn.transition_to(TxnState.PREPARED)
        return handle

    # -- close -----------------------------------------------------------------------------------

    async def on_close(self, timeout_ms: float | None) -> None:
        """Abort an open transaction on a graceful close (as the Java client does), except a
        prepared one, which stays open for ``complete_transaction``."""
        if self.txn.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR) and not self._pending:
            try:
                await self.abort_transaction(timeout_ms)
            except KafkaError as exc:
                log.warning("aborting the open transaction of %r on close failed: %s", self._tid, exc)

    async def cancel(self) -> None:
        await cancel_and_wait((self._adder, self._pending[1] if self._pending else None))
        self._pending = None


async def complete_transaction_async(
    config: Mapping[str, Any],
    handle: TransactionHandle,
    commit: bool,
    timeout_ms: float | None = None,
    *,
    connector: Connector = open_tcp,
) -> None:
    """``complete_transaction`` on the caller's event loop (``connector``: the transport seam)."""
    if handle.empty:
        return
    c = cfg.parse(cfg.PRODUCER, config, "producer")
    budget_ms = c["max.block.ms"] if timeout_ms is None else timeout_ms
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_ms / 1000.0
    cluster = Cluster(c, connector=connector)
    try:
        await cluster.start(budget_ms)
        requests = TxnRequests(cluster, ExponentialBackoff(c["retry.backoff.ms"], c["retry.backoff.max.ms"]))
        await requests.end_txn(handle.transactional_id, handle.producer_id, handle.producer_epoch, commit, deadline)
    finally:
        await cluster.close()


def complete_transaction(
    config: Mapping[str, Any], handle: TransactionHandle, commit: bool, timeout_ms: float | None = None
) -> None:
    """Commit (``commit=True``) or abort a transaction left open by ``prepare_transaction``, from
    any process: FindCoordinator (key type 1) + EndTxn with the handle's id and epoch. Retriable
    errors (coordinator moved or loading, CONCURRENT_TRANSACTIONS) are retried within
    ``timeout_ms`` (default ``max.block.ms``); completing an already completed transaction the same
    way succeeds; ``ProducerFencedError`` if a newer producer took the transactional id over,
    another ``KafkaError`` (e.g. INVALID_TXN_STATE: it was aborted, for instance by its timeout)
    otherwise. ``config`` needs ``bootstrap.servers``; producer keys are accepted."""
    thread = LoopThread("pylog-complete-txn")
    try:
        default_ms = cfg.parse(cfg.PRODUCER, config, "producer")["max.block.ms"]
        thread.run(complete_transaction_async(config, handle, commit, timeout_ms), _wait_s(timeout_ms, default_ms))
    finally:
        thread.stop()
