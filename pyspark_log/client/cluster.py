"""Cluster metadata and the connections to its brokers.

``ClusterMetadata`` is an immutable snapshot (brokers, topics, partition leaders). ``Cluster``
swaps in a new snapshot after each Metadata response, so any thread may read ``cluster.metadata``
without a lock (the sync facade does, to avoid a round trip per ``send``).

``Cluster`` owns:

* one ``BrokerConnection`` per broker id, created on demand; a broker whose connect fails is not
  retried before its reconnect backoff (``reconnect.backoff.ms`` doubling to
  ``reconnect.backoff.max.ms``) has passed;
* the bootstrap: ``bootstrap.servers`` are tried in order until one answers Metadata; their
  connections use ids -1, -2, ... and are closed once real broker ids are known;
* ``find_coordinator``: FindCoordinator for a group or a transactional id (every coordinator
  lookup of the client goes through it);
* one metadata task that refreshes when asked (``request_update``: after NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, a broken connection, a failed connect) and
  at the latest every ``metadata.max.age.ms``, never twice within ``retry.backoff.ms``. Failed refreshes back off
  (``retry.backoff.ms`` doubling). If the task dies, every ``refresh`` waiter fails with its
  error and later calls raise it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import SYSTEM_CLOCK, Clock
from pyspark_log.client.config import client_software, parse_host_port
from pyspark_log.client.connection import BrokerConnection, Connector, open_tcp
from pyspark_log.client.errors import BrokerConnectionError, ClientClosedError, KafkaTimeoutError, error_for
from pyspark_log.client.metrics import ClientMetrics
from pyspark_log.client.security import connector_for
from pyspark_log.client.tasks import cancel_and_wait
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

log = logging.getLogger(__name__)

# Partition/topic errors after which the cached metadata is stale.
STALE_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: Any
    is_internal: bool
    error_code: int
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterMetadata:
    """One consistent view of the cluster; never mutated after construction."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    updated_ms: float = -1.0

    def leader_for(self, tp: TopicPartition) -> int | None:
        topic = self.topics.get(tp.topic)
        if topic is None:
            return None
        part = topic.partitions.get(tp.partition)
        if part is None or part.leader < 0:
            return None
        return part.leader

    def partition_count(self, topic: str) -> int | None:
        """Partitions of a known topic (None if unknown or in error)."""
        meta = self.topics.get(topic)
        if meta is None or meta.error_code != ErrorCode.NONE or not meta.partitions:
            return None
        return len(meta.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        meta = self.topics.get(topic)
        if meta is None:
            return []
        return sorted(p for p, pm in meta.partitions.items() if pm.leader >= 0)

    def partitions_for_node(self, node_id: int) -> list[TopicPartition]:
        return [
            TopicPartition(t.name, p.partition)
            for t in self.topics.values()
            for p in t.partitions.values()
            if p.leader == node_id
        ]

    @classmethod
    def from_response(
        cls, resp: Message, previous: ClusterMetadata | None, now_ms: float, all_topics: bool
    ) -> ClusterMetadata:
        """A new snapshot: brokers from ``resp``; topics from ``resp`` plus, unless the request
        asked for all topics, the previous snapshot's other topics."""
        brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        topics: dict[str, TopicMetadata] = {}
        if previous is not None and not all_topics:
            topics.update(previous.topics)
        for t in resp.topics:
            if t.name is None:
                continue
            parts = {
                p.partition_index: PartitionMetadata(
                    t.name,
                    p.partition_index,
                    p.leader_id if p.error_code in (ErrorCode.NONE, ErrorCode.REPLICA_NOT_AVAILABLE) else -1,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas or ()),
                    p.error_code,
                )
                for p in t.partitions
            }
            topics[t.name] = TopicMetadata(t.name, t.topic_id, bool(t.is_internal), t.error_code, parts)
        return cls(resp.cluster_id, resp.controller_id, brokers, topics, now_ms)


