"""``AsyncProducer``: the asyncio producer core (the sync ``Producer`` in ``sync.py`` drives it).

    async with AsyncProducer({"bootstrap.servers": "localhost:9092", "acks": "all"}) as p:
        fut = await p.send("events", b"value", key=b"user-1")   # queued; fut resolves on ack
        meta = await fut                                         # RecordMetadata(topic, partition, offset, timestamp)

``send`` raises at once for what is known before a record is queued: a bad argument,
``RecordTooLargeError`` (above ``max.request.size`` or ``buffer.memory``), ``KafkaTimeoutError``
when the topic's metadata or room in ``buffer.memory`` did not come within ``max.block.ms``
(back-pressure), ``ClientClosedError``. Everything after queueing (broker errors once retries or
``delivery.timeout.ms`` are spent) fails the returned future and calls ``on_delivery(None, exc)``.
Delivery callbacks run on the producer's event loop; keep them short.

Partitioning is ``partitioner.py`` (murmur2 for keys, sticky for null keys); what ``send`` checks
before queueing is ``send_prep.py``; records from the sync facade's threads reach the loop through
``handoff.py`` (in bulk); batching is ``accumulator.py``; the network side is ``sender.py``.

Idempotence (KIP-98, Kafka documentation §3.3 "Producer Configs", `enable.idempotence`) is on by default, as
in Kafka 3.x: ``start`` gets a
producer id (InitProducerId) and batches carry per-partition sequence numbers, so a retried batch
is never written twice and order holds under retries (``txn_manager.py``). ``config.resolve_idempotence``
decides: left unset, a setting it cannot honour (acks other than all, ``retries=0``, more than 5
requests in flight) turns it off; set true, the same is a ``ConfigError``. Against a broker that
does not advertise InitProducerId (22) an unset ``enable.idempotence`` falls back to a plain
producer with a warning; an explicit one (or ``transactional.id``) raises ``UnsupportedFeatureError``.

Transactions (``transactional.id``): ``init_transactions``, ``begin_transaction``, ``send``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``,
``prepare_transaction`` (see ``transactions.py``). ``close`` aborts an open transaction, except
a prepared one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark_log.client import config as cfg
from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.bufferpool import BufferPool
from pyspark_log.client.clock import SYSTEM_CLOCK, Clock
from pyspark_log.client.cluster import Cluster, ClusterMetadata
from pyspark_log.client.connection import Connector, open_tcp
from pyspark_log.client.errors import (
    BufferExhaustedError,
    ClientClosedError,
    IllegalTransactionStateError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    UnsupportedFeatureError,
)
from pyspark_log.client.futures import DeliveryCallback, RecordFuture
from pyspark_log.client.groups import ConsumerGroupMetadata, OffsetAndMetadata
from pyspark_log.client.handoff import Handoff
from pyspark_log.client.metrics import Metrics, producer_metrics
from pyspark_log.client.partitioner import StickyPartitioner, partition_for_key
from pyspark_log.client.producer_batch import (
    BATCH_OVERHEAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    ColumnarDelivery,
    ProducerBatch,
    Thunk,
)
from pyspark_log.client.send_prep import HeadersArg, check_record_size, prepare_record
from pyspark_log.client.sender import Sender
from pyspark_log.client.transactions import ProducerTransactions, TransactionHandle, TxnRequests
from pyspark_log.client.txn_manager import TransactionManager, TxnState
from pyspark_log.client.types import RecordMetadata, TopicPartition
from pyspark_log.records.batch import RecordFields
from pyspark_log.records.compression import CODEC_BY_NAME
from pyspark_log.wire import ApiKey, KafkaError

if TYPE_CHECKING:
    from pyspark_log.records.columnar_encode import ArrowRecords

log = logging.getLogger(__name__)


class AsyncProducer:
    """The producer core. All methods run on one event loop (the one ``start`` ran on)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        connector: Connector = open_tcp,
    ) -> None:
        self.config = cfg.parse(cfg.PRODUCER, config, "producer")
        c = self.config
        self.idempotent = cfg.resolve_idempotence(c)
        self._clock = clock
        self._rng = rng or random.Random()
        self.acks: int = c["acks"]
        self.max_block_ms: float = c["max.block.ms"]
        self.max_request_bytes: int = c["max.request.size"]
        self._ignore_keys: bool = c["partitioner.ignore.keys"]
        self.pool = BufferPool(c["buffer.memory"])
        # the largest record size estimate that passes check_record_size
        self.record_size_limit = min(self.max_request_bytes - BATCH_OVERHEAD_BYTES, self.pool.total_bytes)
        self.cluster = Cluster(
            c,
            clock=clock,
            rng=self._rng,
            connector=connector,
            allow_auto_topic_creation=True,
            max_in_flight=c["max.in.flight.requests.per.connection"],
        )
        self.accumulator = RecordAccumulator(
            batch_size_bytes=c["batch.size"],
            linger_ms=c["linger.ms"],
            retry_backoff=ExponentialBackoff(c["retry.backoff.ms"], c["retry.backoff.max.ms"], rng=self._rng),
            codec=CODEC_BY_NAME[c["compression.type"]],
            release=self.pool.release,
            memory_pressure=self.pool.has_waiters,
            guarantee_order=c["max.in.flight.requests.per.connection"] == 1,
        )
        self._sticky = StickyPartitioner(self._rng)
        # The batch API's sticky partitions: chosen off the loop (the caller's thread or an
        # executor), so they have their own state and lock.
        self._batch_sticky = StickyPartitioner(self._rng)
        self._batch_sticky_lock = threading.Lock()
        self.sender: Sender | None = None
        self._backoff = ExponentialBackoff(c["retry.backoff.ms"], c["retry.backoff.max.ms"], rng=self._rng)
        self.txn: TransactionManager | None = None
        self._txns: ProducerTransactions | None = None
        self._pid_task: asyncio.Task[None] | None = None
        if self.idempotent:
            self.txn = TransactionManager(c["transactional.id"] or None, c["transaction.timeout.ms"])
            self.txn.on_error = self._on_txn_error
            if self.txn.transactional:
                self._txns = ProducerTransactions(self, self.txn, TxnRequests(self.cluster, self._backoff))
        self._fatal: BaseException | None = None
        self._closed = False
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Records queued by other threads (the sync facade), drained on the loop in order.
        self._handoff = Handoff(self, self.pool.lock)
        # send()'s common case from those threads (lane_writer.py): shut until started
        self.lane_writer = self._handoff.lanes
        self.lane_writer.configure(
            self.pool, self.cluster, RECORD_OVERHEAD_BYTES, self.record_size_limit, self._ignore_keys
        )
        if self.txn is not None:
            self.txn.on_transition = self._update_lane_gate
        self._parked: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def batch_size_bytes(self) -> int:
        return self.accumulator.batch_size_bytes

    async def start(self) -> AsyncProducer:
        if self._started:
            return self
        self._loop = asyncio.get_running_loop()
        self._handoff.bind(self._loop)
        await self.cluster.start(max(self.max_block_ms, self.config["request.timeout.ms"]))
        await self._check_idempotence()
        c = self.config
        self.sender = Sender(
            cluster=self.cluster,
            accumulator=self.accumulator,
            clock=self._clock,
            acks=self.acks,
            retries=c["retries"],
            request_timeout_ms=c["request.timeout.ms"],
            delivery_timeout_ms=c["delivery.timeout.ms"],
            max_request_bytes=self.max_request_bytes,
            max_in_flight=c["max.in.flight.requests.per.connection"],
            on_fatal=self._fail_all,
            txn=self.txn,
            on_need_producer_id=self._renew_producer_id,
        )
        self.sender.start()
        self._started = True
        self._update_lane_gate()
        return self

    async def _check_idempotence(self) -> None:
        """Fall back or fail when the broker lacks InitProducerId; get the idempotent producer id."""
        txn = self.txn
        if txn is None:
            return
        conn = await self.cluster.any_connection()
        if not conn.supports(ApiKey.INIT_PRODUCER_ID):
            if txn.transactional or self.config["enable.idempotence"]:
                what = "transactional.id" if txn.transactional else "enable.idempotence=true"
                raise UnsupportedFeatureError(
                    f"{what} needs InitProducerId (22), which the broker does not advertise; "
                    "set enable.idempotence=false (and no transactional.id) to produce without it"
                )
            log.warning(
                "the broker does not advertise InitProducerId (22): producing without idempotence "
                "(set enable.idempotence=false to silence this)"
            )
            self.txn = None
            self.idempotent = False
            return
        self.accumulator.sequencer = txn
        if txn.transactional:
            return  # init_transactions() gets the id
        txn.transition_to(TxnState.INITIALIZING)
        deadline = asyncio.get_running_loop().time() + self.max_block_ms / 1000.0
        requests = TxnRequests(self.cluster, self._backoff)
        pid, epoch = await requests.init_producer_id(None, 2**31 - 1, deadline_s=deadline)
        txn.set_producer_id_and_epoch(pid, epoch)
        txn.transition_to(TxnState.READY)

    def _renew_producer_id(self) -> None:
        """The idempotent producer's epoch ran out: get a new producer id in the background."""
        if self._pid_task is not None and not self._pid_task.done():
            return

        async def renew() -> None:
            assert self.txn is not None
            pid, epoch = await TxnRequests(self.cluster, self._backoff).init_producer_id(None, 2**31 - 1)
            self.txn.set_producer_id_and_epoch(pid, epoch)
            self.wakeup_sender()

        self._pid_task = asyncio.get_running_loop().create_task(renew(), name="pylog-init-producer-id")

    def wakeup_sender(self) -> None:
        if self.sender is not None:
            self.sender.wakeup()

    def _on_txn_error(self, exc: BaseException) -> None:
        """An abortable error fails the batches not sent yet; a fatal one fails everything."""
        assert self._loop is not None
        txn = self.txn
        if txn is not None and txn.has_fatal_error:
            self._loop.call_soon(self.accumulator.abort_all, exc)
        else:
            self._loop.call_soon(self.fail_unsent, exc)

    def fail_unsent(self, exc: BaseException) -> None:
        """Fail records queued but never sent (the sync facade's hand-off queue first)."""
        self._handoff.drain()
        self.accumulator.abort_undrained(exc)

    async def __aenter__(self) -> AsyncProducer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._fatal is not None:
            raise ClientClosedError(f"the producer failed and cannot send: {self._fatal!r}")
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if not self._started:
            raise ClientClosedError("the producer is not started (await start() or use 'async with')")

    def _update_lane_gate(self) -> None:
        """Tell the lane whether a send may skip ``check_send`` (``LaneWriter.accepting``): on
        start, close, a fatal error and each transaction-state change (KIP-98: an idempotent
        producer in FATAL_ERROR or ABORTABLE_ERROR refuses sends; a transactional one always
        looks, its sends need an open transaction)."""
        txn = self.txn
        self.lane_writer.set_healthy(
            self._started
            and not self._closed
            and self._fatal is None
            and (
                txn is None
                or not (txn.transactional or txn.state is TxnState.FATAL_ERROR or txn.state is TxnState.ABORTABLE_ERROR)
            )
        )

    def check_send(self) -> None:
        """``_check_open`` plus the transaction state (a transactional send needs a transaction)."""
        self._check_open()
        if self.txn is not None:
            self.txn.check_send()
            if self._txns is not None and self._txns.preparing:
                raise IllegalTransactionStateError("cannot send: the transaction is being prepared (or is prepared)")

    def _fail_all(self, exc: BaseException) -> None:
        """The sender died: fail every record waiting on it and refuse new ones."""
        self._fatal = exc
        self._update_lane_gate()
        err = exc if isinstance(exc, KafkaError) else ClientClosedError(f"producer sender died: {exc!r}")
        self.accumulator.abort_all(err)
        self._handoff.abort(err)

    # -- send ----------------------------------------------------------------------------------

    def check_record_size(self, size: int) -> None:
        """``RecordTooLargeError`` for a record whose size estimate exceeds the limits."""
        check_record_size(size, self.max_request_bytes, self.pool.total_bytes)

    def prepare(  # noqa: PLR0917 - send()'s arguments
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Validate and build the record (``send_prep.prepare_record``). Thread-safe."""
        return prepare_record(
            topic,
            value,
            key,
            headers,
            partition,
            timestamp_ms,
            self._clock.wall_ms,
            self.max_request_bytes,
            self.pool.total_bytes,
            on_delivery,
        )

    def partition_maybe_new(self, topic: str, partition: int | None) -> bool:
        """``partition`` is beyond the cached partition count: partitions may have been added
        since the last metadata refresh, so refresh before ``check_partition`` rejects it."""
        count = self.cluster.metadata.partition_count(topic)
        return partition is not None and count is not None and partition >= count

    def check_partition(self, topic: str, partition: int | None) -> None:
        if partition is None:
            return
        count = self.cluster.metadata.partition_count(topic)
        if count is not None and partition >= count:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist (it has {count})"
            )

    async def send(  # noqa: PLR0917 - Kafka's record fields, positionally as in ProducerRecord
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns a future of its ``RecordMetadata`` (see the module doc)."""
        self.check_send()
        record = self.prepare(topic, value, key, headers, partition, timestamp_ms)
        size = record._size
        deadline = self._clock.monotonic_ms() + self.max_block_ms
        if self.cluster.metadata.partition_count(topic) is None:
            await self.cluster.wait_for_topic(topic, self.max_block_ms)
        if self.partition_maybe_new(topic, partition):
            await self.cluster.refresh(self.max_block_ms)
        self.check_partition(topic, partition)
        remaining = max(deadline - self._clock.monotonic_ms(), 0.0)
        if not await self.pool.reserve(size, remaining / 1000.0):
            self.cluster.metrics.sensor("buffer-exhausted").record()  # producer-metrics buffer-exhausted-*
            raise BufferExhaustedError(f"failed to allocate {size} bytes within max.block.ms={self.max_block_ms:.0f}")
        self._check_open()
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()

        def thunk(meta: RecordMetadata | None, exc: BaseException | None) -> None:
            if not fut.done():
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(meta)  # type: ignore[arg-type]
            if on_delivery is not None:
                on_delivery(meta, exc)

        self._append(topic, partition, record, size, thunk)
        return fut

    async def send_batch(
        self,
        topic: str,
        data: Any,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Callable[[int | None, BaseException | None], None] | None = None,
    ) -> asyncio.Future[int]:
        """Queue many records at once (see the sync ``Producer.send_batch`` for the columns and
        the semantics); returns a future of the record count. Partitioning and encoding run in
        the loop's default executor, so the loop keeps serving I/O meanwhile."""
        self.check_send()
        loop = asyncio.get_running_loop()
        records, explicit, estimates = await loop.run_in_executor(
            None, self.batch_records, topic, data, partition, timestamp_ms
        )
        fut: asyncio.Future[int] = loop.create_future()
        if len(records) == 0:
            fut.set_result(0)
            return fut
        deadline = self._clock.monotonic_ms() + self.max_block_ms
        if self.cluster.metadata.partition_count(topic) is None:
            await self.cluster.wait_for_topic(topic, self.max_block_ms)
        highest = int(explicit.max()) if explicit is not None else None
        if self.partition_maybe_new(topic, highest):
            await self.cluster.refresh(self.max_block_ms)
        self.check_partition(topic, highest)

        def done(n: int | None, exc: BaseException | None) -> None:
            if not fut.done():
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(n)  # type: ignore[arg-type]
            if on_delivery is not None:
                on_delivery(n, exc)

        delivery = ColumnarDelivery(len(records), done)
        groups = await loop.run_in_executor(
            None, lambda: list(self.batch_groups(topic, records, explicit, estimates, delivery))
        )
        try:
            for tp, group in groups:
                size = sum(b.reserved_bytes for b in group)
                await self._reserve_until(size, deadline)
                self._check_open()
                self._append_columns(tp, group)
        except BaseException as exc:
            delivery.fail(exc)
            raise
        return fut

    async def _reserve_until(self, size: int, deadline_ms: float) -> None:
        remaining = max(deadline_ms - self._clock.monotonic_ms(), 0.0)
        if not await self.pool.reserve(size, remaining / 1000.0):
            self.cluster.metrics.sensor("buffer-exhausted").record()  # producer-metrics buffer-exhausted-*
            raise BufferExhaustedError(f"failed to allocate {size} bytes within max.block.ms={self.max_block_ms:.0f}")

    def batch_records(
        self, topic: str, data: Any, partition: int | None, timestamp_ms: int | None
    ) -> tuple[ArrowRecords, Any, Any]:
        """The batch API's records, explicit partitions and size estimates (``columnar_send``)."""
        from pyspark_log.client import columnar_send  # pyarrow: imported on first use

        return columnar_send.prepare(self, topic, data, partition, timestamp_ms)

    def batch_groups(
        self, topic: str, records: ArrowRecords, explicit: Any, estimates: Any, delivery: ColumnarDelivery
    ) -> Iterator[tuple[TopicPartition, list[ProducerBatch]]]:
        """The batch API's encoded batches in runs per partition (``columnar_send.groups``)."""
        from pyspark_log.client import columnar_send

        return columnar_send.groups(self, topic, records, explicit, estimates, delivery=delivery)

    def batch_sticky(self, topic: str, count: int, previous: int | None) -> int:
        """The batch API's sticky partition of ``topic`` (``previous``: move on from it). Thread-safe."""
        with self._batch_sticky_lock:
            available = self.cluster.metadata.available_partitions(topic)
            if previous is None:
                return self._batch_sticky.partition(topic, count, available)
            return self._batch_sticky.on_new_batch(topic, count, available, previous)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> RecordMetadata:
        fut = await self.send(topic, value, key, **kwargs)
        return await fut

    def _append(self, topic: str, partition: int | None, record: RecordFields, reserved: int, thunk: Thunk) -> None:
        """Choose the partition and append (on the loop). Parks the record if metadata vanished."""
        meta = self.cluster.metadata
        count = meta.partition_count(topic)
        if count is None:
            task = asyncio.get_running_loop().create_task(self._append_later(topic, partition, record, reserved, thunk))
            self._parked.add(task)
            task.add_done_callback(self._parked.discard)
            return
        now = self._clock.monotonic_ms()
        if partition is not None:
            tp = TopicPartition(topic, partition)
            result = self.accumulator.append(tp, record, thunk, now, reserved_bytes=reserved, size_bytes=reserved)
        elif record.key is not None and not self._ignore_keys:
            tp = TopicPartition(topic, partition_for_key(record.key, count))
            result = self.accumulator.append(tp, record, thunk, now, reserved_bytes=reserved, size_bytes=reserved)
        else:
            p = self._sticky.partition(topic, count, lambda: meta.available_partitions(topic))
            tp = TopicPartition(topic, p)
            result = self.accumulator.append(
                tp, record, thunk, now, reserved_bytes=reserved, abort_on_new_batch=True, size_bytes=reserved
            )
            if not result.appended:
                p = self._sticky.on_new_batch(topic, count, meta.available_partitions(topic), p)
                tp = TopicPartition(topic, p)
                result = self.accumulator.append(tp, record, thunk, now, reserved_bytes=reserved, size_bytes=reserved)
        if self._txns is not None:
            self._txns.on_append(tp)
        if (result.batch_is_full or result.new_batch_created) and self.sender is not None:
            self.sender.wakeup()

    async def _append_later(
        self, topic: str, partition: int | None, record: RecordFields, reserved: int, thunk: Thunk
    ) -> None:
        try:
            await self.cluster.wait_for_topic(topic, self.max_block_ms)
        except (KafkaError, asyncio.CancelledError) as exc:
            self.pool.release(reserved)
            err = exc if isinstance(exc, KafkaError) else ClientClosedError()
            thunk(None, err)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        self._append(topic, partition, record, reserved, thunk)

    # -- the sync facade's path: records from other threads (handoff.py) ---------------------

    def enqueue_threadsafe(self, record: RecordFuture, *, checked: bool = False) -> None:
        """Queue a record from a non-loop thread (its ``_size`` of memory already reserved);
        drained in order. ``checked``: the caller ran ``check_send`` just before (the hot path)."""
        if not checked:
            self.check_send()
        self._handoff.put(record)

    def enqueue_columns_threadsafe(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None:
        """Queue the batch API's encoded batches of ``tp`` from a non-loop thread (their
        ``buffer.memory`` already reserved), in order with records from ``send()``."""
        self.check_send()
        self._handoff.put((tp, batches))

    # HandoffTarget: what the drain of the hand-off queue uses (on the loop)

    def cluster_metadata(self) -> ClusterMetadata:
        return self.cluster.metadata

    def ignore_keys(self) -> bool:
        return self._ignore_keys

    def now_ms(self) -> float:
        return self._clock.monotonic_ms()

    def append_one(self, record: RecordFuture) -> None:
        self._append(record._topic, record._partition, record, record._size, record)

    def append_columns(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None:
        self._append_columns(tp, batches)

    def sticky_partition(self, topic: str, count: int) -> int:
        meta = self.cluster.metadata
        return self._sticky.partition(topic, count, lambda: meta.available_partitions(topic))

    def sticky_next(self, topic: str, count: int, previous: int) -> int:
        return self._sticky.on_new_batch(topic, count, self.cluster.metadata.available_partitions(topic), previous)

    def appended(self, tps: list[TopicPartition], wake_sender: bool) -> None:
        if self._txns is not None:
            for tp in tps:
                self._txns.on_append(tp)
        if wake_sender and self.sender is not None:
            self.sender.wakeup()

    def release(self, reserved: int) -> None:
        self.pool.release(reserved)

    def is_dead(self) -> bool:
        return self._fatal is not None or self._closed

    def _append_columns(self, tp: TopicPartition, batches: list[ProducerBatch]) -> None:
        """Queue columnar batches (on the loop): the transaction hears of the partition first."""
        self.accumulator.append_columns(tp, batches)
        if self._txns is not None:
            self._txns.on_append(tp)
        if self.sender is not None:
            self.sender.wakeup()

    # -- flush, close, metadata ----------------------------------------------------------------

    async def flush(self, timeout_ms: float | None = None) -> None:
        """Send everything queued now and wait until each record completes (or ``timeout_ms``)."""
        if not self._started:
            return
        self._handoff.drain()
        pending = self.accumulator.incomplete()
        if not pending and not self._parked:
            return
        self.accumulator.begin_flush()
        try:
            if self.sender is not None:
                self.sender.wakeup()
            waits = [self._batch_done(b) for b in pending] + list(self._parked)
            try:
                async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000.0):
                    await asyncio.gather(*waits)
            except TimeoutError:
                raise KafkaTimeoutError(f"flush did not complete within {timeout_ms:.0f} ms") from None
        finally:
            self.accumulator.end_flush()

    def _batch_done(self, batch: Any) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(_batch: Any) -> None:
            if not fut.done():
                fut.set_result(None)

        batch.add_done_callback(done)
        return fut

    async def close(self, timeout_ms: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout_ms``, default unbounded), then release everything.

        Records still incomplete at the deadline fail with ``ClientClosedError``."""
        if self._closed:
            return
        if self._txns is not None and self._started and self._fatal is None:
            await self._txns.on_close(timeout_ms)
        if self._started and self._fatal is None:
            try:
                await self.flush(timeout_ms)
            except KafkaTimeoutError:
                log.warning("producer closed with undelivered records after %s ms", timeout_ms)
        self._closed = True
        self._update_lane_gate()
        self.accumulator.closing = True
        if self._txns is not None:
            await self._txns.cancel()
        if self._pid_task is not None:
            self._pid_task.cancel()
        if self.sender is not None:
            await self.sender.stop()
        for task in list(self._parked):
            task.cancel()
        err = ClientClosedError("the producer was closed before the record was delivered")
        self.accumulator.abort_all(err)
        self._handoff.abort(err)
        await self.cluster.close()

    def metrics(self) -> Metrics:
        """Kafka's producer metrics by group and name (``metrics.py``): ``producer-metrics``
        with record-send-rate, request-latency-avg, buffer-available-bytes, ..."""
        return producer_metrics(
            self.cluster.metrics,
            buffer_available=self.pool.available_bytes,
            buffer_total=self.pool.total_bytes,
            in_flight=self.sender.in_flight_requests if self.sender is not None else 0,
            waiting_threads=self.pool._thread_waiters + len(self.pool._loop_waiters),
        )

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic`` (waits up to ``max.block.ms`` for its metadata)."""
        self._check_open()
        meta = await self.cluster.wait_for_topic(topic, self.max_block_ms)
        return sorted(meta.partitions)

    # -- transactions (transactions.py) -------------------------------------------------------------

    def _transactions(self) -> ProducerTransactions:
        if self._txns is None:
            raise IllegalTransactionStateError("this producer has no transactional.id: transactions are not available")
        if not self._started or self._closed:
            raise ClientClosedError("the producer is not started or is closed")
        return self._txns

    async def init_transactions(self, timeout_ms: float | None = None) -> None:
        """Get the producer id and epoch of ``transactional.id``, fencing older producers of the id
        and completing their open transaction. Once per producer, before the first transaction."""
        await self._transactions().init_transactions(timeout_ms)

    def begin_transaction(self) -> None:
        """Start a transaction (no round trip); ``send`` is only allowed inside one."""
        self._transactions().begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: str | ConsumerGroupMetadata,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit consumer offsets (the next offsets to read) of a group as part of the
        transaction: visible to the group only if the transaction commits. ``group`` is the
        consumer's ``group_metadata()`` (KIP-447: the coordinator refuses the offsets of a
        generation that is over, ``CommitFailedError``, and the transaction must be aborted) or
        a bare group id (no membership checked)."""
        await self._transactions().send_offsets_to_transaction(offsets, group, timeout_ms)

    async def commit_transaction(self, timeout_ms: float | None = None) -> None:
        """Flush, then commit. A ``TransactionAbortableError`` means: abort and try again."""
        await self._transactions().commit_transaction(timeout_ms)

    async def abort_transaction(self, timeout_ms: float | None = None) -> None:
        """Abort the transaction: unsent records fail, sent ones are never visible to read_committed."""
        await self._transactions().abort_transaction(timeout_ms)

    async def prepare_transaction(self, timeout_ms: float | None = None) -> TransactionHandle:
        """Flush and return a handle for ``complete_transaction``; afterwards only ``close``."""
        return await self._transactions().prepare_transaction(timeout_ms)
