"""The transactional protocol of the ``pylog`` sink (no pyspark here; ``writer.py`` drives it).

Guarantee: every row of a streaming query reaches a ``read_committed`` reader of the output
topic exactly once, and each task's share of a micro-batch becomes visible whole, when the
driver commits the micro-batch. How (issue #5, KIP-98 transactions, KIP-447 stable offsets):

* Task ``p`` of a query writes with ``transactional.id = <prefix>-<p>`` (``transactional_id``).
  ``init_transactions`` fences any earlier attempt of the same task (a zombie, or the attempt a
  crash left behind) and aborts its open transaction.
* Streams only: the group named like the transactional id holds a "batch done" mark, an offset
  whose metadata is ``{"batch": b, "query": <Spark query id>}``. It is committed inside the same
  transaction as the rows (``send_offsets_to_transaction``), so data and mark commit together.
  Before writing batch ``b`` a task reads the mark with ``require_stable`` (no pending
  transactional offsets); if it says ``>= b`` the batch was committed before a crash and the
  task writes nothing (``TaskResult.skipped``).
* Otherwise the task sends its rows in a transaction, adds the mark, ``prepare_transaction``
  (flush; partitions and offsets registered) and reports the ``TransactionHandle``. It does not
  commit: the driver does, for all tasks, once Spark calls ``commit(messages, batchId)``
  (``complete_all(commit=True)``); ``abort`` aborts every reported handle and fences the
  transactional ids of tasks that reported nothing. EndTxn is idempotent, so a retried commit
  is harmless.
* Batch writes (``df.write``) use the same task protocol without the mark: one transaction per
  task, committed at job commit or all aborted.
* A task builds its producer (and, streams, the admin client that reads the mark) on a helper
  thread while it waits for its first input (``_Opening``); every step above runs on the task's
  thread once the first input is there, so a task without rows touches no transaction.

Preconditions (README "Writing to pylog"): a replayed micro-batch holds the same rows in the
same Spark partitions (deterministic replay: the pylog source and a checkpoint give it for a
deterministic query); the prefix is stable across restarts and unique per query (the default,
``pylog-<query id>``, is); ``transaction.timeout.ms`` exceeds the time from a task's first
send to the driver's commit (a transaction the coordinator aborted makes the commit fail, and
the restart rewrites it); the mark outlives the longest stop of the query
(``offsets.retention.minutes``); no speculative execution (a speculative copy fences the
attempt whose result Spark keeps, and the commit fails).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol

from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.transactions import TransactionHandle, complete_transaction
from pyspark_log.client.types import TopicPartition
from pyspark_log.spark.sink_options import SinkOptions

__all__ = [
    "Clients",
    "Columns",
    "PylogSinkError",
    "TaskInfo",
    "TaskResult",
    "batch_mark",
    "complete_all",
    "fence",
    "last_committed_batch",
    "resolve_prefix",
    "run_task",
    "transactional_id",
    "write_task",
]

log = logging.getLogger(__name__)

COMPLETE_TIMEOUT_MS = 120_000  # the driver's budget for one EndTxn, retries included
MAX_PARALLEL_COMPLETIONS = 8


class PylogSinkError(RuntimeError):
    """The pylog sink cannot write or commit; the message names the cause and the fix."""


@dataclass(frozen=True, slots=True)
class Columns:
    """Where the sink's columns are in a row (``writer.sink_columns`` checks the schema)."""

    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One Spark task: ``batch_id``/``query_id`` are None for a batch (non-streaming) write."""

    partition_id: int
    attempt: int
    batch_id: int | None = None
    query_id: str | None = None


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What a task reports to the driver. ``handle`` is None when it wrote nothing: no rows, or
    (``skipped``) its share of this micro-batch was committed before (a replay)."""

    prefix: str
    partition_id: int
    rows: int
    handle: TransactionHandle | None = None
    skipped: bool = False

    @property
    def transactional_id(self) -> str:
        return transactional_id(self.prefix, self.partition_id)


