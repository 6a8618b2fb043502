"""``AsyncConsumer``: manual-assignment consumer (groups come later) and the raw range reader.

    async with AsyncConsumer({"bootstrap.servers": "...", "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition("events", 0)])
        records = await c.poll(timeout_ms=1000)          # list[ConsumerRecord], in offset order per partition

Positions: a newly assigned partition starts per ``auto.offset.reset`` (``latest`` by default,
``earliest``, or ``none``: ``poll`` raises ``OffsetOutOfRangeError`` until you ``seek``).
``seek``/``seek_to_beginning``/``seek_to_end`` move it; ``position`` resolves it (waiting for a
pending reset). ``poll`` returns what the background fetcher has prefetched, waiting up to
``timeout_ms`` when nothing is buffered; it returns at most ``max_records`` (default
``max.poll.records``).

``fetch_raw`` is the Spark path: one Fetch of one partition, the raw RecordBatch v2 bytes cut to
whole batches, plus the offsets and aborted transactions of the response. It does not touch the
consumer's positions and works without ``assign``.

``subscribe(topics | pattern=…)`` with a ``group.id`` joins the group instead (``group/``):
``poll`` keeps the membership current and runs the rebalance callbacks. ``commit``/``committed``
use ``group.id``: with the member's generation when subscribed, else generation -1 (no
membership), as Kafka's consumer does under manual assignment.

Offset lookups (``beginning_offsets``, ``end_offsets``, ``offsets_for_times``) go through
ListOffsets with retries; a partition that does not exist raises
``UnknownTopicOrPartitionError`` unless ``skip_missing=True`` (then it is omitted).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pyspark_log.client import config as cfg
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import SYSTEM_CLOCK, Clock
from pyspark_log.client.cluster import STALE_METADATA_ERRORS, Cluster
from pyspark_log.client.connection import Connector, open_tcp
from pyspark_log.client.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from pyspark_log.client.fetcher import Fetcher, FetchSettings
from pyspark_log.client.group.consumer_member import ConsumerProtocolGroup
from pyspark_log.client.group.membership import ConsumerGroup
from pyspark_log.client.group.subscription import (
    Callback,
    CallbackRunner,
    ConsumerRebalanceListener,
    FunctionListener,
    Subscription,
    run_inline,
)
from pyspark_log.client.groups import ConsumerGroupMetadata, GroupOffsets, OffsetAndMetadata
from pyspark_log.client.metrics import Metrics, consumer_metrics, record_fetch, record_lag
from pyspark_log.client.offsets import OffsetResult, list_offsets
from pyspark_log.client.types import (
    AbortedTransaction,
    ConsumerRecord,
    IsolationLevel,
    OffsetAndTimestamp,
    OffsetSpec,
    TopicPartition,
)
from pyspark_log.records.header import complete_prefix_size, iter_batch_headers
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError


class _ThrottledFetch(Exception):
    """A Fetch answered with ``throttle_time_ms`` and without the partition: ask again once the
    throttle time has passed (the connection waits for it)."""


class RawFetch(NamedTuple):
    """One partition's Fetch answer, records as whole RecordBatch v2 batches (maybe empty).

    ``records`` is a view of the response frame (not a copy): the frame lives as long as it."""

    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTransaction]

    def next_offset(self, default: int) -> int:
        """Last batch's last offset + 1 (``default`` when no batch came back)."""
        last = default
        for _, header in iter_batch_headers(self.records, verify_crc=False):
            last = max(last, header.next_offset)
        return last


