"""The client-backed ``BrokerAccess``: the ``pylog`` Spark source over ``pyspark_log.client``.

``connect(bootstrap_servers, config)`` returns a ``ClientAccess``. It opens nothing until it is
first used; then it owns one sync ``Consumer`` (its own I/O thread and connections) for
metadata, ListOffsets and raw Fetch, and, only when offsets are committed, one ``AdminClient``.
The driver keeps one per query run; every Spark task opens its own (see ``reader._read``), so
nothing unpicklable ever travels in an ``InputPartition``. "Opens" means: takes an idle one of
its Python process with the same settings from ``_Pool`` (Spark reuses Python workers), and
``close()`` gives it back, so a task does not pay a connection and a metadata round trip.

``fetch`` keeps one Fetch in flight ahead of the caller (on a helper thread): while Spark
decodes and ships one chunk, the broker is already sending the next.

Settings (``config``, from the source's ``kafka.*`` / ``fetch.*`` options, prefix ``kafka.``
already stripped) go to the consumer under Kafka's names (``request.timeout.ms``,
``default.api.timeout.ms``, ``fetch.max.wait.ms``, ``client.id``, ...), except the access's own:

``fetch.timeout.ms`` (option ``kafkaConsumer.pollTimeoutMs``; default 120000, Spark's default)
    how long ``fetch`` waits for the log to reach a range's end offset, and the time budget for
    retrying transient errors (broker restarting, leader moving) inside one fetch.

Error mapping (``access.py`` has the contract): retriable client errors are retried until
``default.api.timeout.ms`` (offsets, metadata) or ``fetch.timeout.ms`` (fetch); what is left
escapes as ``BrokerAccessError`` naming the operation. A bad client setting raises
``PylogOptionError`` naming the option (``kafka.<key>``) at query start.

Offset commits (``commit_offsets``) are a standalone OffsetCommit (generation -1) through
``AdminClient.alter_consumer_group_offsets``. A broker without a group coordinator answers
COORDINATOR_NOT_AVAILABLE: that is logged once per group (per process), and further commits to
that group are skipped for ``COMMIT_RETRY_INTERVAL_S`` before being tried again, so the query
waits at most ``COMMIT_TIMEOUT_MS`` per interval on it; the query's progress is in its checkpoint
either way.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

from pyspark_log.client import AdminClient, Consumer, RawFetch
from pyspark_log.client import OffsetOutOfRangeError as ClientOffsetOutOfRange
from pyspark_log.client.errors import ClientClosedError, ConfigError, UnknownTopicOrPartitionError
from pyspark_log.client.groups import COORDINATOR_ERRORS
from pyspark_log.spark.access import (
    AbortedTransaction,
    AccessOptions,
    BrokerAccess,
    BrokerAccessError,
    FetchedChunk,
    IsolationLevel,
    OffsetOutOfRangeError,
    TopicPartition,
    UnknownPartitionError,
)
from pyspark_log.spark.planning import judge_read
from pyspark_log.spark.specs import PylogOptionError
from pyspark_log.wire import KafkaError

__all__ = ["COMMIT_RETRY_INTERVAL_S", "DEFAULT_FETCH_TIMEOUT_MS", "ClientAccess", "connect"]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_FETCH_TIMEOUT_MS = 120_000
LONG_POLL_MS = 500  # one Fetch's wait while the log has not reached the range end yet
OUT_OF_RANGE_GRACE_S = 5.0  # how long an offset beyond the log end may be a lagging broker
COMMIT_TIMEOUT_MS = 3_000
COMMIT_RETRY_INTERVAL_S = 60.0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_ACCESS_KEYS = frozenset({"fetch.timeout.ms"})

_commit_lock = threading.Lock()
_commit_paused_until: dict[tuple[str, str], float] = {}  # (servers, group) -> monotonic time


def open_access(options: AccessOptions) -> BrokerAccess:
    """Open the client-backed ``BrokerAccess`` for ``options``; ``client_config`` holds the
    client settings passed through with ``kafka.*`` / ``fetch.*`` options."""
    return connect(options.bootstrap_servers, options.client_config)


def connect(bootstrap_servers: str, config: Mapping[str, str]) -> BrokerAccess:
    """The ``BrokerAccess`` for ``open_access``: an idle one of this process with the same
    settings if there is one (see ``_Pool``), else a new one (lazy: connects on first use)."""
    return _POOL.take(bootstrap_servers, config)


class _Pool:
    """Idle ``ClientAccess`` objects of this process, by settings.

    Spark reuses Python worker processes across tasks (``spark.python.worker.reuse``), and a
    fresh client pays a connection, ApiVersions and a metadata round trip (throttled to one per
    ``retry.backoff.ms``) before its first fetch. ``close()`` on a pooled access hands it back
    here instead; ``take`` gives it to the next task of the same query or of the next one. At
    most ``MAX_IDLE`` per settings are kept, and one idle for ``MAX_IDLE_S`` is closed.
    """

    MAX_IDLE = 2
    MAX_IDLE_S = 300.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, ClientAccess]]] = {}

    @staticmethod
    def _key(servers: str, config: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
        return servers, tuple(sorted((str(k), str(v)) for k, v in config.items()))

    def take(self, servers: str, config: Mapping[str, str]) -> ClientAccess:
        key = self._key(servers, config)
        now = time.monotonic()
        stale: list[ClientAccess] = []
        found: ClientAccess | None = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and found is None:
                since, access = idle.pop()
                if now - since > self.MAX_IDLE_S or not access.healthy():
                    stale.append(access)
                else:
                    found = access
        for access in stale:
            access.close_now()
        if found is not None:
            found.reopen()
            return found
        return ClientAccess(servers, config, pool=self)

    def give_back(self, access: ClientAccess) -> None:
        key = self._key(access.bootstrap_servers, access.config)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self.MAX_IDLE and access.healthy():
                idle.append((time.monotonic(), access))
                return
        access.close_now()

    def clear(self) -> None:
        with self._lock:
            idle = [a for entries in self._idle.values() for _, a in entries]
            self._idle.clear()
        for access in idle:
            access.close_now()


_POOL = _Pool()


def _is_coordinator_missing(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaError) and seen.code in COORDINATOR_ERRORS:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, ClientClosedError):
        return False
    return isinstance(exc, OSError) or (isinstance(exc, KafkaError) and exc.retriable)


class ClientAccess:
    """``BrokerAccess`` over one sync ``Consumer`` (and an ``AdminClient`` for commits)."""

    def __init__(
        self,
        bootstrap_servers: str,
        config: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        pool: _Pool | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.config = dict(config)
        self._pool = pool
        settings = dict(config)
        self.fetch_timeout_ms = self._int_setting(settings, "fetch.timeout.ms", DEFAULT_FETCH_TIMEOUT_MS)
        self._client_config: dict[str, Any] = {
            "client.id": "pylog-spark",
            **{k: v for k, v in settings.items() if k not in _ACCESS_KEYS},
            "bootstrap.servers": bootstrap_servers,
            "enable.auto.commit": "false",
            "auto.offset.reset": "none",
        }
        self._clock = clock
        self._sleep = sleep
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None
        self._prefetch: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    @staticmethod
    def _int_setting(settings: Mapping[str, str], key: str, default: int) -> int:
        raw = settings.get(key)
        if raw is None:
            return default
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = -1
        if value <= 0:
            raise PylogOptionError(f"{key} ({raw!r}) must be a positive number of milliseconds: e.g. 60000")
        return value

    # -- clients -------------------------------------------------------------------------------

    def _open(self, what: str, factory: Callable[[], T]) -> T:
        if self._closed:
            raise BrokerAccessError(f"{what}: the broker access is closed")
        try:
            return factory()
        except ConfigError as exc:
            raise PylogOptionError(
                f"a client setting is not valid ({exc}): fix or remove the kafka.* option it names"
            ) from None
        except (KafkaError, OSError) as exc:
            raise BrokerAccessError(f"{what}: cannot connect to {self.bootstrap_servers}: {exc}") from exc

    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._open("open a consumer", lambda: Consumer(self._client_config))
        return self._consumer

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            admin_config = {k: v for k, v in self._client_config.items() if k not in ("enable.auto.commit",)}
            self._admin = self._open("open an admin client", lambda: AdminClient(admin_config))
        return self._admin

    def _api_timeout_s(self) -> float:
        return float(self.consumer().core.default_api_timeout_ms) / 1000.0

    def _retrying(self, what: str, fn: Callable[[Consumer], T], budget_s: float | None = None) -> T:
        """``fn(consumer)``, retrying transient errors until the budget is spent."""
        consumer = self.consumer()
        deadline = self._clock() + (self._api_timeout_s() if budget_s is None else budget_s)
        delay_s = 0.1
        while True:
            try:
                return fn(consumer)
            except (KafkaError, OSError) as exc:
                if isinstance(exc, (UnknownTopicOrPartitionError, ClientOffsetOutOfRange)):
                    raise
                if not _retriable(exc) or self._clock() + delay_s >= deadline:
                    raise BrokerAccessError(f"{what} failed ({self.bootstrap_servers}): {exc}") from exc
                log.info("pylog: %s: transient error, retrying: %s", what, exc)
            self._sleep(delay_s)
            delay_s = min(delay_s * 2, 1.0)

    # -- metadata and offsets ------------------------------------------------------------------

    def list_topics(self) -> dict[str, int]:
        topics = self._retrying("list topics", lambda c: c.list_topics())
        return {name: len(parts) for name, parts in topics.items() if name not in INTERNAL_TOPICS and parts}

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = list(tps)
        if not wanted:
            return {}
        return self._retrying("list earliest offsets", lambda c: c.beginning_offsets(wanted, skip_missing=True))

    def latest_offsets(
        self, tps: Collection[TopicPartition], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int]:
        wanted = list(tps)
        if not wanted:
            return {}
        return self._retrying(
            "list latest offsets",
            lambda c: c.end_offsets(wanted, skip_missing=True, isolation_level=isolation_level),
        )

    def offsets_for_timestamps(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: IsolationLevel
    ) -> dict[TopicPartition, int | None]:
        wanted = dict(timestamps)
        if not wanted:
            return {}
        found = self._retrying(
            "list offsets for timestamps",
            lambda c: c.offsets_for_times(wanted, skip_missing=True, isolation_level=isolation_level),
        )
        return {tp: (None if ot is None else ot.offset) for tp, ot in found.items()}

    def replica_placement(
        self, tps: Collection[TopicPartition]
    ) -> tuple[str | None, dict[TopicPartition, tuple[int, tuple[int, ...]]]]:
        """The cluster id and each partition's ``(leader, in-sync replicas)`` from a fresh
        Metadata response (for ``direct_read.plan_direct``); partitions without a leader omitted."""
        self.list_topics()  # refreshes the consumer's metadata
        meta = self.consumer().core.cluster.metadata
        placement: dict[TopicPartition, tuple[int, tuple[int, ...]]] = {}
        for tp in tps:
            topic = meta.topics.get(tp.topic)
            part = topic.partitions.get(tp.partition) if topic is not None else None
            if part is not None and part.leader >= 0:
                placement[tp] = (part.leader, tuple(part.isr))
        return meta.cluster_id, placement

    # -- fetch ---------------------------------------------------------------------------------

    def _log_bounds(self, tp: TopicPartition, isolation_level: IsolationLevel) -> tuple[int, int]:
        earliest = self.earliest_offsets([tp])
        latest = self.latest_offsets([tp], isolation_level)
        if tp not in earliest or tp not in latest:
            raise UnknownPartitionError(tp)
        return earliest[tp], latest[tp]

    def _fetch_raw(
        self, tp: TopicPartition, offset: int, max_bytes: int, isolation_level: IsolationLevel, wait_ms: int
    ) -> RawFetch:
        return self._retrying(
            f"fetch {tp} at offset {offset}",
            lambda c: c.fetch_raw(
                tp, offset, max_bytes, isolation_level, max_wait_ms=wait_ms, timeout_ms=self.fetch_timeout_ms
            ),
            self.fetch_timeout_ms / 1000.0,
        )

    def _prefetcher(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._prefetch is None:
            self._prefetch = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pylog-prefetch")
        return self._prefetch

    def fetch(
        self,
        tp: TopicPartition,
        start_offset: int,
        end_offset: int,
        *,
        isolation_level: IsolationLevel,
        max_bytes: int,
    ) -> Iterator[FetchedChunk]:
        """See ``BrokerAccess.fetch``.

        While the caller works on one chunk, the Fetch for the next is already in flight (one
        deep, on a helper thread), so broker time and decoding overlap. When the log has not
        reached ``end_offset`` yet, it long-polls up to ``fetch.timeout.ms``; an offset beyond the
        log end is given ``OUT_OF_RANGE_GRACE_S`` to reappear (a restarting or lagging broker)
        before it is reported as ``OffsetOutOfRangeError``."""
        self.consumer()
        budget_s = self.fetch_timeout_ms / 1000.0
        read_committed = isolation_level == "read_committed"
        position = start_offset
        stalled_since: float | None = None
        beyond_end_since: float | None = None
        wait_ms = 0
        ahead: concurrent.futures.Future[RawFetch] | None = None  # the fetch at ``position``
        try:
            while position < end_offset:
                try:
                    if ahead is not None:
                        raw = ahead.result()
                        ahead = None
                    else:
                        raw = self._fetch_raw(tp, position, max_bytes, isolation_level, wait_ms)
                except UnknownTopicOrPartitionError:
                    raise UnknownPartitionError(tp) from None
                except ClientOffsetOutOfRange:
                    log_start, log_end = self._log_bounds(tp, isolation_level)
                    now = self._clock()
                    beyond_end_since = now if beyond_end_since is None else beyond_end_since
                    short_for_s = now - beyond_end_since
                    loss = judge_read(
                        tp,
                        position,
                        end=end_offset,
                        earliest=log_start,
                        latest=log_end,
                        short_for_s=short_for_s,
                        grace_s=min(OUT_OF_RANGE_GRACE_S, budget_s),
                    )
                    if loss is not None:
                        raise OffsetOutOfRangeError(tp, position, log_start, log_end) from None
                    if short_for_s >= budget_s:
                        raise BrokerAccessError(
                            f"fetch {tp} at offset {position} was refused as out of range for {budget_s:.0f} s "
                            f"although the broker reports offsets [{log_start}, {log_end})"
                        ) from None
                    self._sleep(0.2)
                    continue
                beyond_end_since = None
                records = raw.records
                next_offset = raw.next_offset(position) if records else position
                if next_offset > position:
                    stalled_since = None
                    wait_ms = 0
                    limit = raw.last_stable_offset if read_committed else raw.high_watermark
                    if next_offset < min(end_offset, limit):  # more is there: ask for it now
                        ahead = self._prefetcher().submit(
                            self._fetch_raw, tp, next_offset, max_bytes, isolation_level, 0
                        )
                    yield FetchedChunk(
                        records,
                        tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in raw.aborted_transactions),
                        next_offset,
                        raw.high_watermark,
                        raw.last_stable_offset,
                        raw.log_start_offset,
                    )
                    position = next_offset
                    continue
                # No progress: below the log start, or the log has not (yet) reached the range end.
                limit = raw.last_stable_offset if read_committed and raw.last_stable_offset >= 0 else raw.high_watermark
                now = self._clock()
                stalled_since = now if stalled_since is None else stalled_since
                loss = judge_read(
                    tp,
                    position,
                    end=end_offset,
                    earliest=raw.log_start_offset,
                    latest=limit,
                    short_for_s=now - stalled_since,
                    grace_s=budget_s,  # a log that has not reached the range end may still grow to it
                )
                if loss is not None:
                    raise OffsetOutOfRangeError(tp, position, raw.log_start_offset, limit)
                if now - stalled_since >= budget_s:
                    raise BrokerAccessError(
                        f"fetch {tp} at offset {position} returned no records for {budget_s:.0f} s although the "
                        f"broker reports offsets up to {limit}"
                    )
                wait_ms = LONG_POLL_MS
        finally:
            if ahead is not None and not ahead.cancel():  # closed early: let the fetch in flight end
                concurrent.futures.wait([ahead], timeout=self.fetch_timeout_ms / 1000.0)

    # -- commits -------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        key = (self.bootstrap_servers, group_id)
        with _commit_lock:
            paused_until = _commit_paused_until.get(key)
        if paused_until is not None and time.monotonic() < paused_until:
            return
        try:
            self._admin_client().alter_consumer_group_offsets(group_id, dict(offsets), timeout_ms=COMMIT_TIMEOUT_MS)
        except (KafkaError, OSError) as exc:
            if _is_coordinator_missing(exc):
                with _commit_lock:
                    first = key not in _commit_paused_until
                    _commit_paused_until[key] = time.monotonic() + COMMIT_RETRY_INTERVAL_S
                if first:
                    log.warning(
                        "pylog: the broker at %s has no group coordinator, so offsets of group %r are not "
                        "committed (lag tools will not see this query; its progress is safe in the "
                        "checkpoint). Retrying every %.0f s.",
                        self.bootstrap_servers,
                        group_id,
                        COMMIT_RETRY_INTERVAL_S,
                    )
                return
            raise BrokerAccessError(f"commit offsets of group {group_id!r} failed: {exc}") from exc
        with _commit_lock:
            if _commit_paused_until.pop(key, None) is not None:
                log.info("pylog: offsets of group %r are committed again", group_id)

    def healthy(self) -> bool:
        """Its consumer (if opened) is still usable."""
        consumer = self._consumer
        if consumer is None:
            return True
        try:
            consumer.core._check_open()
        except KafkaError:
            return False
        return True

    def reopen(self) -> None:
        self._closed = False

    def close(self) -> None:
        """Done with it: back to the process's pool (pooled ones), else ``close_now``."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.give_back(self)
        else:
            self.close_now()

    def close_now(self) -> None:
        """Close the clients and their connections. Idempotent."""
        self._closed = True
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close(timeout_ms=5_000)
                except (KafkaError, OSError) as exc:
                    log.debug("pylog: closing a client failed: %s", exc)
        self._consumer = None
        self._admin = None
        if self._prefetch is not None:
            self._prefetch.shutdown(wait=False, cancel_futures=True)
            self._prefetch = None
