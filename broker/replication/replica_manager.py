"""Where produce and fetch meet the logs: leadership checks, appends, reads, and fetch waiting.

With replication factor 1 (until the replication issue) the leader's log end offset is its high
watermark: an acknowledged append is committed, for acks=1 and acks=all alike. Reads for
consumers stop at the high watermark (read_uncommitted) or the last stable offset (read_committed:
the first offset of the partition's earliest ongoing transaction, at least the log start offset and
at most the high watermark; KIP-98),
and read_committed reads also get the aborted transactions overlapping what they return.

Transaction markers: ``append_control_marker`` writes a COMMIT/ABORT control batch for the
transaction coordinator (local, or through WriteTxnMarkers), which moves the LSO, wakes waiting
fetches and tells the marker listeners (the group coordinator materializes transactional offset
commits on ``__consumer_offsets`` with it).

Fetch long-poll (Kafka's DelayedFetch): ``wait_for_data`` parks a fetch until any of its
partitions gets an append, or its ``max_wait_ms`` passes; ``append`` wakes the waiters of its
partition. Waiting is bounded by the client's own max wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.controller.image import MetadataImage
from broker.log.config import LogConfig
from broker.log.errors import LogError
from broker.log.file_slice import FileSlice
from broker.log.log import Log, LogAppendInfo
from broker.log.manager import LogManager
from broker.log.txn_index import AbortedTxn
from broker.log.validate import AppendOrigin

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MarkerListener = Callable[[str, int, int, bool], None]

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


class PartitionError(Exception):
    """A request for a partition this broker cannot serve; ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: FileSlice
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed only


class ReplicaManager:
    """Serves the partitions this broker leads, from the ``LogManager``'s logs."""

    def __init__(
        self,
        node_id: int,
        logs: LogManager,
        image: Callable[[], MetadataImage],
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        self._node_id = node_id
        self._logs = logs
        self._image = image
        self._topic_config = topic_config
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._marker_listeners: list[MarkerListener] = []

    # -- leadership ----------------------------------------------------------------------------
    def leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Log:
        """The log of a partition this broker leads; raises PartitionError otherwise."""
        topic_image = self._image().topics.get(topic)
        if topic_image is None or partition not in topic_image.partitions:
            raise PartitionError(UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
        part = topic_image.partitions[partition]
        if part.leader != self._node_id:
            raise PartitionError(NOT_LEADER_OR_FOLLOWER, f"broker {self._node_id} does not lead {topic}-{partition}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < part.leader_epoch:
                raise PartitionError(FENCED_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is old")
            if current_leader_epoch > part.leader_epoch:
                raise PartitionError(UNKNOWN_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is unknown")
        existing = self._logs.get_log(topic, partition)
        if existing is not None:
            return existing
        return self._logs.get_or_create_log(topic, partition, self._topic_config(topic))

    def on_image_change(self, old: MetadataImage | None, new: MetadataImage) -> None:
        """Delete the logs of topics that were deleted (or re-created); create logs for
        partitions led here.

        At start-up (``old`` None) logs on disk whose topic is unknown are kept and reported,
        never deleted: a lost metadata file must not cost data.
        """
        if old is not None:
            for name, topic in old.topics.items():
                current = new.topics.get(name)
                if current is None or current.topic_id != topic.topic_id:
                    for partition in topic.partitions:
                        log.info("deleting log of %s-%s: its topic was deleted", name, partition)
                        self._logs.delete_log(name, partition)
                        self._wake((name, partition))
        for topic in new.topics.values():
            for part in topic.partitions.values():
                if part.leader == self._node_id and self._logs.get_log(topic.name, part.partition) is None:
                    self._logs.get_or_create_log(topic.name, part.partition, self._topic_config(topic.name))
        if old is None:
            for existing in self._logs.logs():
                if existing.topic not in new.topics:
                    log.warning("log %s has no topic in the cluster metadata; keeping it", existing.name)

    # -- produce -------------------------------------------------------------------------------
    def append(self, topic: str, partition: int, records: bytes | memoryview) -> LogAppendInfo:
        """Validate and append one partition's batches; raises PartitionError or LogError. A
        duplicate of an idempotent producer's batch is answered with its original offsets and
        not written (``info.batches`` is empty then)."""
        target = self.leader_log(topic, partition)
        info = target.append(records, origin=AppendOrigin.CLIENT)
        if info.batches:
            self._wake((topic, partition))
        return info

    # -- transaction markers -----------------------------------------------------------------
    def append_control_marker(
        self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> int:
        """Write one COMMIT (``commit``) or ABORT marker for ``producer_id`` to a partition led
        here, ending its ongoing transaction there (an aborted one is indexed in ``.txnindex``);
        advance the LSO, wake waiting fetches, call the marker listeners; return the marker's
        offset. A marker for a producer without an ongoing transaction is written too.

        Raises PartitionError: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH (older than the producer's epoch here),
        TRANSACTION_COORDINATOR_FENCED (older coordinator epoch), KAFKA_STORAGE_ERROR."""
        try:
            target = self.leader_log(topic, partition)
            leader_epoch = self._image().topics[topic].partitions[partition].leader_epoch
            offset = target.append_control_marker(
                producer_id, producer_epoch, coordinator_epoch, commit=commit, leader_epoch=leader_epoch
            )
        except LogError as exc:
            raise PartitionError(exc.code, str(exc)) from exc
        self._wake((topic, partition))
        for listener in list(self._marker_listeners):
            try:
                listener(topic, partition, producer_id, commit)
            except Exception:
                log.exception("marker listener failed for %s-%s (producer %s)", topic, partition, producer_id)
        return offset

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Call ``listener(topic, partition, producer_id, commit)`` after every marker appended
        through ``append_control_marker``."""
        self._marker_listeners.append(listener)

    # -- fetch ---------------------------------------------------------------------------------
    def high_watermark(self, target: Log) -> int:
        return target.log_end_offset

    def last_stable_offset(self, target: Log) -> int:
        """The first offset of the earliest ongoing transaction (at least the log start offset: a
        hanging transaction whose start was deleted; Kafka clamps it so), at most the high
        watermark."""
        hw = self.high_watermark(target)
        first_unstable = target.first_unstable_offset()
        return hw if first_unstable is None or first_unstable > hw else first_unstable

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, *, read_committed: bool,
        current_leader_epoch: int = -1, min_one_batch: bool = True,
    ) -> ReadResult:  # fmt: skip
        """Whole batches from ``offset`` up to the high watermark, or for ``read_committed`` up to
        the LSO with the aborted transactions overlapping them; raises PartitionError or
        OffsetOutOfRangeError."""
        target = self.leader_log(topic, partition, current_leader_epoch)
        hw = self.high_watermark(target)
        lso = self.last_stable_offset(target)
        if not read_committed:
            records = target.read(offset, max_bytes, hw, min_one_batch=min_one_batch)
            return ReadResult(records, hw, lso, target.log_start_offset)
        records = target.read(offset, max_bytes, lso, min_one_batch=min_one_batch)
        aborted = target.collect_aborted_transactions(offset, records.next_offset) if records.size else []
        return ReadResult(records, hw, lso, target.log_start_offset, aborted)

    async def wait_for_data(self, partitions: Iterable[TopicPartition], max_wait_ms: int) -> None:
        """Return when any of ``partitions`` gets an append (or its topic goes), or after the wait."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
        try:
            await asyncio.wait_for(waiter, max_wait_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[key]

    def _wake(self, key: TopicPartition) -> None:
        for waiter in self._waiters.pop(key, ()):
            if not waiter.done():
                waiter.set_result(None)
