"""``RemoteLogManager``: the broker's driver of tiered storage (KIP-405 "RemoteLogManager",
"RLMTask", "RemoteLogMetadataManager" over ``__remote_log_metadata``).

Every ``remote.log.manager.task.interval.ms`` (one task on the event loop, ``run_once``):

1. **Follow the metadata.** Each broker reads its own replica of every ``__remote_log_metadata``
   partition it hosts, from its log start to its high watermark (what the ISR has), and applies
   the records (``serde.decode``) to a per-partition :class:`RemoteLogMetadataCache` (the
   state machine of KIP-405's segment states). A metadata log that was truncated or restarted
   below what was read is replayed from its start. This is the only way the cache changes:
   the broker that writes an event sees it when it is replicated, as every other broker does.
2. **Copy** (leader of a partition with ``remote.storage.enable``): rolled segments wholly below
   the last stable offset and above the highest offset already tiered (``plan.segments_to_copy``),
   oldest first, each as COPY_SEGMENT_STARTED → ``RemoteStorageManager.copy_log_segment_data``
   (in a worker thread) → COPY_SEGMENT_FINISHED. The segment goes with its offset, time and
   transaction indexes, the producer snapshot at its end offset and the leader-epoch checkpoint
   up to its end (KIP-405 ``LogSegmentData``). The metadata records are produced with acks=all
   to the leader of the partition's metadata partition (``partitioner.metadata_partition``,
   Kafka's partitioning), locally or over the inter-broker listener, and the task waits until
   its own replica has applied them before it goes on.
3. **Remote retention** (leader): copied segments that ``retention.ms`` / ``retention.bytes``
   remove (``RemoteLogMetadataCache.retention_candidates``) and segments orphaned by a crash or a
   failed call (COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED) go through
   DELETE_SEGMENT_STARTED → ``delete_log_segment_data`` → DELETE_SEGMENT_FINISHED. The log start
   offset is the start of the first copied segment, so it advances with them; the local log is
   trimmed to it as well.
4. **Local retention** (every replica): rolled segments that breach ``local.retention.*`` and are
   already tiered go (``plan.local_segments_to_delete``) by raising the *local* log start offset
   (``Log.delete_records_before``); ``Log.tiered`` keeps the log's own ``retention.*`` off them.

5. **Followers** (KIP-405 "Follower Replication"): a follower below the leader's local log start
   is answered OFFSET_MOVED_TO_TIERED_STORAGE (:meth:`moved_to_tier`); it restarts at the local
   log start and :meth:`rebuild_follower` takes its leader epochs and producer state from the
   tier's copy of the segment ending just below.

The partition's log start offset is then ``min(remote log start, local log start)``
(:meth:`log_start_offset`); offsets between it and the local log start are served from the
tier by :meth:`read_remote` (a blocking call: the fetch handler runs it in a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from broker.controller.errors import MetadataError
from broker.log.errors import LogError
from broker.log.log import Log
from broker.log.remote import serde
from broker.log.remote.config import REMOTE_LOG_METADATA_TOPIC, RemoteLogManagerConfig
from broker.log.remote.metadata import (
    IllegalStateTransition,
    RemoteLogMetadataCache,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from broker.log.remote.partitioner import metadata_partition
from broker.log.remote.plan import (
    InvalidLocalRetention,
    LocalSegment,
    effective_local_retention,
    local_segments_to_delete,
    segments_to_copy,
)
from broker.log.remote.read import (
    epoch_checkpoint,
    index_position,
    offset_for_timestamp,
    read_batches,
    segment_leader_epochs,
)
from broker.log.remote.storage import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
)
from broker.log.txn_index import ENTRY, ENTRY_SIZE, AbortedTxn
from broker.metadata.image import MetadataImage
from broker.replication.leader_epoch import parse_epoch_checkpoint
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.errors import RecordError
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

WRITE_TIMEOUT_MS = 30_000
FOLLOW_STEP_BYTES = 1 << 20
COPIES_PER_TASK = 8  # segments one partition copies per task run (the next run goes on)
PRODUCE_VERSION = 9

Event = RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
CreateTopic = Callable[[str, int, int, dict[str, str]], Awaitable[Any]]


class Sender(Protocol):
    """What the manager needs to produce to another broker (``BrokerSender``)."""

    async def request(self, host: str, port: int, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any: ...


@dataclass
class _Followed:
    """One ``__remote_log_metadata`` partition as this broker has read it."""

    next_offset: int = -1  # -1: not started
    caches: dict[tuple[uuid.UUID, int], RemoteLogMetadataCache] | None = None


class RemoteLogManager:
    """Module docstring. Owned by the broker; ``run_once`` runs on the event loop, RSM calls in
    worker threads (``asyncio.to_thread``), ``read_remote`` in the fetch handler's thread."""

    def __init__(
        self,
        node_id: int,
        config: RemoteLogManagerConfig,
        *,
        rsm: RemoteStorageManager,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        create_topic: CreateTopic,
        sender: Sender,
        clock_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.rsm = rsm
        self._replicas = replicas
        self._image = image
        self._create_topic = create_topic
        self._sender = sender
        self._clock_ms = clock_ms
        self._followed: dict[int, _Followed] = {}
        self._creating = False
        self._warned: set[tuple[str, int]] = set()
        self._rebuild_waits: dict[tuple[str, int], int] = {}  # follower rebuilds waiting for metadata

    # -- metadata ---------------------------------------------------------------------------
    def _metadata_partitions(self) -> int:
        topic = self._image().topics.get(REMOTE_LOG_METADATA_TOPIC)
        return len(topic.partitions) if topic is not None else 0

    def follow(self) -> int:
        """Apply the new records of every hosted metadata partition (up to its high watermark);
        returns how many were applied."""
        applied = 0
        for p in range(self._metadata_partitions()):
            hosted = self._replicas.get_partition(REMOTE_LOG_METADATA_TOPIC, p)
            if hosted is None or hosted.log.closed:
                continue
            applied += self._follow_one(p, hosted)
        return applied

    def _follow_one(self, p: int, hosted: Partition) -> int:
        state = self._followed.setdefault(p, _Followed())
        target = hosted.log
        if (
            state.caches is None
            or state.next_offset < target.log_start_offset
            or state.next_offset > target.log_end_offset
        ):
            state.caches = {}  # first read, or the metadata log moved under us: replay it
            state.next_offset = target.log_start_offset
        applied = 0
        upper = hosted.high_watermark
        while state.next_offset < upper:
            try:
                with target.read(state.next_offset, FOLLOW_STEP_BYTES, upper) as chunk:
                    data, next_offset = chunk.read_bytes(), chunk.next_offset
            except (LogError, OSError) as exc:  # an offline log or a racing truncation: try next time
                log.warning("%s-%d: cannot read from %d: %s", REMOTE_LOG_METADATA_TOPIC, p, state.next_offset, exc)
                break
            if not data or next_offset <= state.next_offset:
                break
            try:
                batches = decode_batches(data)
            except RecordError as exc:
                log.warning("%s-%d: unreadable batch at %d: %s", REMOTE_LOG_METADATA_TOPIC, p, state.next_offset, exc)
                state.next_offset = next_offset
                continue
            for header, records in batches:
                if header.is_control:
                    continue
                for record in records:
                    if record.offset >= state.next_offset and record.value is not None:
                        applied += self._apply(state.caches, record.value, p, record.offset)
            state.next_offset = next_offset
        return applied

    @staticmethod
    def _apply(caches: dict[tuple[uuid.UUID, int], RemoteLogMetadataCache], value: bytes, p: int, offset: int) -> int:
        try:
            event = serde.decode(value)
        except ValueError as exc:  # UnsupportedRecordType (apiKeys 2, 3) is a ValueError too
            log.debug("%s-%d@%d: record skipped: %s", REMOTE_LOG_METADATA_TOPIC, p, offset, exc)
            return 0
        tip = event.segment_id.topic_id_partition
        cache = caches.setdefault((tip.topic_id, tip.partition), RemoteLogMetadataCache())
        try:
            if isinstance(event, RemoteLogSegmentMetadata):
                cache.add_copy_in_progress(event)
            else:
                cache.update(event)
        except (IllegalStateTransition, KeyError) as exc:  # Kafka logs and skips such an event too
            log.warning("%s-%d@%d: %s ignored: %r", REMOTE_LOG_METADATA_TOPIC, p, offset, type(exc).__name__, exc)
            return 0
        return 1

    def _tip(self, topic: str, partition: int) -> TopicIdPartition | None:
        found = self._image().topics.get(topic)
        return TopicIdPartition(found.topic_id, topic, partition) if found is not None else None

    def _metadata_partition_of(self, tip: TopicIdPartition) -> int | None:
        n = self._metadata_partitions()
        return metadata_partition(tip.topic_id, tip.partition, n) if n else None

    def cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache | None:
        """The partition's remote segments as this broker knows them; None when its metadata
        partition is not hosted here (or does not exist yet)."""
        p = self._metadata_partition_of(tip)
        if p is None:
            return None
        state = self._followed.get(p)
        if state is None or state.caches is None:
            return None
        return state.caches.get((tip.topic_id, tip.partition)) or RemoteLogMetadataCache()

    def cache_of(self, topic: str, partition: int) -> RemoteLogMetadataCache | None:
        tip = self._tip(topic, partition)
        return self.cache(tip) if tip is not None else None

    # -- what fetches and ListOffsets see --------------------------------------------------------
    def log_start_offset(self, topic: str, partition: int, target: Log) -> int:
        """The partition's log start offset: the remote log start when the tier holds older
        data than the local log (Kafka's ``UnifiedLog.logStartOffset``), else the local one."""
        local = target.log_start_offset
        if not target.config.remote_storage_enable:
            return local
        cache = self.cache_of(topic, partition)
        remote = cache.log_start_offset() if cache is not None else None
        return min(remote, local) if remote is not None else local

    def highest_tiered_offset(self, topic: str, partition: int) -> int:
        """ListOffsets -5 (KIP-1005): the last offset in the tier, -1 when none."""
        cache = self.cache_of(topic, partition)
        return cache.highest_copied_offset() if cache is not None else -1

    def segment_for(self, topic: str, partition: int, offset: int) -> RemoteLogSegmentMetadata | None:
        cache = self.cache_of(topic, partition)
        if cache is None:
            return None
        return cache.segment_for_offset(offset) or cache.next_segment_after(offset)

    def read_remote(
        self, md: RemoteLogSegmentMetadata, offset: int, max_bytes: int, max_offset: int | None, *,
        read_committed: bool, min_one_batch: bool = True,
    ) -> tuple[bytes, list[AbortedTxn]]:  # fmt: skip
        """Blocking: whole batches of ``md`` from ``offset`` (``read.read_batches``), and for
        ``read_committed`` the aborted transactions of its transaction index overlapping them.
        Raises :class:`RemoteStorageException` (``RemoteResourceNotFoundException`` when the
        segment was deleted meanwhile)."""
        start = max(offset, md.start_offset)
        with self.rsm.fetch_index(md, IndexType.OFFSET) as f:
            position = index_position(f.read(), md.start_offset, start)
        with self.rsm.fetch_log_segment(md, position) as stream:
            data, next_offset = read_batches(stream, start, max_bytes, max_offset, min_one_batch=min_one_batch)
        aborted: list[AbortedTxn] = []
        if read_committed and data:
            with (
                contextlib.suppress(RemoteResourceNotFoundException),
                self.rsm.fetch_index(md, IndexType.TRANSACTION) as f,
            ):
                raw = f.read()
                for pos in range(0, len(raw) - ENTRY_SIZE + 1, ENTRY_SIZE):
                    _, producer_id, first, last, lso = ENTRY.unpack_from(raw, pos)
                    if last >= start and first < next_offset:
                        aborted.append(AbortedTxn(producer_id, first, last, lso))
        return data, aborted

    def tiered_timestamp_candidate(self, topic: str, partition: int, target: Log, timestamp_ms: int) -> bool:
        """Whether ListOffsets for ``timestamp_ms`` may be answered from the tier: a copied
        segment below the local log start holds a record at or after it."""
        if not target.config.remote_storage_enable:
            return False
        cache = self.cache_of(topic, partition)
        local = target.log_start_offset
        return cache is not None and any(
            m.start_offset < local and m.max_timestamp_ms >= timestamp_ms for m in cache.copied()
        )

    def offset_for_timestamp(
        self, topic: str, partition: int, target: Log, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """Blocking (a worker thread): ``(offset, timestamp)`` of the first tiered record below
        the local log start with a timestamp at or after ``timestamp_ms``, else None (then the
        local log answers)."""
        cache = self.cache_of(topic, partition)
        if cache is None:
            return None
        local = target.log_start_offset
        for md in cache.copied():
            if md.start_offset >= local or md.max_timestamp_ms < timestamp_ms:
                continue
            with self.rsm.fetch_log_segment(md, 0) as stream:
                found = offset_for_timestamp(stream, timestamp_ms)
            if found is not None and found[0] < local:
                return found
        return None

    def epoch_for_offset(self, topic: str, partition: int, offset: int) -> int:
        """The leader epoch of ``offset`` in the partition's leader-epoch cache (-1: unknown)."""
        hosted = self._replicas.get_partition(topic, partition)
        return hosted.epochs.epoch_for_offset(offset) if hosted is not None else -1

    # -- followers (KIP-405 "Follower Replication") ---------------------------------------------------
    def moved_to_tier(self, topic: str, partition: int, target: Log, fetch_offset: int) -> bool:
        """A follower's ``fetch_offset`` is below this leader's local log start and in the tier:
        it is answered OFFSET_MOVED_TO_TIERED_STORAGE (109)."""
        if not target.config.remote_storage_enable or fetch_offset >= target.log_start_offset:
            return False
        cache = self.cache_of(topic, partition)
        return cache is not None and cache.segment_for_offset(fetch_offset) is not None

    def ready_to_rebuild(self, hosted: Partition, local_start: int) -> bool:
        """Whether this broker's metadata shows the remote segment ending at ``local_start - 1``
        yet (it follows the metadata topic as a replica too, maybe behind); the follower's fetcher
        backs off until then, at most ``WRITE_TIMEOUT_MS``, or at once when this broker does not
        host the partition's metadata partition (a plain restart)."""
        self.follow()
        tip = self._tip(hosted.topic, hosted.partition)
        p = self._metadata_partition_of(tip) if tip is not None else None
        metadata_topic = self._image().topics.get(REMOTE_LOG_METADATA_TOPIC)
        if tip is None or p is None or metadata_topic is None or p not in metadata_topic.partitions:
            return True
        if self.node_id not in metadata_topic.partitions[p].replicas:
            return True  # never followed here: a plain restart
        cache = self.cache(tip)  # None while this broker's replica is not loaded yet
        md = cache.segment_for_offset(local_start - 1) if cache is not None else None
        key = (hosted.topic, hosted.partition)
        if md is not None and md.end_offset == local_start - 1:
            self._rebuild_waits.pop(key, None)
            return True
        first = self._rebuild_waits.setdefault(key, self._clock_ms())
        return self._clock_ms() - first > WRITE_TIMEOUT_MS

    def rebuild_follower(self, hosted: Partition, local_start: int) -> None:
        """A follower restarted at the leader's local log start: its leader epochs and producer
        state come from the tier's copy of the segment ending just below (the leader-epoch
        checkpoint and the producer snapshot shipped with it), as KIP-405's follower does. Small
        reads of the shared tier, on the loop, like the restart itself; a failure is logged and
        leaves the follower as a plain restart would."""
        target = hosted.log
        cache = self.cache_of(hosted.topic, hosted.partition)
        md = cache.segment_for_offset(local_start - 1) if cache is not None else None
        if md is None or md.end_offset != local_start - 1:
            log.warning("%s: no remote segment ends at %d: leader epochs and producer state not rebuilt",
                        target.name, local_start - 1)  # fmt: skip
            return
        try:
            with self.rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
                entries = parse_epoch_checkpoint(f.read().decode())
            with self.rsm.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) as f:
                snapshot = f.read()
        except (RemoteStorageException, ValueError, UnicodeDecodeError) as exc:
            log.warning("%s: cannot rebuild from the remote tier: %s", target.name, exc)
            return
        for entry in entries:
            hosted.epochs.assign(entry.epoch, entry.start_offset)
        if snapshot:
            path = target.producer_state.snapshot_path(local_start)
            path.write_bytes(snapshot)
            target.producer_state.rebuild(target.segments, target.log_end_offset, self._clock_ms())
        log.info("%s: rebuilt %d leader epoch(s) and the producer state at %d from the remote tier",
                 target.name, len(entries), local_start)  # fmt: skip

    # -- the task ------------------------------------------------------------------------------
    async def run_once(self) -> None:
        """One round of the module docstring's steps over every hosted partition."""
        self.follow()
        image = self._image()
        metadata_topic = image.topics.get(REMOTE_LOG_METADATA_TOPIC)
        for hosted in list(self._replicas.partitions()):
            if hosted.topic == REMOTE_LOG_METADATA_TOPIC or hosted.log.closed:
                continue
            target = hosted.log
            target.tiered = target.config.remote_storage_enable
            if not target.tiered:
                continue
            if metadata_topic is None:
                await self._ensure_metadata_topic()
                return
            tip = self._tip(hosted.topic, hosted.partition)
            cache = self.cache(tip) if tip is not None else None
            if tip is None or cache is None:
                self._warn_once(hosted, "its __remote_log_metadata partition is not hosted on this broker")
                continue
            try:
                if hosted.is_leader:
                    await self._copy(hosted, tip)
                    await self._remote_retention(hosted, tip)
                self._local_retention(hosted, tip)
            except (RemoteStorageException, _WriteFailed) as exc:
                log.warning("%s-%d: tiering stopped for this round: %s", hosted.topic, hosted.partition, exc)

    def _warn_once(self, hosted: Partition, why: str) -> None:
        key = (hosted.topic, hosted.partition)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s-%d is not tiered by this broker: %s", hosted.topic, hosted.partition, why)

    async def _ensure_metadata_topic(self) -> None:
        """Create ``__remote_log_metadata`` as Kafka's RLMM does (partitions, replication factor
        capped to the live brokers, ``retention.ms``, ``cleanup.policy=delete``)."""
        if self._creating:
            return
        self._creating = True
        try:
            live = max(len(self._image().brokers), 1)
            wanted = self.config.metadata_topic_replication_factor
            if wanted > live:
                log.warning("creating %s with replication factor %d: only %d broker(s) are live (configured %d)",
                            REMOTE_LOG_METADATA_TOPIC, live, live, wanted)  # fmt: skip
            configs = {
                "cleanup.policy": "delete",
                "retention.ms": str(self.config.metadata_topic_retention_ms),
                "remote.storage.enable": "false",
            }
            await self._create_topic(
                REMOTE_LOG_METADATA_TOPIC, self.config.metadata_topic_partitions, max(1, min(wanted, live)), configs
            )
            log.info(
                "created %s with %d partition(s)", REMOTE_LOG_METADATA_TOPIC, self.config.metadata_topic_partitions
            )
        except MetadataError as exc:  # TOPIC_ALREADY_EXISTS from a racing broker is fine too
            log.info("%s not created here: %s", REMOTE_LOG_METADATA_TOPIC, exc)
        finally:
            self._creating = False

    async def _write(
        self, tip: TopicIdPartition, event: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
    ) -> None:
        """Produce ``event`` (acks=all) to the partition's metadata partition and wait until this
        broker's replica of it has applied it; raises :class:`_WriteFailed`."""
        p = self._metadata_partition_of(tip)
        image = self._image()
        topic = image.topics.get(REMOTE_LOG_METADATA_TOPIC)
        if p is None or topic is None:
            raise _WriteFailed("no __remote_log_metadata topic")
        leader = topic.partitions[p].leader
        batch = encode_batch([ProducerRecord(None, serde.encode(event), self._clock_ms())])
        if leader == self.node_id:
            try:
                info = self._replicas.append_internal(REMOTE_LOG_METADATA_TOPIC, p, batch)
            except Exception as exc:
                raise _WriteFailed(f"append to {REMOTE_LOG_METADATA_TOPIC}-{p}: {exc}") from exc
            code = await self._replicas.wait_for_acks(REMOTE_LOG_METADATA_TOPIC, p, info.last_offset, WRITE_TIMEOUT_MS)
            last = info.last_offset
        else:
            broker = image.brokers.get(leader)
            if broker is None:
                raise _WriteFailed(f"{REMOTE_LOG_METADATA_TOPIC}-{p} has no live leader")
            body = {
                "transactional_id": None, "acks": -1, "timeout_ms": WRITE_TIMEOUT_MS,
                "topic_data": [{"name": REMOTE_LOG_METADATA_TOPIC, "partition_data": [{"index": p, "records": batch}]}],
            }  # fmt: skip
            try:
                response = await self._sender.request(broker.host, broker.port, ApiKey.PRODUCE, PRODUCE_VERSION, body)
            except Exception as exc:
                raise _WriteFailed(f"produce to broker {leader}: {exc}") from exc
            part = response.responses[0].partition_responses[0]
            code, last = part.error_code, part.base_offset
        if code != ErrorCode.NONE:
            raise _WriteFailed(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: error {code}")
        deadline = asyncio.get_running_loop().time() + WRITE_TIMEOUT_MS / 1000
        while True:  # our own replica applies it, as every broker's does (module docstring)
            self.follow()
            state = self._followed.get(p)
            if state is not None and state.next_offset > last:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise _WriteFailed(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: offset {last} not replicated here in time")
            await asyncio.sleep(0.05)

    async def _copy(self, hosted: Partition, tip: TopicIdPartition) -> None:
        target = hosted.log
        for _ in range(COPIES_PER_TASK):
            cache = self.cache(tip)
            if cache is None or not hosted.is_leader or target.closed:
                return
            segments = target.segments
            facts = [LocalSegment(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms) for s in segments]
            todo = segments_to_copy(
                facts,
                highest_copied_offset=cache.highest_copied_offset(),
                last_stable_offset=hosted.last_stable_offset(),
            )
            if not todo:
                return
            seg = next(s for s in segments if s.base_offset == todo[0].base_offset)
            end = seg.next_offset - 1
            entries = [(e.epoch, e.start_offset) for e in hosted.epochs.entries]
            epochs = segment_leader_epochs(entries, seg.base_offset, end) or {hosted.leader_epoch: seg.base_offset}
            now = self._clock_ms()
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId.generate(tip), seg.base_offset, end, seg.max_timestamp_ms, self.node_id, now,
                seg.size_bytes, epochs,
            )  # fmt: skip
            await self._write(tip, md)
            snapshot = target.producer_state.snapshot_path(seg.next_offset)
            txn = seg.txn_index.path
            data = LogSegmentData(
                log_segment=seg.log_path, offset_index=seg.offset_index.path, time_index=seg.time_index.path,
                transaction_index=txn, producer_snapshot_index=snapshot,
                leader_epoch_index=epoch_checkpoint(entries, end),
            )  # fmt: skip
            await asyncio.to_thread(self._copy_files, md, data)
            await self._write(tip, RemoteLogSegmentMetadataUpdate(
                md.segment_id, self._clock_ms(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, self.node_id
            ))  # fmt: skip
            log.info(
                "%s-%d: segment [%d, %d] copied to the remote tier", tip.topic, tip.partition, md.start_offset, end
            )

    def _copy_files(self, md: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """Worker thread: the RSM copy; a missing transaction index is left out (KIP-405: it is
        optional) and a missing producer snapshot is shipped empty."""
        with tempfile.TemporaryDirectory(prefix="pylog-rsm-") as tmp:
            snapshot = data.producer_snapshot_index
            if not snapshot.exists():
                snapshot = Path(tmp) / "empty.snapshot"
                snapshot.write_bytes(b"")
            txn = data.transaction_index
            if txn is not None and not txn.exists():
                txn = None
            self.rsm.copy_log_segment_data(md, replace(data, producer_snapshot_index=snapshot, transaction_index=txn))

    async def _remote_retention(self, hosted: Partition, tip: TopicIdPartition) -> None:
        cache = self.cache(tip)
        if cache is None:
            return
        target = hosted.log
        config = target.config
        highest = cache.highest_copied_offset()
        untiered = sum(s.size_bytes for s in target.segments if s.base_offset > highest)
        doomed = cache.retention_candidates(
            now_ms=self._clock_ms(), retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
            local_log_bytes=untiered, log_start_offset=-1,
        )  # fmt: skip
        # the copies of this task finished (or failed) before it got here: every segment still in
        # COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED was left by a crash or a failed call
        orphans = cache.orphaned_copies()
        removed_to = -1
        for md in [*orphans, *doomed]:
            if not hosted.is_leader:
                return
            if md.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                await self._write(tip, RemoteLogSegmentMetadataUpdate(
                    md.segment_id, self._clock_ms(), RemoteLogSegmentState.DELETE_SEGMENT_STARTED, self.node_id
                ))  # fmt: skip
            await asyncio.to_thread(self.rsm.delete_log_segment_data, md)
            await self._write(tip, RemoteLogSegmentMetadataUpdate(
                md.segment_id, self._clock_ms(), RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, self.node_id
            ))  # fmt: skip
            if md in doomed:
                removed_to = max(removed_to, md.end_offset + 1)
                log.info("%s-%d: remote segment [%d, %d] deleted by retention", tip.topic, tip.partition,
                         md.start_offset, md.end_offset)  # fmt: skip
        if removed_to > target.log_start_offset:  # the local log follows the log start offset
            target.delete_records_before(min(removed_to, hosted.high_watermark), hosted.high_watermark)

    def _local_retention(self, hosted: Partition, tip: TopicIdPartition) -> None:
        cache = self.cache(tip)
        target = hosted.log
        if cache is None or target.closed:
            return
        config = target.config
        try:
            ms, size = effective_local_retention(
                config.local_retention_ms, config.local_retention_bytes, config.retention_ms, config.retention_bytes
            )
        except InvalidLocalRetention as exc:
            self._warn_once(hosted, str(exc))
            return
        facts = [LocalSegment(s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms) for s in target.segments]
        doomed = local_segments_to_delete(
            facts, highest_copied_offset=cache.highest_copied_offset(), now_ms=self._clock_ms(),
            local_retention_ms=ms, local_retention_bytes=size,
        )  # fmt: skip
        if not doomed:
            return
        new_start = doomed[-1].next_offset
        if new_start <= hosted.high_watermark and new_start > target.log_start_offset:
            target.delete_records_before(new_start, hosted.high_watermark)
            log.info("%s-%d: local log start offset %d (segments below are in the remote tier)",
                     tip.topic, tip.partition, new_start)  # fmt: skip


class _WriteFailed(Exception):
    """A ``__remote_log_metadata`` write did not complete; the task tries again next round."""
