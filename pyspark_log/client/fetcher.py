"""The consumer's fetcher: positions per assigned partition and a prefetching fetch task (the
asyncio driver; the parsing of fetched record batches is the pure ``fetch_parse.parse_fetched``).

``Fetcher`` owns one background task. It resets positions that need it (ListOffsets for
``seek_to_beginning``/``seek_to_end``/``auto.offset.reset``), and keeps one Fetch request in
flight per leader for the partitions that have a position, are not paused and have no
undelivered data buffered (so the buffer holds at most one completed fetch per partition:
bounded prefetch). ``poll`` drains the buffer. A seek bumps the partition's generation, and
results of older generations are dropped. Errors: OFFSET_OUT_OF_RANGE resets per
``auto.offset.reset`` or, with ``none``, is raised from ``poll`` as ``OffsetOutOfRangeError``;
stale-leader errors refresh metadata and retry with backoff; other errors are raised from
``poll``. If the task dies, ``poll`` raises its error (docs/architecture.md: every background
loop has one owning task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import Clock
from pyspark_log.client.cluster import STALE_METADATA_ERRORS, Cluster
from pyspark_log.client.errors import OffsetOutOfRangeError, ProtocolError, RecordTooLargeError, error_for
from pyspark_log.client.fetch_parse import parse_fetched
from pyspark_log.client.metrics import metrics_of, record_fetch, record_lag
from pyspark_log.client.offsets import list_offsets
from pyspark_log.client.tasks import cancel_and_wait
from pyspark_log.client.types import (
    AbortedTransaction,
    ConsumerRecord,
    IsolationLevel,
    OffsetAndTimestamp,
    OffsetSpec,
    TopicPartition,
)
from pyspark_log.records.errors import RecordError
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PartitionState:
    """Per assigned partition. ``position`` None: to be reset to ``reset_to`` (an OffsetSpec)."""

    position: int | None = None
    reset_to: int | None = None
    generation: int = 0
    paused: bool = False
    failed: bool = False
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    retry_at_ms: float = 0.0
    failures: int = 0


@dataclass(slots=True)
class CompletedFetch:
    generation: int
    records: list[ConsumerRecord]
    next_offset: int
    index: int = 0


@dataclass
class FetchSettings:
    min_bytes: int
    max_wait_ms: int
    max_bytes: int
    partition_max_bytes: int
    isolation_level: IsolationLevel
    auto_offset_reset: str
    check_crcs: bool
    request_timeout_ms: float
    default_api_timeout_ms: float
    rack: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Fetcher:
    """Positions, prefetch buffer and the fetch task of one consumer (on its loop)."""

    def __init__(self, cluster: Cluster, settings: FetchSettings, clock: Clock, backoff: ExponentialBackoff) -> None:
        self._cluster = cluster
        self.settings = settings
        self._clock = clock
        self._backoff = backoff
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self._buffer: dict[TopicPartition, CompletedFetch] = {}
        # Errors for poll to raise, with the partition and generation they belong to (a seek
        # since then makes them moot); partition None: not tied to one.
        self._errors: deque[tuple[TopicPartition | None, int, KafkaError]] = deque()
        self._wakeup = asyncio.Event()
        self.data_ready = asyncio.Event()
        self._nodes_in_flight: set[int] = set()
        self._requests: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self.dead: BaseException | None = None
        self._metrics = metrics_of(cluster)  # per Fetch response and per partition (metrics.py)
        self._fetched_records = 0
        self._fetched_bytes = 0
        cluster.add_listener(self._wakeup.set)

    # -- assignment and positions (called by the consumer) ----------------------------------

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        wanted = list(dict.fromkeys(tps))
        self.assignment = {tp: self.assignment.get(tp) or self._new_state() for tp in wanted}
        for tp in [tp for tp in self._buffer if tp not in self.assignment]:
            del self._buffer[tp]
        if self._cluster.add_topics(tp.topic for tp in wanted):
            self._cluster.request_update()
        self._wakeup.set()

    def _new_state(self) -> PartitionState:
        policy = self.settings.auto_offset_reset
        spec = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}.get(policy)
        return PartitionState(reset_to=spec)

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return st

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.state(tp)
        st.position, st.reset_to = offset, None
        self._invalidate(tp, st)

    def request_reset(self, tp: TopicPartition, spec: int) -> None:
        st = self.state(tp)
        st.position, st.reset_to = None, spec
        self._invalidate(tp, st)

    def _invalidate(self, tp: TopicPartition, st: PartitionState) -> None:
        st.generation += 1
        st.failed = False
        st.retry_at_ms = 0.0
        self._buffer.pop(tp, None)
        self._wakeup.set()

    def set_paused(self, tps: Iterable[TopicPartition], paused: bool) -> None:
        for tp in tps:
            self.state(tp).paused = paused
        self._wakeup.set()

    # -- the task ----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pylog-fetcher")

    async def stop(self) -> None:
        await cancel_and_wait((self._task, *self._requests))

    async def _run(self) -> None:
        try:
            while True:
                self._wakeup.clear()
                delay_ms = await self._reset_positions()
                delay_ms = min(delay_ms, self._send_fetches())
                if not self._wakeup.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay_ms / 1000.0):
                            await self._wakeup.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("consumer fetcher died")
            self.dead = exc
            self.data_ready.set()
            raise

    async def _reset_positions(self) -> float:
        now = self._clock.monotonic_ms()
        todo = {
            tp: (st.reset_to, st.generation)
            for tp, st in self.assignment.items()
            if st.position is None and st.reset_to is not None and st.retry_at_ms <= now
        }
        for tp, st in self.assignment.items():
            if st.position is None and st.reset_to is None and not st.failed:
                msg = f"{tp} has no position and auto.offset.reset=none: seek to an offset first"
                self._fail(tp, st, OffsetOutOfRangeError({tp: -1}, msg))
        if not todo:
            return 1000.0
        specs = {tp: spec for tp, (spec, _) in todo.items() if spec is not None}
        results = await list_offsets(
            self._cluster,
            specs,
            isolation_level=self.settings.isolation_level,
            timeout_ms=self.settings.request_timeout_ms,
            backoff=self._backoff,
        )
        for tp, result in results.items():
            current = self.assignment.get(tp)
            if current is None or current.generation != todo[tp][1] or current.position is not None:
                continue
            st = current
            if isinstance(result, OffsetAndTimestamp):
                st.position, st.reset_to, st.failures = result.offset, None, 0
            elif (
                isinstance(result, KafkaError)
                and not result.retriable
                and result.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                self._fail(tp, st, result)
            else:
                self._retry_later(st)
        now = self._clock.monotonic_ms()
        waits = [
            st.retry_at_ms - now for st in self.assignment.values() if st.position is None and st.reset_to is not None
        ]
        return max(min(waits, default=1000.0), 0.0)

    def _retry_later(self, st: PartitionState) -> None:
        st.retry_at_ms = self._clock.monotonic_ms() + self._backoff.backoff_ms(st.failures)
        st.failures += 1

    def _send_fetches(self) -> float:
        now = self._clock.monotonic_ms()
        meta = self._cluster.metadata
        delay = 1000.0
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        for tp, st in self.assignment.items():
            if st.position is None or st.paused or st.failed or tp in self._buffer:
                continue
            if st.retry_at_ms > now:
                delay = min(delay, st.retry_at_ms - now)
                continue
            leader = meta.leader_for(tp)
            if leader is None:
                self._cluster.request_update()
                self._retry_later(st)
                continue
            if leader in self._nodes_in_flight:
                continue
            if self._cluster.connection_if_ready(leader) is None:
                self._cluster.start_connect(leader)
                delay = min(delay, max(self._cluster.backoff_remaining_ms(leader), 10.0))
                continue
            by_node.setdefault(leader, []).append((tp, st.position, st.generation))
        for node, parts in by_node.items():
            self._nodes_in_flight.add(node)
            task = asyncio.get_running_loop().create_task(self._fetch(node, parts), name=f"pylog-fetch-{node}")
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return delay

    def fetch_body(
        self, parts: list[tuple[TopicPartition, int, int]], *, max_wait_ms: int | None = None
    ) -> dict[str, Any]:
        s = self.settings
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, offset, _gen in parts:
            topics.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "fetch_offset": offset, "partition_max_bytes": s.partition_max_bytes}
            )
        return {
            "replica_id": -1,
            "max_wait_ms": s.max_wait_ms if max_wait_ms is None else max_wait_ms,
            "min_bytes": s.min_bytes,
            "max_bytes": s.max_bytes,
            "isolation_level": int(s.isolation_level),
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": s.rack,
        }

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            timeout = self.settings.request_timeout_ms + self.settings.max_wait_ms
            sent_ms = self._clock.monotonic_ms()
            try:
                resp = await self._cluster.send(node, ApiKey.FETCH, self.fetch_body(parts), timeout_ms=timeout)
            except KafkaError as exc:
                log.debug("fetch from node %s failed: %s", node, exc)
                if not exc.retriable:
                    self._errors.append((None, 0, exc))
                    self.data_ready.set()
                self._cluster.request_update()
                for tp, _offset, gen in parts:
                    st = self.assignment.get(tp)
                    if st is not None and st.generation == gen:
                        self._retry_later(st)
                return
            self._fetched_records = self._fetched_bytes = 0
            self._handle_response(resp, parts)
            latency_ms = self._clock.monotonic_ms() - sent_ms
            throttle_ms = resp.get("throttle_time_ms") or 0
            record_fetch(self._metrics, latency_ms, self._fetched_records, self._fetched_bytes, throttle_ms)
        finally:
            self._nodes_in_flight.discard(node)
            self._wakeup.set()

    def _handle_response(self, resp: Message, parts: list[tuple[TopicPartition, int, int]]) -> None:
        asked = {tp: (offset, gen) for tp, offset, gen in parts}
        top = ErrorCode.of(resp.error_code)
        for topic in resp.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                if tp not in asked:
                    continue
                offset, gen = asked.pop(tp)
                st = self.assignment.get(tp)
                if st is None or st.generation != gen or st.position != offset:
                    continue
                code = ErrorCode.of(part.error_code) if top == ErrorCode.NONE else top
                self._handle_partition(tp, st, part, code, offset)
        for tp, (_offset, gen) in asked.items():
            st = self.assignment.get(tp)
            if st is not None and st.generation == gen:
                self._retry_later(st)

    def _handle_partition(
        self, tp: TopicPartition, st: PartitionState, part: Message, code: ErrorCode, offset: int
    ) -> None:
        if part.high_watermark >= 0:
            st.high_watermark = part.high_watermark
        if part.last_stable_offset >= 0:
            st.last_stable_offset = part.last_stable_offset
        if part.log_start_offset >= 0:
            st.log_start_offset = part.log_start_offset
        if code == ErrorCode.NONE:
            aborted = [AbortedTransaction(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
            try:
                parsed = parse_fetched(
                    tp,
                    part.records,
                    offset,
                    read_committed=self.settings.isolation_level == IsolationLevel.READ_COMMITTED,
                    aborted=aborted,
                    check_crcs=self.settings.check_crcs,
                )
            except RecordError as exc:
                self._fail(tp, st, ProtocolError(f"corrupt records from {tp} at offset {offset}: {exc}"))
                return
            if parsed.complete_batches == 0 and part.records:
                too_large = f"{tp} has a batch at offset {offset} larger than the fetch size"
                self._fail(tp, st, RecordTooLargeError(too_large))
                return
            st.failures = 0
            self._fetched_records += len(parsed.records)
            self._fetched_bytes += len(part.records or b"")
            if part.high_watermark >= 0:
                record_lag(self._metrics, max(part.high_watermark - parsed.next_offset, 0))
            if parsed.records or parsed.next_offset > offset:
                self._buffer[tp] = CompletedFetch(st.generation, parsed.records, parsed.next_offset)
                if parsed.records:
                    self.data_ready.set()
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            spec = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}.get(self.settings.auto_offset_reset)
            if spec is None:
                self._fail(tp, st, OffsetOutOfRangeError({tp: offset}))
            else:
                log.info("%s: offset %s out of range, resetting to %s", tp, offset, self.settings.auto_offset_reset)
                self.request_reset(tp, spec)
            return
        if code in STALE_METADATA_ERRORS or code.retriable:
            self._cluster.request_update()
            self._retry_later(st)
            return
        self._fail(tp, st, error_for(code, context=f"fetch {tp} at offset {offset}"))

    def _fail(self, tp: TopicPartition, st: PartitionState, exc: KafkaError) -> None:
        st.failed = True
        self._errors.append((tp, st.generation, exc))
        self.data_ready.set()

    def pop_error(self) -> KafkaError | None:
        """The oldest error still relevant (its partition not re-positioned since), or None."""
        while self._errors:
            tp, generation, exc = self._errors.popleft()
            if tp is None:
                return exc
            st = self.assignment.get(tp)
            if st is not None and st.generation == generation:
                return exc
        return None

    # -- draining (poll) -----------------------------------------------------------------------

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for tp in list(self._buffer):
            if len(out) >= max_records:
                break
            cf = self._buffer[tp]
            st = self.assignment.get(tp)
            if st is None or st.generation != cf.generation or st.paused:
                if st is None or st.generation != cf.generation:
                    del self._buffer[tp]
                continue
            take = cf.records[cf.index : cf.index + max_records - len(out)]
            cf.index += len(take)
            out.extend(take)
            if take:
                st.position = take[-1].offset + 1
            if cf.index >= len(cf.records):
                st.position = max(st.position or 0, cf.next_offset)
                del self._buffer[tp]
                self._wakeup.set()
        return out

    def has_buffered(self) -> bool:
        return any(cf.index < len(cf.records) for cf in self._buffer.values())