class Cluster:
    """Connections plus the metadata cache. Lives on one event loop; ``metadata`` is readable anywhere."""

    def __init__(
        self,
        config: dict[str, Any],
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        connector: Connector = open_tcp,
        allow_auto_topic_creation: bool = False,
        max_in_flight: int = 5,
    ) -> None:
        self._config = config
        self._clock = clock
        self._rng = rng or random.Random()
        # PLAINTEXT, or TLS / SASL under librdkafka's ssl.* / sasl.* keys (security.protocol)
        self._connector = connector = connector_for(config, connector) if connector is open_tcp else connector
        self._auto_create = allow_auto_topic_creation
        self._max_in_flight = max_in_flight
        self.client_id: str = config["client.id"]
        self.request_timeout_ms: float = config["request.timeout.ms"]
        self._connect_timeout_ms: float = config["socket.connection.setup.timeout.ms"]
        self._max_age_ms: float = config["metadata.max.age.ms"]
        self._bootstrap = [parse_host_port(s) for s in config["bootstrap.servers"]]
        self._reconnect = ExponentialBackoff(
            config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"], rng=self._rng
        )
        self._refresh_backoff = ExponentialBackoff(
            config["retry.backoff.ms"], config["retry.backoff.max.ms"], rng=self._rng
        )
        self._min_refresh_interval_ms = float(config["retry.backoff.ms"])
        self._skip_refresh_spacing = False
        self.metadata = ClusterMetadata()
        self._topics: set[str] = set()
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, tuple[int, float]] = {}  # node -> (failures, retry_at_ms)
        self._listeners: list[Callable[[], None]] = []
        self._update_event: asyncio.Event | None = None
        self._waiters: list[asyncio.Future[ClusterMetadata]] = []
        self._task: asyncio.Task[None] | None = None
        self._dead: KafkaError | None = None
        self._closed = False
        self._software = client_software()
        self.metrics = ClientMetrics(config, clock)  # the client's sensors (metrics.py)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, timeout_ms: float | None = None) -> None:
        """Bootstrap (first metadata) and start the metadata task."""
        self._update_event = asyncio.Event()
        await self._refresh_once(timeout_ms)
        self._task = asyncio.get_running_loop().create_task(self._metadata_loop(), name="pylog-metadata")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fail_waiters(ClientClosedError())
        await cancel_and_wait((self._task, *self._connecting.values()))
        for conn in list(self._conns.values()):
            conn.close(ClientClosedError())
        self._conns.clear()

    @property
    def connector(self) -> Connector:
        """How connections are opened (TCP, or TLS under ``security.protocol=SSL``)."""
        return self._connector

    def add_listener(self, fn: Callable[[], None]) -> None:
        """``fn`` runs (on the loop) after each metadata update and each connection change."""
        self._listeners.append(fn)

    def _notify(self) -> None:
        for fn in self._listeners:
            fn()

    def _check_alive(self) -> None:
        if self._closed:
            raise ClientClosedError()
        if self._dead is not None:
            raise self._dead

    # -- metadata ------------------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track these topics in every refresh; True if one was new (caller may ``request_update``)."""
        before = len(self._topics)
        self._topics.update(topics)
        return len(self._topics) != before

    def request_update(self, *, new_topics: bool = False) -> None:
        """Ask the metadata task for a refresh. ``new_topics``: a topic was just added, so the
        refresh skips the ``retry.backoff.ms`` spacing (the Java client's ``requestUpdateForNewTopics``)."""
        if new_topics:
            self._skip_refresh_spacing = True
        if self._update_event is not None:
            self._update_event.set()

    async def refresh(self, timeout_ms: float | None = None, *, new_topics: bool = False) -> ClusterMetadata:
        """Ask for a refresh and wait for its result (raising its error). ``new_topics``: the
        caller just tracked new topics (``add_topics`` returned True), so the refresh is not held
        back by the ``retry.backoff.ms`` spacing (``request_update(new_topics=True)``)."""
        self._check_alive()
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.request_update(new_topics=new_topics)
        try:
            async with asyncio.timeout((timeout_ms or self.request_timeout_ms * 2) / 1000.0):
                return await fut
        except TimeoutError:
            raise KafkaTimeoutError("metadata refresh timed out") from None
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> TopicMetadata:
        """Metadata of ``topic`` with partitions, refreshing until it appears or ``timeout_ms``."""
        deadline = self._clock.monotonic_ms() + timeout_ms
        if self.add_topics([topic]):
            self.request_update(new_topics=True)
        attempt = 0
        last: KafkaError | None = None
        while True:
            meta = self.metadata.topics.get(topic)
            if meta is not None and meta.error_code == ErrorCode.NONE and meta.partitions:
                return meta
            if meta is not None and meta.error_code not in (ErrorCode.NONE, *STALE_METADATA_ERRORS):
                raise error_for(meta.error_code, context=f"topic {topic!r}")
            remaining = deadline - self._clock.monotonic_ms()
            if remaining <= 0:
                detail = f" (last error: {last})" if last else ""
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms{detail}")
            if attempt:
                await asyncio.sleep(min(self._refresh_backoff.backoff_ms(attempt - 1), remaining) / 1000.0)
            attempt += 1
            try:
                await self.refresh(max(self._clock_remaining(deadline), 1.0))
            except KafkaTimeoutError as exc:
                last = exc
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = exc

    def _clock_remaining(self, deadline: float) -> float:
        return deadline - self._clock.monotonic_ms()

    async def _metadata_loop(self) -> None:
        assert self._update_event is not None
        failures = 0
        try:
            while True:
                age = self._clock.monotonic_ms() - self.metadata.updated_ms
                wait_ms = max(self._max_age_ms - age, 0.0)
                if not self._update_event.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait_ms / 1000.0):
                            await self._update_event.wait()
                since_ms = self._clock.monotonic_ms() - self.metadata.updated_ms
                spacing_ms = 0.0 if self._skip_refresh_spacing else self._min_refresh_interval_ms
                if since_ms < spacing_ms:  # no refresh storms (Kafka's refresh backoff)
                    await asyncio.sleep((spacing_ms - since_ms) / 1000.0)
                self._skip_refresh_spacing = False
                self._update_event.clear()
                try:
                    meta = await self._refresh_once(None)
                except KafkaError as exc:
                    log.debug("metadata refresh failed: %s", exc)
                    self._fail_waiters(exc)
                    await asyncio.sleep(self._refresh_backoff.backoff_ms(failures) / 1000.0)
                    failures += 1
                    continue
                failures = 0
                waiters, self._waiters = self._waiters, []
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(meta)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("metadata task died")
            self._dead = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata task died: {exc!r}")
            self._fail_waiters(self._dead)
            raise

    def _fail_waiters(self, exc: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_exception(exc)

    async def _refresh_once(self, timeout_ms: float | None) -> ClusterMetadata:
        """One Metadata request for the tracked topics, to the least loaded reachable broker."""
        all_topics = False
        topics: list[dict[str, Any]] = [{"name": t} for t in sorted(self._topics)]
        body = {"topics": topics, "allow_auto_topic_creation": self._auto_create}
        resp = await self.send_any(ApiKey.METADATA, body, timeout_ms=timeout_ms)
        return self._apply_metadata(resp, all_topics)

    def _apply_metadata(self, resp: Message, all_topics: bool) -> ClusterMetadata:
        meta = ClusterMetadata.from_response(resp, self.metadata, self._clock.monotonic_ms(), all_topics)
        self.metadata = meta
        for node_id in [n for n in self._conns if n < 0]:
            if meta.brokers:
                self._conns.pop(node_id).close()
        for node_id, conn in list(self._conns.items()):
            node = meta.brokers.get(node_id)
            if node_id >= 0 and (node is None or (node.host, node.port) != (conn.host, conn.port)):
                self._conns.pop(node_id).close()
        self._notify()
        return meta

    async def fetch_metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> ClusterMetadata:
        """A one-off Metadata request (``topics=None``: all topics) merged into the cache."""
        self._check_alive()
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        resp = await self.send_any(ApiKey.METADATA, body)
        return self._apply_metadata(resp, topics is None)

    # -- connections ---------------------------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[-node_id - 1]
        node = self.metadata.brokers.get(node_id)
        if node is None:
            raise BrokerConnectionError(f"broker {node_id} is not in the cluster metadata")
        return node.host, node.port

    def throttle_time_ms_total(self) -> int:
        """Sum of the ``throttle_time_ms`` the open connections' brokers asked for (KIP-219)."""
        return sum(conn.throttle_time_ms_total for conn in list(self._conns.values()))

    def connection_if_ready(self, node_id: int) -> BrokerConnection | None:
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.ready else None

    def backoff_remaining_ms(self, node_id: int) -> float:
        failures = self._failures.get(node_id)
        if failures is None:
            return 0.0
        return max(failures[1] - self._clock.monotonic_ms(), 0.0)

    def start_connect(self, node_id: int) -> None:
        """Begin connecting to ``node_id`` in the background (no-op if connected or backing off)."""
        if self._closed or node_id in self._connecting or self.connection_if_ready(node_id) is not None:
            return
        if self.backoff_remaining_ms(node_id) > 0:
            return
        task = asyncio.get_running_loop().create_task(self._connect(node_id), name=f"pylog-connect-{node_id}")
        self._connecting[node_id] = task
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def connection(self, node_id: int) -> BrokerConnection:
        """A ready connection to ``node_id``, connecting (once, no retry) if needed."""
        self._check_alive()
        conn = self.connection_if_ready(node_id)
        if conn is not None:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            wait_ms = self.backoff_remaining_ms(node_id)
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000.0)
            task = self._connecting.get(node_id)
            if task is None:
                conn = self.connection_if_ready(node_id)
                if conn is not None:
                    return conn
                task = asyncio.get_running_loop().create_task(self._connect(node_id), name=f"pylog-connect-{node_id}")
                self._connecting[node_id] = task
        return await asyncio.shield(task)

    async def _connect(self, node_id: int) -> BrokerConnection:
        try:
            host, port = self._address(node_id)
            conn = BrokerConnection(
                host,
                port,
                node_id=node_id,
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                max_in_flight=self._max_in_flight,
                connector=self._connector,
                software=self._software,
            )
            conn.on_close = self._on_conn_close
            conn.metrics = self.metrics
            await conn.connect(self._connect_timeout_ms)
        except KafkaError:
            failures, _ = self._failures.get(node_id, (0, 0.0))
            retry_at = self._clock.monotonic_ms() + self._reconnect.backoff_ms(failures)
            self._failures[node_id] = (failures + 1, retry_at)
            if not self._closed:
                # A broker we cannot reach may have been replaced as leader since our last
                # metadata (it was SIGKILLed before the controller fenced it): without a refresh
                # here, requests would go on failing against it until metadata.max.age.ms.
                self.request_update()
            raise
        finally:
            self._connecting.pop(node_id, None)
        self._failures.pop(node_id, None)
        old = self._conns.get(node_id)
        if old is not None and old is not conn:
            old.close()
        self._conns[node_id] = conn
        self.metrics.on_connect()
        self._notify()
        return conn

    def _on_conn_close(self, conn: BrokerConnection, exc: KafkaError) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
            self.metrics.on_close()
            if not self._closed:
                log.debug("connection to %s closed: %s", conn, exc)
                self.request_update()
                self._notify()

    def _candidates(self) -> list[int]:
        """Nodes to try for a request any broker can answer: connected ones by load, then others."""
        ready = sorted((c.in_flight_count, n) for n, c in self._conns.items() if c.ready)
        order = [n for _, n in ready]
        known = [n for n in self.metadata.brokers if n not in order]
        self._rng.shuffle(known)
        order += sorted(known, key=self.backoff_remaining_ms)
        if not self.metadata.brokers:
            order += [-(i + 1) for i in range(len(self._bootstrap)) if -(i + 1) not in order]
        return order

    async def send(
        self,
        node_id: int,
        api_key: int,
        body: dict[str, Any],
        *,
        timeout_ms: float | None = None,
        version: int | None = None,
    ) -> Message:
        conn = await self.connection(node_id)
        resp = await conn.request(api_key, body, timeout_ms=timeout_ms, version=version)
        assert resp is not None
        return resp

    async def send_any(self, api_key: int, body: dict[str, Any], *, timeout_ms: float | None = None) -> Message:
        """Send to the least loaded broker; on a connection failure try the next one."""
        last: KafkaError | None = None
        for node_id in self._candidates():
            try:
                return await self.send(node_id, api_key, body, timeout_ms=timeout_ms)
            except (BrokerConnectionError, KafkaTimeoutError) as exc:
                last = exc
                continue
        if last is None:
            last = BrokerConnectionError("no broker to send to")
        where = ", ".join(f"{h}:{p}" for h, p in self._bootstrap)
        raise BrokerConnectionError(f"no broker reachable (bootstrap.servers={where}): {last}")

    async def find_coordinator(self, key_type: int, key: str, *, context: str) -> int:
        """The node id of the coordinator of ``key`` (key type 0: a group, 1: a transactional id),
        by FindCoordinator to any broker (Kafka protocol guide, FindCoordinator; v4+ answers in
        ``coordinators``, KIP-699). An error answer raises its KafkaError with ``context``; a
        node the metadata does not know yet refreshes the metadata once before returning."""
        body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        resp = await self.send_any(ApiKey.FIND_COORDINATOR, body)
        entry = resp.coordinators[0] if resp.coordinators else resp
        if entry.error_code != ErrorCode.NONE:
            raise error_for(entry.error_code, entry.error_message, context=context)
        node = int(entry.node_id)
        if node not in self.metadata.brokers:
            await self.refresh()
        return node

    async def any_connection(self) -> BrokerConnection:
        """A ready connection to some broker (for version checks)."""
        last: KafkaError | None = None
        for node_id in self._candidates():
            try:
                return await self.connection(node_id)
            except BrokerConnectionError as exc:
                last = exc
        raise last or BrokerConnectionError("no broker reachable")