class TxnProducer(Protocol):
    """The transactional part of ``pyspark_log.client.Producer`` the sink uses."""

    def init_transactions(self, timeout_ms: float | None = None) -> None: ...
    def begin_transaction(self) -> None: ...
    def send(  # noqa: PLR0917 - Producer.send's signature
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: Callable[[Any, BaseException | None], None] | None = None,
    ) -> Any: ...
    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_id: str,
        timeout_ms: float | None = None,
    ) -> None: ...
    def send_batch(
        self,
        topic: str,
        data: Any,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Callable[[int | None, BaseException | None], None] | None = None,
    ) -> Any: ...
    def prepare_transaction(self, timeout_ms: float | None = None) -> TransactionHandle: ...
    def abort_transaction(self, timeout_ms: float | None = None) -> None: ...
    def close(self, timeout_ms: float | None = None) -> None: ...


class OffsetsAdmin(Protocol):
    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]: ...
    def close(self, timeout_ms: float | None = None) -> None: ...


# The producer and the admin client are imported when a task or a fence first needs one: the
# driver's planning processes import this module too and need neither (see spark/__init__.py).
def _producer(config: Mapping[str, str]) -> TxnProducer:
    from pyspark_log.client.sync import Producer

    return Producer(config)


def _admin(config: Mapping[str, str]) -> OffsetsAdmin:
    from pyspark_log.client.sync import AdminClient

    return AdminClient(config)


@dataclass(frozen=True, slots=True)
class Clients:
    """How the protocol reaches the broker (tests substitute fakes)."""

    producer: Callable[[Mapping[str, str]], TxnProducer] = _producer
    admin: Callable[[Mapping[str, str]], OffsetsAdmin] = _admin
    complete: Callable[..., None] = complete_transaction


DEFAULT_CLIENTS = Clients()


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def resolve_prefix(options: SinkOptions, task: TaskInfo) -> str:
    """The transactionalIdPrefix option, else (streams) ``<groupIdPrefix or pylog>-<query id>``."""
    if options.transactional_id_prefix is not None:
        return options.transactional_id_prefix
    if task.query_id is None:
        raise PylogSinkError(
            "transactionalIdPrefix is not set and Spark gave this task no streaming query id: "
            "set transactionalIdPrefix to a name stable across restarts and unique to this query"
        )
    return f"{options.derived_prefix}-{task.query_id}"


# ---------------------------------------------------------------------------------------------
# The "batch done" mark


def batch_mark(batch_id: int, query_id: str | None) -> OffsetAndMetadata:
    return OffsetAndMetadata(batch_id, json.dumps({"batch": batch_id, "query": query_id}, separators=(",", ":")))


def last_committed_batch(
    offsets: Mapping[TopicPartition, OffsetAndMetadata], transactional_id: str, query_id: str | None
) -> int | None:
    """The newest micro-batch committed by ``transactional_id`` according to its group's offsets.

    Raises ``PylogSinkError`` when the group holds offsets the sink did not write (the prefix
    names a consumer group) or a mark of another query (the prefix is shared, or a new checkpoint
    reuses it: a new checkpoint starts at batch 0 and would skip every batch the old one wrote).
    """
    newest: int | None = None
    for tp, om in offsets.items():
        try:
            mark = json.loads(om.metadata or "")
            batch = mark["batch"]
            owner = mark.get("query")
        except (ValueError, TypeError, KeyError):
            raise PylogSinkError(
                f"consumer group {transactional_id!r} holds an offset for {tp} that the pylog sink did not write: "
                "transactionalIdPrefix collides with a consumer group; choose another transactionalIdPrefix"
            ) from None
        if not isinstance(batch, int):
            raise PylogSinkError(f"consumer group {transactional_id!r} holds a malformed batch mark {om.metadata!r}")
        if query_id is not None and owner is not None and owner != query_id:
            raise PylogSinkError(
                f"transactional id {transactional_id!r} was last used by streaming query {owner} (batch {batch}), "
                f"not by this query ({query_id}): a new checkpoint needs a new transactionalIdPrefix, and two "
                "queries must not share one"
            )
        newest = batch if newest is None else max(newest, batch)
    return newest


