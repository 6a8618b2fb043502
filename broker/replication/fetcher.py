"""Follower fetchers: the followed partitions fetched from their leaders (Kafka's ReplicaFetcherThread).

Kafka documentation §4.7 "Replication": "Followers consume messages from the leader just as a normal Kafka
consumer would
and apply them to their own log." One ``SourceFetcher`` per (leader broker, fetcher index), with
``num.replica.fetchers`` indexes per leader (a partition goes to ``hash % n``), each one task on its
own connection (``broker.network.peer``) sending Fetch v12 with this broker's ``replica_id`` for all
its partitions at once, ``replica.fetch.max.bytes`` per partition, ``replica.fetch.response.max.bytes``
per request, waiting up to ``replica.fetch.wait.max.ms`` for ``replica.fetch.min.bytes`` at the leader.

Per partition of a response:

* records: appended unchanged (``Partition.append_as_follower``: the leader's offsets and
  ``partitionLeaderEpoch``), then the leader's high watermark is learnt;
* ``diverging_epoch`` (the leader's log has no record of this log's last epoch past that end
  offset, KIP-595/KIP-320): truncate to ``min(leader end offset, own end offset of that epoch)``
  and fetch again with the new last epoch, until the logs agree (Kafka documentation §5.4.4 "Guarantees": no
  replica keeps
  records the others do not have);
* OFFSET_OUT_OF_RANGE: below the leader's log start the log restarts there; past the leader's log
  end (a leader that lost records) it truncates to the leader's end;
* OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405 "Follower Replication"): the offset is below the
  leader's local log start (``log_start_offset`` of the answer) and in the remote tier: the log
  restarts at the leader's local log start and ``tier`` (the RemoteLogManager) rebuilds the leader
  epochs and producer state there from the tier's copy of the segment before it;
* NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION and others: the
  partition waits ``replica.fetch.backoff.ms`` (the metadata will say who leads).

A connection failure backs off ``replica.fetch.backoff.ms`` and reconnects. A response for a
partition whose leadership changed while it was in flight is dropped. The partition list comes
from ``ReplicaManager`` (``replan``), called whenever roles or broker endpoints change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.log.errors import LogError
from broker.metadata.image import MetadataImage
from broker.network.dial import Dialer
from broker.network.peer import PeerConnection, PeerError
from broker.quota.replication import ReplicationThrottles
from broker.replication.leader_epoch import truncation_offset
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager, ReplicationConfig
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # names topics, carries last_fetched_epoch and diverging_epoch
TopicPartition = tuple[str, int]


class TierRebuild(Protocol):
    """KIP-405 follower rebuild (``broker.log.remote.manager.RemoteLogManager``)."""

    def ready_to_rebuild(self, hosted: Partition, local_start: int) -> bool: ...

    def rebuild_follower(self, hosted: Partition, local_start: int) -> None: ...


@dataclass
class _Fetching:
    leader_epoch: int
    retry_at_ms: int = 0


@dataclass
class SourceFetcher:
    """One leader broker's partitions, fetched by one task."""

    source_id: int
    index: int
    host: str
    port: int
    partitions: dict[TopicPartition, _Fetching] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    connection: PeerConnection | None = None


