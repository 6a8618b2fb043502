"""The sync facade: ``Producer``, ``Consumer``, ``AdminClient`` for code without an event loop.

Each instance owns a ``LoopThread``: a private asyncio loop in a daemon thread on which its async
core (``AsyncProducer`` / ``AsyncConsumer`` / ``AsyncAdmin``) lives. A sync call submits a
coroutine to that loop (``run_coroutine_threadsafe``) and waits for its result with a timeout, so
the facade works the same in a plain script, a Spark executor, a worker thread, or inside a
coroutine of some *other* running loop (it never calls ``asyncio.run`` and never touches the
caller's loop — though a blocking call there blocks that loop, as any blocking call would).
Calling a facade method from a callback running on its own loop would deadlock; it raises
``RuntimeError`` instead.

The producer's hot path avoids a round trip per record: ``send`` validates the record, blocks for
topic metadata only the first time a topic is seen, reserves ``buffer.memory`` on the caller's
thread (blocking up to ``max.block.ms``: back-pressure), and hands the record to the loop through
an ordered, lock-free queue (``handoff.py``: one loop wake-up per burst; the loop partitions and
appends what queued meanwhile in bulk, and batches are encoded from columns at drain time). The
record is a ``RecordFuture`` (``futures.py``): one object is the queued record and the returned
future; once appended, its batch keeps only the record's row and the future reads the batch's
outcome lazily. The common case (bytes key and value, no headers, partition or timestamp) goes
straight to the producer's ``LaneWriter`` (``lane_writer.py``: the ``buffer.memory`` reservation
and the row's append to the open lane in one critical section); where the compiled speedups are
built, a producer's ``send`` is their ``LaneSender``, which takes that case in C through the same
writer and passes any other call to this class's ``send``.

``close()`` (or leaving the ``with`` block) shuts the core down and stops the thread; an instance
that is garbage-collected unclosed stops its thread too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pyspark_log.client import operations
from pyspark_log.client.acl_admin import AclBinding, AclBindingFilter
from pyspark_log.client.admin import (
    AlterConfigOp,
    AsyncAdmin,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ElectionType,
    NewTopic,
)
from pyspark_log.client.clock import SystemClock
from pyspark_log.client.cluster import TopicMetadata
from pyspark_log.client.errors import BufferExhaustedError, ClientClosedError, KafkaError
from pyspark_log.client.futures import DeliveryCallback, DeliveryFuture, RecordFuture
from pyspark_log.client.group_admin import ConsumerGroupDescription, ConsumerGroupListing
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.log_dirs import LogDirDescription
from pyspark_log.client.loop_thread import LoopThread, _SyncClient, _wait_s
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.producer_batch import RECORD_OVERHEAD_BYTES, ColumnarDelivery
from pyspark_log.client.quotas import ClientQuotaAlteration, ClientQuotaFilterComponent, EntityKey
from pyspark_log.client.reassignment_admin import PartitionReassignment
from pyspark_log.client.send_prep import HeadersArg
from pyspark_log.client.sync_consumer import Consumer
from pyspark_log.client.transactions import TransactionHandle
from pyspark_log.client.types import (
    IsolationLevel,
    OffsetAndTimestamp,
    TopicPartition,
)
from pyspark_log.records import speedups

__all__ = ["AdminClient", "Consumer", "LoopThread", "Producer"]


class Producer(_SyncClient):
    """The blocking producer. ``send`` returns a ``DeliveryFuture[RecordMetadata]`` (the
    ``concurrent.futures.Future`` interface); ``on_delivery(metadata, exception)`` runs on the
    client's I/O thread."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-producer")
        try:
            self._core = AsyncProducer(config, **core_kwargs)
            self._run(self._core.start(), _wait_s(self._core.max_block_ms, 0))
        except BaseException:
            self._shutdown()
            raise
        core = self._core
        # send()'s fast path: the lane's owner, and the wall clock (CreateTime) when it is
        # the system's (another clock: always the general path)
        self._writer = core.lane_writer
        self._fast = core.clock.__class__ is SystemClock
        native = speedups.native
        if native is not None and self._fast:
            # send()'s common case compiled (records/_speedups.c: the same steps as the Python
            # path below, through the same writer; anything else goes to this class's send,
            # bound, before any change)
            vars(self)["send"] = native.LaneSender(self._writer, Producer.send.__get__(self))

    def _shutdown(self) -> None:
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.shut()
        super()._shutdown()

    @property
    def core(self) -> AsyncProducer:
        return self._core

    def send(  # noqa: PLR0917 - Kafka's record fields, positionally as in ProducerRecord
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record (blocking up to ``max.block.ms`` for metadata and buffer room)."""
        core = self._core
        if (
            headers is None
            and partition is None
            and timestamp_ms is None
            and (key is None or key.__class__ is bytes)
            and (value is None or value.__class__ is bytes)
            and topic.__class__ is str
            and not self._closed
        ):
            # the common case (same checks and record as the general path below)
            writer = self._writer
            if not writer.accepting:
                core.check_send()  # raises, or checks the transaction's state
            size = (
                RECORD_OVERHEAD_BYTES + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
            )
            meta = core.cluster.metadata
            if (
                self._fast
                and size <= writer.size_limit
                and ((meta is writer.meta and topic in writer.topics) or writer.known(meta, topic))
            ):
                if on_delivery is None:
                    # the row joins the open lane of the topic (one of keyed rows or of rows for
                    # the sticky partitioner)
                    future = writer.append(topic, key, value, size)
                    if future is not None:
                        return future
                else:
                    record = writer.put_record(topic, key, value, size, on_delivery)
                    if record is not None:
                        return record
        return self._send(topic, value, key, headers, partition, timestamp_ms, on_delivery)

    def _send(  # noqa: PLR0917
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
        on_delivery: DeliveryCallback | None,
    ) -> RecordFuture:
        core = self._core
        if self._closed:
            raise ClientClosedError("the producer is closed")
        core.check_send()
        record = core.prepare(topic, value, key, headers, partition, timestamp_ms, on_delivery)
        size = record._size
        if core.cluster.metadata.partition_count(topic) is None:
            self._run(core.cluster.wait_for_topic(topic, core.max_block_ms), _wait_s(core.max_block_ms, 0))
        if partition is not None:
            if core.partition_maybe_new(topic, partition):
                self._run(core.cluster.refresh(core.max_block_ms), _wait_s(core.max_block_ms, 0))
            core.check_partition(topic, partition)
        if not core.pool.try_reserve(size):
            self._reserve(size)
        try:
            core.enqueue_threadsafe(record, checked=True)
        except BaseException:
            core.pool.release(size)
            raise
        return record

    def send_batch(
        self,
        topic: str,
        data: Any,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Callable[[int | None, BaseException | None], None] | None = None,
    ) -> DeliveryFuture[int]:
        """Queue many records at once: a ``pyarrow.Table`` / ``RecordBatch`` (or a mapping of
        columns) with ``value`` and optionally ``key``, ``headers``, ``partition``, ``timestamp``
        columns (``columnar_send.py``). Returns a future of the number of records, set when all of
        them are acknowledged, or failed with the first error; ``on_delivery(count, exc)`` runs
        once, on the I/O thread.

        Same semantics as ``send`` per record: partitioning (murmur2 of the key, sticky for null
        keys), idempotence and transactions, compression, ``batch.size`` (batches are cut at it)
        and ``linger.ms`` (a partition's last, unfull batch lingers), ``max.request.size``, and
        back-pressure (``buffer.memory`` is reserved a few batches at a time, blocking up to
        ``max.block.ms``). Partitioning and encoding happen on the calling thread, in bulk. If reserving memory
        times out part-way, the batches queued before stay queued and the future fails."""
        core = self._core
        if self._closed:
            raise ClientClosedError("the producer is closed")
        core.check_send()
        records, explicit, estimates = core.batch_records(topic, data, partition, timestamp_ms)
        fut: DeliveryFuture[int] = DeliveryFuture()
        if len(records) == 0:
            fut.set_result(0)
            return fut
        if core.cluster.metadata.partition_count(topic) is None:
            self._run(core.cluster.wait_for_topic(topic, core.max_block_ms), _wait_s(core.max_block_ms, 0))
        highest = int(explicit.max()) if explicit is not None else None
        if core.partition_maybe_new(topic, highest):
            self._run(core.cluster.refresh(core.max_block_ms), _wait_s(core.max_block_ms, 0))
        core.check_partition(topic, highest)

        def done(n: int | None, exc: BaseException | None) -> None:
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(n)  # type: ignore[arg-type]
            if on_delivery is not None:
                on_delivery(n, exc)

        delivery = ColumnarDelivery(len(records), done)
        try:
            for tp, group in core.batch_groups(topic, records, explicit, estimates, delivery):
                size = sum(b.reserved_bytes for b in group)
                self._reserve(size)
                try:
                    core.enqueue_columns_threadsafe(tp, group)
                except BaseException:
                    core.pool.release(size)
                    raise
        except BaseException as exc:
            delivery.fail(exc)
            raise
        return fut

    def _reserve(self, size: int) -> None:
        core = self._core
        if core.pool.try_reserve(size):
            return
        if self._thread.in_loop_thread():  # from a delivery callback: blocking would deadlock
            core.cluster.metrics.sensor("buffer-exhausted").record()
            raise BufferExhaustedError("buffer.memory is full and the send ran on the I/O thread")
        if not core.pool.reserve_blocking(size, core.max_block_ms / 1000.0):
            core.cluster.metrics.sensor("buffer-exhausted").record()  # an error path: a rare record off the loop
            raise BufferExhaustedError(f"failed to allocate {size} bytes within max.block.ms={core.max_block_ms:.0f}")

    def flush(self, timeout_ms: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or failed."""
        self._run(self._core.flush(timeout_ms), None if timeout_ms is None else _wait_s(timeout_ms, 0))

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._core.partitions_for(topic), _wait_s(self._core.max_block_ms, 0))

    def metrics(self) -> dict[str, dict[str, float]]:
        """Kafka's producer metrics by group and name (see ``pyspark_log.client.metrics``);
        read on the client's I/O thread. After ``close`` the last values stay readable."""
        if self._closed:
            return self._core.metrics()
        return self._call(self._core.metrics)

    # -- transactions: see AsyncProducer / transactions.py ----------------------------------------

    def _txn_wait(self, timeout_ms: float | None) -> float:
        return _wait_s(timeout_ms, self._core.max_block_ms)

    def init_transactions(self, timeout_ms: float | None = None) -> None:
        self._run(self._core.init_transactions(timeout_ms), self._txn_wait(timeout_ms))

    def begin_transaction(self) -> None:
        self._call(self._core.begin_transaction)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: str | ConsumerGroupMetadata,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.send_offsets_to_transaction(dict(offsets), group, timeout_ms)
        self._run(coro, self._txn_wait(timeout_ms))

    def commit_transaction(self, timeout_ms: float | None = None) -> None:
        self._run(self._core.commit_transaction(timeout_ms), self._txn_wait(timeout_ms))

    def abort_transaction(self, timeout_ms: float | None = None) -> None:
        self._run(self._core.abort_transaction(timeout_ms), self._txn_wait(timeout_ms))

    def prepare_transaction(self, timeout_ms: float | None = None) -> TransactionHandle:
        return self._run(self._core.prepare_transaction(timeout_ms), self._txn_wait(timeout_ms))

    def close(self, timeout_ms: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout_ms``), then stop. Idempotent."""
        if self._closed:
            return
        try:
            self._run(self._core.close(timeout_ms), None if timeout_ms is None else _wait_s(timeout_ms, 0))
        finally:
            self._shutdown()


class AdminClient(_SyncClient):
    """The blocking admin client; see ``AsyncAdmin`` for the semantics of each call."""

    def __init__(self, config: Mapping[str, Any], **core_kwargs: Any) -> None:
        super().__init__("pylog-admin")
        try:
            self._core = AsyncAdmin(config, **core_kwargs)
            self._api_ms = self._core.default_api_timeout_ms
            self._run(self._core.start(), _wait_s(self._api_ms, 0))
        except BaseException:
            self._shutdown()
            raise

    @property
    def core(self) -> AsyncAdmin:
        return self._core

    def _w(self, timeout_ms: float | None) -> float:
        return _wait_s(timeout_ms, self._api_ms)

    def create_topics(
        self, new_topics: Iterable[NewTopic], *, validate_only: bool = False, timeout_ms: float | None = None
    ) -> None:
        coro = self._core.create_topics(list(new_topics), validate_only=validate_only, timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def delete_topics(self, names: Iterable[str], *, timeout_ms: float | None = None) -> None:
        self._run(self._core.delete_topics(list(names), timeout_ms=timeout_ms), self._w(timeout_ms))

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.create_partitions(
            dict(new_counts), assignments=assignments, validate_only=validate_only, timeout_ms=timeout_ms
        )
        self._run(coro, self._w(timeout_ms))

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, str, str, int]] = (),
        deletions: Iterable[tuple[str, str]] = (),
        *,
        timeout_ms: float | None = None,
    ) -> dict[str, KafkaError | None]:
        """See ``AsyncAdmin.alter_user_scram_credentials``."""
        coro = self._core.alter_user_scram_credentials(list(upsertions), list(deletions), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def create_acls(self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None) -> None:
        """See ``AsyncAdmin.create_acls`` (``pyspark_log.client.acl_admin``)."""
        self._run(self._core.create_acls(list(bindings), timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_acls(self, acl_filter: AclBindingFilter, *, timeout_ms: float | None = None) -> list[AclBinding]:
        return self._run(self._core.describe_acls(acl_filter, timeout_ms=timeout_ms), self._w(timeout_ms))

    def delete_acls(self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None) -> list[AclBinding]:
        return self._run(self._core.delete_acls(list(filters), timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, list[tuple[str, int]] | KafkaError]:
        """See ``AsyncAdmin.describe_user_scram_credentials``."""
        coro = self._core.describe_user_scram_credentials(None if users is None else list(users), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def list_topics(self, *, include_internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        coro = self._core.list_topics(include_internal=include_internal, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicMetadata]:
        coro = self._core.describe_topics(None if names is None else list(names), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        return self._run(self._core.describe_cluster(timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None, *, timeout_ms: float | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        ids = None if broker_ids is None else list(broker_ids)
        return self._run(self._core.describe_log_dirs(ids, timeout_ms=timeout_ms), self._w(timeout_ms))

    def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str], *, timeout_ms: float | None = None
    ) -> dict[tuple[str, int, int], KafkaError | None]:
        return self._run(self._core.alter_replica_log_dirs(moves, timeout_ms=timeout_ms), self._w(timeout_ms))

    def elect_leaders(
        self,
        election_type: ElectionType | int | str,
        partitions: Iterable[TopicPartition] | None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        coro = self._core.elect_leaders(
            election_type, None if partitions is None else list(partitions), timeout_ms=timeout_ms
        )
        return self._run(coro, self._w(timeout_ms))

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        coro = self._core.alter_partition_reassignments(dict(targets), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        wanted = None if partitions is None else list(partitions)
        return self._run(self._core.list_partition_reassignments(wanted, timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return self._run(self._core.describe_configs(list(resources), timeout_ms=timeout_ms), self._w(timeout_ms))

    def describe_client_quotas(
        self, components: Iterable[ClientQuotaFilterComponent] = (), *, strict: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[EntityKey, dict[str, float]]:  # fmt: skip
        coro = self._core.describe_client_quotas(list(components), strict=strict, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def alter_client_quotas(
        self, alterations: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:  # fmt: skip
        coro = self._core.alter_client_quotas(list(alterations), validate_only=validate_only, timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.incremental_alter_configs(
            {r: list(ops) for r, ops in changes.items()}, validate_only=validate_only, timeout_ms=timeout_ms
        )
        self._run(coro, self._w(timeout_ms))

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: IsolationLevel | str = IsolationLevel.READ_UNCOMMITTED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        coro = self._core.list_offsets(dict(specs), isolation_level=isolation_level, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    # -- operator calls (``pyspark_log.client.operations``) ------------------------------------

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout_ms: float | None = None, return_exceptions: bool = False
    ) -> dict[TopicPartition, Any]:
        coro = operations.delete_records(
            self._core, dict(offsets), timeout_ms=timeout_ms, return_exceptions=return_exceptions
        )
        return self._run(coro, self._w(timeout_ms))

    def describe_producers(
        self, partitions: Iterable[TopicPartition], *, broker_id: int | None = None, timeout_ms: float | None = None
    ) -> dict[TopicPartition, list[operations.ProducerState]]:
        coro = operations.describe_producers(self._core, list(partitions), broker_id=broker_id, timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        timeout_ms: float | None = None,
    ) -> dict[int, list[operations.TransactionListing]]:
        coro = operations.list_transactions(
            self._core,
            states=list(states),
            producer_ids=list(producer_ids),
            duration_filter_ms=duration_filter_ms,
            timeout_ms=timeout_ms,
        )
        return self._run(coro, self._w(timeout_ms))

    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, operations.TransactionDescription]:
        coro = operations.describe_transactions(self._core, list(transactional_ids), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def abort_transaction(self, spec: operations.AbortTransactionSpec, *, timeout_ms: float | None = None) -> None:
        self._run(operations.abort_transaction(self._core, spec, timeout_ms=timeout_ms), self._w(timeout_ms))

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        coro = self._core.alter_consumer_group_offsets(group_id, dict(offsets), timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        coro = self._core.list_consumer_group_offsets(
            group_id,
            None if partitions is None else list(partitions),
            require_stable=require_stable,
            timeout_ms=timeout_ms,
        )
        return self._run(coro, self._w(timeout_ms))

    def list_consumer_groups(
        self, states: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> list[ConsumerGroupListing]:
        coro = self._core.list_consumer_groups(None if states is None else list(states), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def describe_consumer_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, ConsumerGroupDescription]:
        coro = self._core.describe_consumer_groups(list(group_ids), timeout_ms=timeout_ms)
        return self._run(coro, self._w(timeout_ms))

    def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None) -> None:
        self._run(self._core.delete_consumer_groups(list(group_ids), timeout_ms=timeout_ms), self._w(timeout_ms))

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> None:
        coro = self._core.delete_consumer_group_offsets(group_id, list(partitions), timeout_ms=timeout_ms)
        self._run(coro, self._w(timeout_ms))

    def close(self, timeout_ms: float | None = None) -> None:
        if self._closed:
            return
        try:
            self._run(self._core.close(), _wait_s(timeout_ms, 30000))
        finally:
            self._shutdown()