# ---------------------------------------------------------------------------------------------
# Executor side


def _bad_row(row_number: int, problem: str, fix: str) -> PylogSinkError:
    return PylogSinkError(f"row {row_number} of this task {problem}: {fix}")


class BaseSender:
    """What the row sender and the Arrow sender (sink_arrow.py) share: the task's producer, the
    columns and the fixed topic option; the first delivery failure (delivery callbacks run on
    the producer's I/O thread, hence the lock), the first row's topic (where the batch mark
    goes) and the number of rows sent."""

    def __init__(self, producer: TxnProducer, columns: Columns, topic: str | None) -> None:
        self._producer = producer
        self._columns = columns
        self._topic = topic
        self._lock = threading.Lock()
        self.failure: BaseException | None = None
        self.first_topic: str | None = None
        self.rows = 0

    def _delivered(self, _result: Any, exc: BaseException | None) -> None:
        if exc is not None:
            with self._lock:
                if self.failure is None:
                    self.failure = exc


class _Sender(BaseSender):
    """Sends rows as records."""

    def send_all(self, rows: Iterable[Sequence[Any]]) -> None:
        c = self._columns
        for row in rows:
            self.rows += 1
            topic = self._topic if self._topic is not None else (row[c.topic] if c.topic is not None else None)
            if topic is None:
                raise _bad_row(
                    self.rows, "has a null topic", "set the topic option, or fill the topic column in every row"
                )
            headers = row[c.headers] if c.headers is not None else None
            if headers:
                if any(h is None or h[0] is None for h in headers):
                    raise _bad_row(self.rows, "has a null header or header key", "give every header a string key")
                headers = [(h[0], h[1]) for h in headers]
            if self.first_topic is None:
                self.first_topic = topic
            self._producer.send(
                topic,
                row[c.value],
                row[c.key] if c.key is not None else None,
                headers or None,
                row[c.partition] if c.partition is not None else None,
                _timestamp_ms(row[c.timestamp]) if c.timestamp is not None else None,
                on_delivery=self._delivered,
            )
            if self.failure is not None:
                raise self.failure


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _timestamp_ms(value: datetime.datetime | None) -> int | None:
    """A Spark timestamp as epoch milliseconds (floored, as the Arrow path does); a naive datetime
    is local time, which is how PySpark hands TimestampType values to Python."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.astimezone()
    return (value - _EPOCH) // _MS


def _committed_batch(admin: OffsetsAdmin, txn_id: str, task: TaskInfo) -> int | None:
    offsets = admin.list_consumer_group_offsets(txn_id, require_stable=True)
    return last_committed_batch(offsets, txn_id, task.query_id)


def _close_quietly(client: TxnProducer | OffsetsAdmin | None) -> None:
    if client is None:
        return
    try:
        client.close()
    except Exception as exc:  # noqa: BLE001 - closing is best effort; the task's outcome is decided
        log.warning("pylog sink: could not close a client: %s", exc)


class _Opening:
    """The task's clients, built on a helper thread while the task waits for its first input.

    Building a client (a loop thread, a connection, ApiVersions, metadata) takes tens of
    milliseconds, and Spark hands a task its first rows only after the source has fetched and
    converted them, so the two overlap. Building sends nothing about the transaction: the
    producer's ``init_transactions`` (which fences and aborts) runs on the task's thread, after
    the first input arrived, as before; an empty task closes what was built unused. ``admin``
    (streams only) reads the batch mark.
    """

    def __init__(self, options: SinkOptions, clients: Clients, txn_id: str, with_admin: bool) -> None:
        self._future: concurrent.futures.Future[tuple[TxnProducer, OffsetsAdmin | None]] = concurrent.futures.Future()
        self._args = (options, clients, txn_id, with_admin)
        threading.Thread(target=self._build, name="pylog-sink-open", daemon=True).start()

    def _build(self) -> None:
        options, clients, txn_id, with_admin = self._args
        producer: TxnProducer | None = None
        try:
            producer = clients.producer(options.producer_config(txn_id))
            admin = clients.admin(options.admin_config()) if with_admin else None
        except BaseException as exc:  # noqa: BLE001 - handed to the task's thread by result()
            _close_quietly(producer)
            self._future.set_exception(exc)
        else:
            self._future.set_result((producer, admin))

    def result(self) -> tuple[TxnProducer, OffsetsAdmin | None]:
        """The clients (waits for them); raises what building them raised."""
        return self._future.result()

    def discard(self) -> None:
        """Close the clients once built (the task will not use them); never raises."""

        def close(fut: concurrent.futures.Future[tuple[TxnProducer, OffsetsAdmin | None]]) -> None:
            if fut.exception() is None:
                producer, admin = fut.result()
                _close_quietly(admin)
                _close_quietly(producer)

        self._future.add_done_callback(close)


def _abort_quietly(producer: TxnProducer, txn_id: str) -> None:
    try:
        producer.abort_transaction()
    except Exception as exc:  # noqa: BLE001 - the original error matters; a fenced producer cannot abort
        log.warning("pylog sink: could not abort the transaction of %s after a failure: %s", txn_id, exc)


class TaskSender(Protocol):
    """Sends one task's input (rows or Arrow record batches) with a producer; ``failure`` is the
    first delivery failure, ``first_topic`` where the batch mark goes, ``rows`` the rows sent."""

    failure: BaseException | None
    first_topic: str | None
    rows: int

    def send_all(self, items: Iterable[Any]) -> None: ...


def write_task(
    options: SinkOptions,
    columns: Columns,
    rows: Iterable[Sequence[Any]],
    task: TaskInfo,
    clients: Clients = DEFAULT_CLIENTS,
) -> TaskResult:
    """Write one task's rows in a transaction and prepare it (the driver commits); see the module
    docstring. On failure the transaction is aborted (best effort) and the error re-raised."""
    return run_task(
        options,
        task,
        rows,
        lambda producer: _Sender(producer, columns, options.topic),
        lambda first, rest: 1 + sum(1 for _ in rest),
        clients,
    )


def run_task(  # noqa: PLR0917 - the protocol's inputs
    options: SinkOptions,
    task: TaskInfo,
    items: Iterable[Any],
    make_sender: Callable[[TxnProducer], TaskSender],
    count_rows: Callable[[Any, Iterator[Any]], int],
    clients: Clients = DEFAULT_CLIENTS,
) -> TaskResult:
    """The task protocol of ``write_task`` for any input shape: ``items`` are what
    ``make_sender(producer).send_all`` takes (rows, or Arrow record batches in ``sink_arrow``);
    ``count_rows(first, rest)`` counts the rows of the input a skipped task consumes."""
    prefix = resolve_prefix(options, task)
    txn_id = transactional_id(prefix, task.partition_id)
    it: Iterator[Any] = iter(items)
    opening = _Opening(options, clients, txn_id, task.batch_id is not None)
    try:
        first = next(it, None)
    except BaseException:
        opening.discard()
        raise
    if first is None:
        opening.discard()
        return TaskResult(prefix, task.partition_id, 0)
    producer, admin = opening.result()
    sender = make_sender(producer)
    begun = False
    try:
        producer.init_transactions()
        if task.batch_id is not None:
            assert admin is not None  # built for every stream task
            try:
                done = _committed_batch(admin, txn_id, task)
            finally:
                admin.close()
                admin = None
            if done is not None and done >= task.batch_id:
                count = count_rows(first, it)  # Spark expects the input consumed
                log.info(
                    "pylog sink: %s already committed batch %d (up to %d); skipped %d rows",
                    txn_id,
                    task.batch_id,
                    done,
                    count,
                )
                return TaskResult(prefix, task.partition_id, count, skipped=True)
        producer.begin_transaction()
        begun = True
        sender.send_all(chain([first], it))
        if task.batch_id is not None and sender.first_topic is not None:
            mark = {TopicPartition(sender.first_topic, 0): batch_mark(task.batch_id, task.query_id)}
            producer.send_offsets_to_transaction(mark, txn_id)
        handle = producer.prepare_transaction()
    except BaseException:
        if begun:
            _abort_quietly(producer, txn_id)
        raise
    finally:
        _close_quietly(admin)
        producer.close()
    if sender.failure is not None:  # a delivery failed after the last send() returned
        clients.complete(options.admin_config(), handle, False, COMPLETE_TIMEOUT_MS)
        raise sender.failure
    return TaskResult(prefix, task.partition_id, sender.rows, handle)


# ---------------------------------------------------------------------------------------------
# Driver side


def _parallel(items: Sequence[Any], fn: Callable[[Any], None]) -> list[tuple[Any, BaseException]]:
    """Run ``fn`` on every item (a few at a time); returns the (item, error) pairs that failed."""
    if not items:
        return []
    failed: list[tuple[Any, BaseException]] = []
    workers = min(MAX_PARALLEL_COMPLETIONS, len(items))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="pylog-sink") as pool:
        futures = {pool.submit(fn, item): item for item in items}
        for fut in concurrent.futures.as_completed(futures):
            exc = fut.exception()
            if exc is not None:
                failed.append((futures[fut], exc))
    return failed


def complete_all(
    options: SinkOptions,
    results: Sequence[TaskResult],
    *,
    commit: bool,
    what: str,
    clients: Clients = DEFAULT_CLIENTS,
) -> None:
    """Commit (or abort) the transaction of every result with a handle.

    A commit tries every handle and then raises ``PylogSinkError`` naming those that failed (the
    query stops; its restart replays the batch, whose committed tasks skip and the rest rewrite).
    An abort never raises: what it cannot abort the transaction timeout will.
    """
    config = options.admin_config()
    handles = [r.handle for r in results if r.handle is not None]

    def complete(handle: TransactionHandle) -> None:
        clients.complete(config, handle, commit, COMPLETE_TIMEOUT_MS)

    failed = _parallel(handles, complete)
    rows = sum(r.rows for r in results if r.handle is not None)
    verb = "commit" if commit else "abort"
    if not failed:
        log.info("pylog sink: %s: %sed %d transactions (%d rows)", what, verb, len(handles), rows)
        return
    detail = "; ".join(f"{h.transactional_id}: {exc}" for h, exc in failed)
    if not commit:
        log.warning(
            "pylog sink: %s: could not abort %d of %d transactions (%s)", what, len(failed), len(handles), detail
        )
        return
    raise PylogSinkError(
        f"{what}: could not commit {len(failed)} of {len(handles)} transactions ({detail}); "
        "restart the query from its checkpoint: the batch is replayed, committed tasks skip it and the "
        "others write it again. If a transaction timed out, raise kafka.transaction.timeout.ms"
    )


def fence(options: SinkOptions, transactional_ids: Sequence[str], clients: Clients = DEFAULT_CLIENTS) -> None:
    """``init_transactions`` on each id: aborts what a failed task left open (so read_committed
    readers are not held back until the transaction timeout) and fences its zombie. Best effort."""

    def one(txn_id: str) -> None:
        producer = clients.producer(options.producer_config(txn_id))
        try:
            producer.init_transactions()
        finally:
            producer.close()

    for txn_id, exc in _parallel(list(transactional_ids), one):
        log.warning("pylog sink: could not fence %s after a failed task: %s", txn_id, exc)