class ReplicaFetchers:
    """Keeps one ``SourceFetcher`` per leader and fetcher index running for the followed partitions."""

    def __init__(
        self, replicas: ReplicaManager, image: Callable[[], MetadataImage], *, clock_ms: Callable[[], int],
        dialer: Dialer | None = None,
    ) -> None:  # fmt: skip
        """``dialer``: how fetchers reach the leaders (the inter-broker listener's security)."""
        self._dialer = dialer
        self._replicas = replicas
        self._image = image
        self._clock_ms = clock_ms
        self._config: ReplicationConfig = replicas.config
        self._fetchers: dict[tuple[int, int], SourceFetcher] = {}
        self._closed = False
        self.bytes_fetched = 0  # record bytes appended from leaders (FetcherStats BytesPerSec, on /metrics)
        self.throttles: ReplicationThrottles | None = None  # follower.replication.throttled.* (KIP-73)
        self.tier: TierRebuild | None = None  # KIP-405: set when tiered storage is enabled
        replicas.follower_listener = self.replan

    def replan(self) -> None:
        """Match the fetchers to the partitions followed now (called on every role change)."""
        if self._closed:
            return
        brokers = self._image().brokers
        wanted: dict[tuple[int, int], dict[TopicPartition, int]] = {}
        for hosted in self._replicas.partitions():
            role = hosted.role
            if role is None or hosted.is_leader or role.leader < 0 or role.leader not in brokers:
                continue
            index = hash((hosted.topic, hosted.partition)) % self._config.num_fetchers
            wanted.setdefault((role.leader, index), {})[(hosted.topic, hosted.partition)] = role.leader_epoch
        for key, fetcher in list(self._fetchers.items()):
            endpoint = brokers.get(key[0])
            if key not in wanted or endpoint is None or (endpoint.host, endpoint.port) != (fetcher.host, fetcher.port):
                self._stop(fetcher)
                del self._fetchers[key]
        for key, parts in wanted.items():
            existing = self._fetchers.get(key)
            if existing is not None and existing.task is not None and existing.task.done():
                self._stop(existing)  # it died (``_fetcher_done`` logged why): a fresh one takes over
                del self._fetchers[key]
                existing = None
            if existing is not None:
                fetcher = existing
            else:
                endpoint = brokers[key[0]]
                fetcher = self._fetchers[key] = SourceFetcher(key[0], key[1], endpoint.host, endpoint.port)
                fetcher.task = asyncio.get_running_loop().create_task(
                    self._run(fetcher), name=f"replica-fetcher-{key[0]}-{key[1]}"
                )
                fetcher.task.add_done_callback(self._fetcher_done)
            current = fetcher.partitions
            fetcher.partitions = {
                tp: current[tp] if tp in current and current[tp].leader_epoch == epoch else _Fetching(epoch)
                for tp, epoch in parts.items()
            }
            fetcher.changed.set()

    def _fetcher_done(self, task: asyncio.Task[None]) -> None:
        """A fetcher loop ends only when cancelled; one that raised is logged and replaced (its
        partitions would otherwise never fetch again, silently out of every ISR)."""
        if task.cancelled() or self._closed:
            return
        exc = task.exception()
        if exc is not None:
            log.error("%s died; starting a new one: %r", task.get_name(), exc, exc_info=exc)
            asyncio.get_running_loop().call_later(self._config.fetch_backoff_ms / 1000, self.replan)

    def _stop(self, fetcher: SourceFetcher) -> None:
        if fetcher.task is not None:
            fetcher.task.cancel()
        if fetcher.connection is not None:
            connection = fetcher.connection
            fetcher.connection = None
            asyncio.get_running_loop().create_task(connection.close())

    async def close(self) -> None:
        self._closed = True
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            if fetcher.task is not None:
                fetcher.task.cancel()
        for fetcher in fetchers:
            if fetcher.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetcher.task
            if fetcher.connection is not None:
                await fetcher.connection.close()

    # -- one fetcher's loop -----------------------------------------------------------------------
    async def _run(self, fetcher: SourceFetcher) -> None:
        config = self._config
        fetcher.connection = PeerConnection(
            fetcher.source_id, fetcher.host, fetcher.port,
            client_id=f"broker-{self._replicas.node_id}-fetcher-{fetcher.index}",
            request_timeout_ms=config.socket_timeout_ms + config.fetch_wait_max_ms, dialer=self._dialer,
        )  # fmt: skip
        while True:
            now = self._clock_ms()
            ready = {tp: state for tp, state in fetcher.partitions.items() if state.retry_at_ms <= now}
            if not ready:
                fetcher.changed.clear()
                soonest = min((s.retry_at_ms for s in fetcher.partitions.values()), default=None)
                timeout = None if soonest is None else max(soonest - now, 1) / 1000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(fetcher.changed.wait(), timeout)
                continue
            request = self._build_request(ready)
            if request is None:
                if not any(s.retry_at_ms > now for s in ready.values()):  # else: throttled, wait for retry_at
                    await asyncio.sleep(config.fetch_backoff_ms / 1000)
                continue
            sent, body = request
            try:
                response = await fetcher.connection.request(ApiKey.FETCH, FETCH_VERSION, body)
            except PeerError as exc:
                log.info("replica fetch from broker %d failed: %s", fetcher.source_id, exc)
                await asyncio.sleep(config.fetch_backoff_ms / 1000)
                continue
            if response.error_code:
                log.info("replica fetch from broker %d: error %d", fetcher.source_id, response.error_code)
                await asyncio.sleep(config.fetch_backoff_ms / 1000)
                continue
            for topic in response.responses:
                for part in topic.partitions:
                    key = (topic.topic, part.partition_index)
                    state = fetcher.partitions.get(key)
                    hosted = self._replicas.get_partition(*key)
                    if state is None or hosted is None or key not in sent or sent[key] != hosted.leader_epoch:
                        continue  # leadership moved while the fetch was in flight
                    if not self._apply_or_back_off(fetcher, hosted, part):
                        state.retry_at_ms = self._clock_ms() + config.fetch_backoff_ms
                    if self.throttles is not None and self.throttles.follower_throttled(*key):
                        self.throttles.follower.record(len(part["records"] or b""))
            await asyncio.sleep(0)

    def _build_request(self, ready: dict[TopicPartition, _Fetching]) -> tuple[dict[TopicPartition, int], dict] | None:
        config = self._config
        topics: dict[str, list[dict]] = {}
        sent: dict[TopicPartition, int] = {}
        for (topic, partition), state in ready.items():
            hosted = self._replicas.get_partition(topic, partition)
            if hosted is None or hosted.is_leader or hosted.log.closed:
                continue
            throttles = self.throttles
            if throttles is not None and throttles.follower_holds_back(
                topic, partition, self._replicas.node_id in hosted.isr
            ):
                state.retry_at_ms = self._clock_ms() + max(1, throttles.follower.delay_ms())
                continue
            target = hosted.log
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": state.leader_epoch,
                    "fetch_offset": target.log_end_offset,
                    "last_fetched_epoch": hosted.epochs.latest_epoch,
                    "log_start_offset": target.log_start_offset,
                    "partition_max_bytes": config.fetch_max_bytes,
                }
            )
            sent[(topic, partition)] = state.leader_epoch
        if not sent:
            return None
        body = {
            "replica_id": self._replicas.node_id,
            "max_wait_ms": config.fetch_wait_max_ms,
            "min_bytes": config.fetch_min_bytes,
            "max_bytes": config.fetch_response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        return sent, body

    def _apply_or_back_off(self, fetcher: SourceFetcher, hosted: Partition, part: dict) -> bool:
        """``_apply``, with a disk error while appending, truncating or restarting the log (an
        offline log dir's LogError, or a raw OSError from a file the restart creates) answered by
        backing this partition off (False) instead of raising: raised, it ended the loop that
        fetches every partition of this leader (the chaos disk-full nemesis left a follower out
        of the ISR of every partition one broker led; ``_fetcher_done`` now also replaces a loop
        that died)."""
        try:
            return self._apply(fetcher, hosted, part)
        except (LogError, OSError) as exc:
            log.warning("%s: cannot apply the leader's answer: %s", hosted.log.name, exc)
            return False

    def _apply(self, fetcher: SourceFetcher, hosted: Partition, part: dict) -> bool:
        """Apply one partition's answer; False when it should back off."""
        code = part["error_code"]
        target = hosted.log
        if code == ErrorCode.NONE:
            diverging = part["diverging_epoch"]
            if diverging is not None and diverging["end_offset"] >= 0:
                self._truncate_on_divergence(hosted, diverging["epoch"], diverging["end_offset"])
                return True
            records = part["records"]
            try:
                if records is not None and len(records):
                    hosted.append_as_follower(records)
                    self.bytes_fetched += len(records)
            except LogError as exc:
                # an offline log dir logged its one ERROR already; a line per fetch would flood the log
                offline = target.dir_state is not None and target.dir_state.offline
                (log.debug if offline else log.warning)("%s: cannot append the leader's batches: %s", target.name, exc)
                return False
            hosted.follower_learns(part["high_watermark"], part["log_start_offset"])  # wakes its waiters
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_end, leader_start = part["high_watermark"], part["log_start_offset"]
            if 0 <= leader_end < target.log_end_offset:
                log.warning("%s: leader %d ends at %d, below this log's end %d: truncating",
                            target.name, fetcher.source_id, leader_end, target.log_end_offset)  # fmt: skip
                hosted.truncate_to(leader_end)
            elif leader_start > target.log_end_offset:
                log.info("%s: leader %d starts at %d: restarting this log there", target.name, fetcher.source_id,
                         leader_start)  # fmt: skip
                hosted.restart_at(leader_start)
            return True
        if code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            leader_local_start = part["log_start_offset"]
            if leader_local_start > target.log_end_offset:
                if self.tier is not None and not self.tier.ready_to_rebuild(hosted, leader_local_start):
                    return False  # this broker's remote log metadata is behind: back off, ask again
                log.info("%s: leader %d keeps offsets below %d in the remote tier: rebuilding this log there",
                         target.name, fetcher.source_id, leader_local_start)  # fmt: skip
                hosted.restart_at(leader_local_start)
                if self.tier is not None:
                    self.tier.rebuild_follower(hosted, leader_local_start)
                return True
        log.debug("%s: fetch from broker %d answered error %d", target.name, fetcher.source_id, code)
        return False

    @staticmethod
    def _truncate_on_divergence(hosted: Partition, leader_epoch: int, leader_end_offset: int) -> None:
        target = hosted.log
        offset = truncation_offset(
            hosted.epochs, target.log_end_offset, hosted.high_watermark, leader_epoch, leader_end_offset
        )
        offset = max(offset, target.log_start_offset)
        log.info("%s: diverges from the leader at epoch %d end %d: truncating to %d",
                 target.name, leader_epoch, leader_end_offset, offset)  # fmt: skip
        hosted.truncate_to(offset)