class AsyncConsumer:
    """The consumer core; all methods run on the loop ``start`` ran on."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        connector: Connector = open_tcp,
    ) -> None:
        self.config = cfg.parse(cfg.CONSUMER, config, "consumer")
        c = self.config
        self._clock = clock
        self._rng = rng or random.Random()
        self.isolation_level = IsolationLevel.parse(c["isolation.level"])
        self.max_poll_records: int = c["max.poll.records"]
        self.default_api_timeout_ms: float = c["default.api.timeout.ms"]
        self.cluster = Cluster(
            c, clock=clock, rng=self._rng, connector=connector, allow_auto_topic_creation=c["allow.auto.create.topics"]
        )
        self._backoff = ExponentialBackoff(c["retry.backoff.ms"], c["retry.backoff.max.ms"], rng=self._rng)
        self.settings = FetchSettings(
            min_bytes=c["fetch.min.bytes"],
            max_wait_ms=c["fetch.max.wait.ms"],
            max_bytes=c["fetch.max.bytes"],
            partition_max_bytes=c["max.partition.fetch.bytes"],
            isolation_level=self.isolation_level,
            auto_offset_reset=c["auto.offset.reset"],
            check_crcs=c["check.crcs"],
            request_timeout_ms=c["request.timeout.ms"],
            default_api_timeout_ms=self.default_api_timeout_ms,
            rack=c["client.rack"],
        )
        self.fetcher = Fetcher(self.cluster, self.settings, clock, self._backoff)
        self.group_id: str | None = c["group.id"]
        self._groups = GroupOffsets(self.cluster, self._backoff)
        self._connector = self.cluster.connector  # TLS / SASL under security.protocol
        self._group: ConsumerGroup | ConsumerProtocolGroup | None = None
        self.callback_runner: CallbackRunner = run_inline
        self._started = False
        self._closed = False

    async def start(self) -> AsyncConsumer:
        if not self._started:
            await self.cluster.start(self.default_api_timeout_ms)
            self.fetcher.start()
            self._started = True
        return self

    async def close(self) -> None:
        if self._closed:
            return
        if self._group is not None:  # first: its revoke callbacks may still commit
            await self._group.close(self.default_api_timeout_ms)
        self._closed = True
        await self.fetcher.stop()
        await self.cluster.close()

    async def __aenter__(self) -> AsyncConsumer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if not self._started:
            raise ClientClosedError("the consumer is not started (await start() or use 'async with')")
        if self.fetcher.dead is not None:
            raise ClientClosedError(f"the consumer's fetcher died: {self.fetcher.dead!r}")

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        self._check_open()
        if self._group is not None and self._group.active:
            raise ValueError("the consumer is subscribed to a group: unsubscribe() before assign()")
        self.fetcher.assign(partitions)

    def subscribe(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics`` (or the topics matching ``pattern``); the group's
        assignment replaces any manual one at the next ``poll``."""
        self._check_open()
        if not self.group_id:
            raise ValueError("subscribe() needs group.id in the consumer config")
        if self.fetcher.assignment and (self._group is None or not self._group.active):
            raise ValueError("the consumer has a manual assignment: unassign() before subscribe()")
        if listener is None and (on_assign or on_revoke or on_lost):
            listener = FunctionListener(on_assign, on_revoke, on_lost)
        if self._group is None:
            kind = ConsumerProtocolGroup if str(self.config["group.protocol"]).lower() == "consumer" else ConsumerGroup
            group = kind(self.config, self.cluster, self.fetcher, self._backoff, self._clock, self._connector)
            group.on_wakeup = self.fetcher.data_ready.set
            group.callback_runner = self.callback_runner
            self._group = group
        self._group.subscribe(Subscription([topics] if isinstance(topics, str) else topics, pattern), listener)

    async def unsubscribe(self) -> None:
        """Revoke the group's partitions (callbacks run), leave the group, stop subscribing."""
        self._check_open()
        if self._group is not None:
            await self._group.unsubscribe()

    def subscription(self) -> set[str]:
        """The topics subscribed to now (a pattern's current matches)."""
        return self._group.subscribed_topics() if self._group is not None else set()

    def assignment(self) -> set[TopicPartition]:
        return set(self.fetcher.assignment)

    def unassign(self) -> None:
        self.assign([])

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        self.fetcher.seek(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._or_all(partitions):
            self.fetcher.request_reset(tp, OffsetSpec.EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._or_all(partitions):
            self.fetcher.request_reset(tp, OffsetSpec.LATEST)

    def _or_all(self, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        return list(self.fetcher.assignment) if partitions is None else list(partitions)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.fetcher.set_paused(partitions, True)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.fetcher.set_paused(partitions, False)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The last high watermark a fetch of ``tp`` reported (None before the first fetch)."""
        hw = self.fetcher.state(tp).high_watermark
        return hw if hw >= 0 else None

    async def position(self, tp: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record ``poll`` would return for ``tp``."""
        self._check_open()
        st = self.fetcher.state(tp)
        if st.position is not None:
            return st.position
        if st.reset_to is None:
            raise OffsetOutOfRangeError({tp: -1}, f"{tp} has no position and auto.offset.reset=none")
        results = await self._list({tp: st.reset_to}, timeout_ms, skip_missing=False)
        found = results[tp]
        if st.position is None and isinstance(found, OffsetAndTimestamp):
            self.fetcher.seek(tp, found.offset)
        return st.position if st.position is not None else found.offset  # type: ignore[union-attr]

    # -- poll ----------------------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` prefetched records, waiting up to ``timeout_ms`` for some."""
        self._check_open()
        limit = max_records or self.max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        fetcher = self.fetcher
        while True:
            fetcher.data_ready.clear()
            group = self._group
            if group is not None and group.active:
                await group.poll(max(deadline - loop.time(), 0.0) * 1000.0)
            error = fetcher.pop_error()
            if error is not None:
                raise error
            if fetcher.dead is not None:
                raise ClientClosedError(f"the consumer's fetcher died: {fetcher.dead!r}")
            records = fetcher.drain(limit)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            if group is not None and group.active:  # the membership needs a poll now and then
                remaining = min(remaining, group.poll_interval_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await fetcher.data_ready.wait()

    # -- offsets -------------------------------------------------------------------------------

    async def _list(
        self,
        specs: Mapping[TopicPartition, int],
        timeout_ms: float | None,
        *,
        skip_missing: bool,
        isolation_level: IsolationLevel | None = None,
    ) -> dict[TopicPartition, OffsetResult]:
        self._check_open()
        results = await list_offsets(
            self.cluster,
            specs,
            isolation_level=self.isolation_level if isolation_level is None else isolation_level,
            timeout_ms=timeout_ms or self.default_api_timeout_ms,
            backoff=self._backoff,
        )
        out: dict[TopicPartition, OffsetResult] = {}
        for tp, result in results.items():
            if isinstance(result, UnknownTopicOrPartitionError) and skip_missing:
                continue
            if isinstance(result, KafkaError):
                raise result
            out[tp] = result
        return out

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None, *, skip_missing: bool = False
    ) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        res = await self._list(dict.fromkeys(partitions, OffsetSpec.EARLIEST), timeout_ms, skip_missing=skip_missing)
        return {tp: r.offset for tp, r in res.items() if isinstance(r, OffsetAndTimestamp)}

    async def end_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timeout_ms: float | None = None,
        *,
        skip_missing: bool = False,
        isolation_level: IsolationLevel | str | None = None,
    ) -> dict[TopicPartition, int]:
        """The next offset of each partition: high watermark, or LSO under read_committed."""
        iso = None if isolation_level is None else IsolationLevel.parse(isolation_level)
        res = await self._list(
            dict.fromkeys(partitions, OffsetSpec.LATEST), timeout_ms, skip_missing=skip_missing, isolation_level=iso
        )
        return {tp: r.offset for tp, r in res.items() if isinstance(r, OffsetAndTimestamp)}

    async def offsets_for_times(
        self,
        timestamps: Mapping[TopicPartition, int],
        timeout_ms: float | None = None,
        *,
        skip_missing: bool = False,
        isolation_level: IsolationLevel | str | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (None: no such record)."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, not {ts}")
        iso = None if isolation_level is None else IsolationLevel.parse(isolation_level)
        res = await self._list(timestamps, timeout_ms, skip_missing=skip_missing, isolation_level=iso)
        return {tp: r for tp, r in res.items() if not isinstance(r, KafkaError)}

    async def list_topics(self, timeout_ms: float | None = None) -> dict[str, list[int]]:
        """Every topic the broker has (internal ones included) and its partition numbers."""
        self._check_open()
        async with asyncio.timeout((timeout_ms or self.default_api_timeout_ms) / 1000.0):
            meta = await self.cluster.fetch_metadata(None)
        return {
            name: sorted(t.partitions)
            for name, t in meta.topics.items()
            if t.error_code == ErrorCode.NONE and not t.is_internal
        }

    async def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        self._check_open()
        meta = await self.cluster.wait_for_topic(topic, timeout_ms or self.default_api_timeout_ms)
        return sorted(meta.partitions)

    # -- committed offsets ---------------------------------------------------------------------

    def _group_id(self) -> str:
        if not self.group_id:
            raise ValueError("committing offsets needs group.id in the consumer config")
        return self.group_id

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the current positions of the assignment) for ``group.id``,
        as Kafka's consumer does with manual assignment (generation -1, no group membership)."""
        self._check_open()
        if offsets is None:
            offsets = {tp: st.position for tp, st in self.fetcher.assignment.items() if st.position is not None}
        if offsets and self._group is not None and self._group.active:
            await self._group.commit(offsets, timeout_ms or self.default_api_timeout_ms)
        elif offsets:
            started = self._clock.monotonic_ms()
            await self._groups.commit(self._group_id(), offsets, timeout_ms or self.default_api_timeout_ms)
            self.cluster.metrics.sensor("commit-latency").record(self._clock.monotonic_ms() - started)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's membership of ``group.id`` for ``send_offsets_to_transaction``
        (KIP-447, Java's ``groupMetadata()``): the generation (member epoch) and member id while
        subscribed, else none. Take it after the ``poll`` whose records the transaction holds."""
        group_id = self._group_id()
        if self._group is not None and self._group.active:
            return self._group.group_metadata()
        return ConsumerGroupMetadata(group_id)

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offset of each partition for ``group.id`` (None: none committed)."""
        self._check_open()
        wanted = list(partitions)
        got = await self._groups.fetch(self._group_id(), wanted, timeout_ms or self.default_api_timeout_ms)
        return {tp: got.get(tp) for tp in wanted}

    # -- the raw range reader (Spark) ----------------------------------------------------------

    async def fetch_raw(
        self,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        isolation_level: IsolationLevel | str | None = None,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        timeout_ms: float | None = None,
    ) -> RawFetch:
        """One Fetch of ``tp`` from ``offset``: ``(records, high_watermark, last_stable_offset,
        log_start_offset, aborted_transactions)``. ``records`` holds whole batches only (at
        least one batch even if larger than ``max_bytes``, when one is there). Leader moves
        are retried until ``timeout_ms`` (default ``default.api.timeout.ms``)."""
        self._check_open()
        iso = self.isolation_level if isolation_level is None else IsolationLevel.parse(isolation_level)
        loop = asyncio.get_running_loop()
        budget_ms = timeout_ms or self.default_api_timeout_ms
        deadline = loop.time() + budget_ms / 1000.0
        attempt = 0
        last: KafkaError | None = None
        await self._check_exists(tp)
        while True:
            try:
                return await self._fetch_raw_once(
                    tp, offset, max_bytes, iso, max_wait_ms=max_wait_ms, min_bytes=min_bytes
                )
            except _ThrottledFetch as exc:
                # KIP-219: the connection holds the next request back for the throttle time itself
                if loop.time() >= deadline:
                    raise KafkaTimeoutError(
                        f"fetch of {tp} at offset {offset} did not succeed within {budget_ms:.0f} ms: {exc}"
                    ) from None
                continue
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, OffsetOutOfRangeError):
                    raise
                last = exc
            wait_s = self._backoff.backoff_ms(attempt) / 1000.0
            attempt += 1
            if loop.time() + wait_s >= deadline:
                raise KafkaTimeoutError(
                    f"fetch of {tp} at offset {offset} did not succeed within {budget_ms:.0f} ms: {last}"
                )
            await asyncio.sleep(wait_s)

    def _record_raw_fetch(self, fetched: RawFetch, offset: int, sent_ms: float, throttle_ms: int) -> None:
        """Fetch metrics of one ``fetch_raw`` answer: records counted from its batch headers
        (records at or past ``offset``, control records included), per batch, not per record."""
        records = 0
        next_offset = offset
        for _, header in iter_batch_headers(fetched.records, verify_crc=False):
            records += min(header.records_count, header.next_offset - offset)
            next_offset = header.next_offset
        m = self.cluster.metrics
        record_fetch(m, self._clock.monotonic_ms() - sent_ms, records, len(fetched.records), throttle_ms)
        if fetched.high_watermark >= 0:
            record_lag(m, max(fetched.high_watermark - next_offset, 0))

    def metrics(self) -> Metrics:
        """Kafka's consumer metrics by group and name (``metrics.py``): ``consumer-metrics``,
        ``consumer-fetch-manager-metrics``, ``consumer-coordinator-metrics``."""
        return consumer_metrics(self.cluster.metrics, assigned_partitions=len(self.fetcher.assignment))

    async def _check_exists(self, tp: TopicPartition) -> None:
        """Raise UnknownTopicOrPartitionError (not retried) if fresh metadata lacks ``tp``.

        Cached metadata that lacks ``tp`` is refreshed first: it may predate the topic's
        creation or partitions added since."""
        cluster = self.cluster

        def missing() -> bool:
            topic = cluster.metadata.topics.get(tp.topic)
            return topic is not None and (
                topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                or (topic.error_code == ErrorCode.NONE and tp.partition not in topic.partitions)
            )

        added = cluster.add_topics([tp.topic])
        if added or tp.topic not in cluster.metadata.topics or missing():
            await cluster.refresh(new_topics=added)
        if missing():
            raise UnknownTopicOrPartitionError(f"{tp} does not exist")

    async def _fetch_raw_once(
        self, tp: TopicPartition, offset: int, max_bytes: int, iso: IsolationLevel, *, max_wait_ms: int, min_bytes: int
    ) -> RawFetch:
        cluster = self.cluster
        meta = cluster.metadata
        leader = meta.leader_for(tp)
        if leader is None:
            cluster.request_update()
            raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, context=f"no leader for {tp}")
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": int(iso),
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": tp.topic,
                    "partitions": [
                        {"partition": tp.partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": self.settings.rack,
        }
        sent_ms = self._clock.monotonic_ms()
        resp = await cluster.send(leader, ApiKey.FETCH, body, timeout_ms=self.settings.request_timeout_ms + max_wait_ms)
        if resp.error_code != ErrorCode.NONE:
            raise error_for(resp.error_code, context=f"fetch {tp}")
        for t in resp.responses:
            for part in t.partitions:
                if t.topic != tp.topic or part.partition_index != tp.partition:
                    continue
                code = ErrorCode.of(part.error_code)
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise OffsetOutOfRangeError({tp: offset})
                if code != ErrorCode.NONE:
                    if code in STALE_METADATA_ERRORS:
                        cluster.request_update()
                    raise error_for(code, context=f"fetch {tp} at offset {offset}")
                raw = part.records
                data = b"" if raw is None else raw[: complete_prefix_size(raw)]
                aborted = [AbortedTransaction(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
                fetched = RawFetch(data, part.high_watermark, part.last_stable_offset, part.log_start_offset, aborted)
                self._record_raw_fetch(fetched, offset, sent_ms, resp.get("throttle_time_ms") or 0)
                return fetched
        if resp.get("throttle_time_ms", 0) > 0:  # a throttled Fetch has no data (Kafka docs §4.9 "Quotas")
            raise _ThrottledFetch(f"throttled for {resp.throttle_time_ms} ms by a quota")
        raise error_for(ErrorCode.UNKNOWN_SERVER_ERROR, f"the broker did not answer for {tp}")
