"""The producer's sender: one task that moves batches from the accumulator to partition leaders.

Each round (``_run_once``) it

1. fails queued batches older than ``delivery.timeout.ms`` (``KafkaTimeoutError``);
2. asks the accumulator which leaders have a sendable batch; topics without a known leader
   trigger a metadata refresh;
3. skips leaders that are not connected (starting a connect in the background) or that already
   have ``max.in.flight.requests.per.connection`` Produce requests outstanding;
4. drains up to ``max.request.size`` per leader and sends one Produce request per leader, each in
   its own request task (tracked; cancelled on close);

then sleeps until woken (a record appended that filled or opened a batch, a response, a new
connection, new metadata, a flush) or until the accumulator's next linger/backoff deadline.

Responses, per partition (Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs"): success
completes the batch with its base offset (and
LogAppendTime); MESSAGE_TOO_LARGE splits a multi-record batch in two; a retriable error re-queues
the batch with backoff while ``retries`` and ``delivery.timeout.ms`` allow (refreshing metadata
after NOT_LEADER_OR_FOLLOWER and friends); anything else fails the batch with the Kafka error.
A broken connection or request timeout counts as a retriable error for every batch in flight
on it. With ``acks=0`` there is no response: batches complete with offset -1 once written.

With idempotence (``txn``, a ``TransactionManager``) the accumulator asks it which head batches
may be drained and it assigns sequences at drain time; each round first settles unresolved
sequences and applies a requested epoch bump. Responses go through ``txn.can_retry`` (Kafka's
rules for OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID); a batch is only retried with the
producer id and epoch it was given, DUPLICATE_SEQUENCE_NUMBER completes it (offset -1), and
fatal errors (fencing) end the producer.

If the sender task dies from an unexpected exception, every incomplete batch fails with it and
the producer refuses new records (``_fail_all``; docs/architecture.md ("one owner per file and per background loop")).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.clock import Clock
from pyspark_log.client.cluster import STALE_METADATA_ERRORS, Cluster
from pyspark_log.client.errors import BrokerConnectionError, KafkaTimeoutError, error_for
from pyspark_log.client.metrics import metrics_of, record_produce_request
from pyspark_log.client.producer_batch import ProducerBatch, encode_sections
from pyspark_log.client.tasks import cancel_and_wait
from pyspark_log.client.txn_manager import TransactionManager, fatal_error
from pyspark_log.records.header import NO_SEQUENCE
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)

MAX_IDLE_WAIT_MS = 1000.0


class Sender:
    """Owns the send loop task and the Produce request tasks it spawns."""

    def __init__(
        self,
        *,
        cluster: Cluster,
        accumulator: RecordAccumulator,
        clock: Clock,
        acks: int,
        retries: int,
        request_timeout_ms: float,
        delivery_timeout_ms: float,
        max_request_bytes: int,
        max_in_flight: int,
        on_fatal: Callable[[BaseException], None],
        txn: TransactionManager | None = None,
        on_need_producer_id: Callable[[], None] = lambda: None,
    ) -> None:
        self._cluster = cluster
        self._acc = accumulator
        self._clock = clock
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight
        self._on_fatal = on_fatal
        self._txn = txn
        self._on_need_producer_id = on_need_producer_id
        self._wakeup = asyncio.Event()
        self._in_flight: dict[int, int] = {}
        self._requests: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._metrics = metrics_of(cluster)  # per request and per batch, never per record (metrics.py)
        cluster.add_listener(self.wakeup)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pylog-sender")

    def wakeup(self) -> None:
        self._wakeup.set()

    @property
    def in_flight_requests(self) -> int:
        return sum(self._in_flight.values())

    async def stop(self) -> None:
        """Stop the loop and cancel outstanding requests (their batches stay incomplete)."""
        self._stopping = True
        await cancel_and_wait((self._task, *self._requests))

    # -- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not self._stopping:
                delay_ms = self._run_once()
                if not self._wakeup.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay_ms / 1000.0):
                            await self._wakeup.wait()
                self._wakeup.clear()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("producer sender died")
            self._on_fatal(exc)
            raise

    def _run_once(self) -> float:
        now = self._clock.monotonic_ms()
        for batch in self._acc.expire(now, self.delivery_timeout_ms):
            self._fail(
                batch,
                KafkaTimeoutError(
                    f"expiring {batch.record_count} record(s) for {batch.tp}: "
                    f"{now - batch.created_ms:.0f} ms has passed since batch creation (delivery.timeout.ms)"
                ),
                rejected=False,
            )
        txn = self._txn
        if txn is not None:
            txn.maybe_resolve_sequences()
            if txn.bump_idempotent_epoch():
                self._on_need_producer_id()
        meta = self._cluster.metadata
        check = self._acc.ready(meta, now)
        if check.unknown_leader_topics:
            self._cluster.add_topics(check.unknown_leader_topics)
            self._cluster.request_update()
        delay = min(check.next_ready_check_delay_ms, MAX_IDLE_WAIT_MS)
        nodes = []
        for node in check.ready_nodes:
            if self._cluster.connection_if_ready(node) is None:
                self._cluster.start_connect(node)
                backoff = self._cluster.backoff_remaining_ms(node)
                if backoff > 0:
                    delay = min(delay, backoff)
                continue
            if self._in_flight.get(node, 0) >= self.max_in_flight:
                continue
            nodes.append(node)
        if nodes:
            drained = self._acc.drain(meta, nodes, self.max_request_bytes, now)
            for node, batches in drained.items():
                self._spawn(node, batches)
            if drained:
                # More may be sendable behind what was drained (a drain takes one batch per
                # partition): go round again once the new requests are written, as Kafka's
                # sender polls without waiting while data is sendable, so up to
                # max.in.flight.requests.per.connection requests fill instead of one per wake-up.
                return 0.0
        return max(delay, 0.0)

    def _spawn(self, node: int, batches: list[ProducerBatch]) -> None:
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        task = asyncio.get_running_loop().create_task(self._produce(node, batches), name=f"pylog-produce-{node}")
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    # -- one Produce request -------------------------------------------------------------------

    def _body(self, batches: list[ProducerBatch]) -> dict[str, Any]:
        encode_sections(batches)  # the request's send() batches in one columnar pass
        by_topic: dict[str, list[dict[str, Any]]] = {}
        sizes: list[int] = []
        for batch in batches:
            data = batch.encode(self._acc.codec)
            sizes.append(len(data))
            by_topic.setdefault(batch.tp.topic, []).append({"index": batch.tp.partition, "records": data})
        record_produce_request(self._metrics, batches, sizes, self._acc.codec != 0)
        return {
            "transactional_id": self._txn.transactional_id if self._txn is not None else None,
            "acks": self.acks,
            "timeout_ms": int(self.request_timeout_ms),
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in by_topic.items()],
        }

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        try:
            conn = self._cluster.connection_if_ready(node)
            try:
                if conn is None and self._txn is not None:
                    # The connection broke between the drain and now. Fail the batches as a broken
                    # connection fails in-flight requests (they go back to their queues in sequence
                    # order): sending them on the next connection from here could let batches
                    # drained after them reach the broker first, out of sequence (KIP-98).
                    raise BrokerConnectionError(f"the connection to node {node} broke before the request was sent")
                if conn is None:
                    conn = await self._cluster.connection(node)
                body = self._body(batches)
                resp = await conn.request(ApiKey.PRODUCE, body, expect_response=self.acks != 0)
            except KafkaError as exc:
                now = self._clock.monotonic_ms()
                self._cluster.request_update()
                for batch in batches:
                    self._retry_or_fail(batch, exc, now)
                return
            if resp is None:
                for batch in batches:
                    self._complete(batch, -1)
                return
            self._handle_response(batches, resp)
        finally:
            self._in_flight[node] -= 1
            self.wakeup()

    def _handle_response(self, batches: list[ProducerBatch], resp: Message) -> None:
        now = self._clock.monotonic_ms()
        self._metrics.sensor("produce-throttle-time").record(resp.get("throttle_time_ms") or 0, now)
        answers: dict[tuple[str, int], Message] = {}
        for topic in resp.responses:
            for part in topic.partition_responses:
                answers[(topic.name, part.index)] = part
        for batch in batches:
            part = answers.get((batch.tp.topic, batch.tp.partition))
            if part is None:
                self._retry_or_fail(batch, error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for partition"), now)
                continue
            code = ErrorCode.of(part.error_code)
            if code == ErrorCode.NONE:
                self._complete(batch, part.base_offset, part.log_append_time_ms)
                continue
            detail = part.error_message or (
                part.record_errors[0].batch_index_error_message if part.record_errors else None
            )
            exc = error_for(code, detail, context=f"produce to {batch.tp}")
            if code == ErrorCode.MESSAGE_TOO_LARGE and batch.record_count > 1:
                self._metrics.sensor("batch-split").record(1, now)
                self._acc.split_and_reenqueue(batch, now)
                continue
            if code in STALE_METADATA_ERRORS:
                self._cluster.request_update()
            self._retry_or_fail(batch, exc, now, part.log_start_offset)

    def _retry_or_fail(self, batch: ProducerBatch, exc: KafkaError, now: float, log_start_offset: int = -1) -> None:
        if batch.done:
            return
        txn = self._txn
        if txn is not None and exc.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and txn.written_before(batch):
            self._complete(batch, -1)  # a later batch of this epoch was acknowledged: this one was written
            return
        within_deadline = now - batch.created_ms < self.delivery_timeout_ms
        if batch.attempts < self.retries and within_deadline and not self._stopping:
            if txn is None or batch.base_sequence == NO_SEQUENCE:
                retry = exc.retriable
            else:
                retry = txn.can_retry(batch, exc.code, log_start_offset)
            if retry:
                if txn is not None and batch.base_sequence != NO_SEQUENCE and not txn.batch_is_current(batch):
                    stale = KafkaError(exc.code, f"{exc}; not retried: the producer id or epoch changed")
                    self._fail(batch, stale, rejected=False)
                    return
                log.debug("retrying %s after %s", batch, exc)
                self._metrics.sensor("record-retry").record(batch.record_count, now)
                self._acc.reenqueue(batch, now)
                return
        if txn is not None and exc.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            self._complete(batch, -1)  # written before; the broker no longer knows its offset
            return
        self._fail(batch, exc, rejected=not exc.retriable and exc.code != ErrorCode.REQUEST_TIMED_OUT)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int = -1) -> None:
        if self._txn is not None and not batch.done:
            self._txn.on_completed(batch, base_offset)
        batch.complete(base_offset, log_append_time_ms)

    def _fail(self, batch: ProducerBatch, exc: KafkaError, *, rejected: bool) -> None:
        if batch.done:
            return
        self._metrics.sensor("record-error").record(batch.record_count)
        if self._txn is not None:
            if exc.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
                exc = fatal_error(exc.code, f"produce to {batch.tp} refused")
            self._txn.on_failed(batch, exc, rejected=rejected)
        batch.fail(exc)
