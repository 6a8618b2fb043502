"""Where produce and fetch meet the replicas: roles from the metadata, appends, reads, waiting.

Kafka documentation §4.7 "Replication" and the producer's ``acks`` setting made concrete for the
partitions this broker hosts (one ``Partition`` each, ``broker.replication.partition``):

* **Roles come from the metadata log** (``on_image_change``): a partition whose leader is this
  broker is led here; one that lists this broker among its replicas under another leader is
  followed (the ``ReplicaFetchers`` fetch it from that leader). No side channel moves leadership.
* **Produce** (``append_records``, Kafka's ``ReplicaManager.appendRecords``) owns the acks: it
  appends each partition's batches to the leader's log with its leader epoch stamped, waits once
  for the fsync ``flush.messages`` started, and for acks=all parks a ``DelayedProduce`` until the
  high watermark covers every append (or the request's timeout passes). acks=all is refused up
  front with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``, and
  answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank meanwhile (``_acks_status``, the one
  place acks=all is judged). ``append``, ``append_internal`` and ``append_control_marker`` are
  the coordinators' appends; ``wait_for_acks`` waits for one of them through the same
  ``DelayedProduce``.
* **Consumer reads** (``read``) stop at the high watermark (read_uncommitted) or the last stable
  offset (read_committed, with the aborted transactions overlapping what they return; KIP-98).
* **Follower reads** (``read_for_follower``) record the follower's fetch offset as its log end
  offset, move the high watermark and the ISR (``broker.replication.isr``), answer a follower whose
  last fetched epoch diverges from this log with the epoch and end offset to truncate to, and
  otherwise return batches up to the log end.
* **ISR changes** are asked of the active controller with AlterPartition (``alter_isr``, KIP-497):
  a follower that caught up joins, one lagging for ``replica.lag.time.max.ms`` leaves
  (``check_isr``, run every half of that). One request per partition is in flight at a time.
* **Long-poll** (Kafka's DelayedFetch): ``wait_for_data`` parks a fetch until its partitions get
  an append (followers) or a high-watermark move (consumers), or its ``max_wait_ms`` passes.
* **DeleteRecords** (``delete_records``, ``wait_for_low_watermark``): the leader raises its log
  start offset, followers follow from the fetch responses, and the request waits until every
  live replica's log start reached the offset (``broker.replication.delete_records``; Kafka's
  DelayedDeleteRecords).
* **One waiting mechanism** for the three: a ``DelayedOperationPurgatory`` per operation type
  (``broker.replication.purgatory``), keyed by topic-partition. Every ``Partition`` calls its
  listener after it moved (high watermark, log end or start offset, role, ISR), and the listener
  re-checks the operations watched under that partition (Kafka's
  ``Partition.tryCompleteDelayedRequests``); no code path has to remember whom to wake. This
  module is the asyncio driver of that pure mechanism: it owns the futures and the timers.
* **High watermarks survive restarts** in ``replication-offset-checkpoint`` per log dir, written
  off the event loop every ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from broker import state_change
from broker.clock import monotonic_ms
from broker.controller.partition_changes import IsrChange
from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.config import LogConfig
from broker.log.errors import LogError, OffsetOutOfRangeError
from broker.log.file_slice import FileSlice
from broker.log.log import Log, LogAppendInfo
from broker.log.manager import LogManager
from broker.log.txn_index import AbortedTxn
from broker.log.validate import AppendOrigin
from broker.metadata.image import MetadataImage
from broker.replication.delete_records import low_watermark, resolve_offset
from broker.replication.leader_epoch import diverging_epoch
from broker.replication.partition import Partition, PartitionError
from broker.replication.purgatory import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedOperation,
    DelayedOperationPurgatory,
    DelayedProduce,
)
from broker.replication.replica_state import ISR_REFUSED
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MarkerListener = Callable[[str, int, int, bool], None]
AlterIsr = Callable[[Sequence[IsrChange]], Awaitable[dict[tuple[uuid.UUID, int], int]]]
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
__all__ = ["ISR_REFUSED", "AppendResult", "PartitionError", "ReadResult", "ReplicaManager", "ReplicationConfig"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """Kafka's ``replica.*`` broker settings (``from_properties`` reads them by name)."""

    lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes (per partition)
    fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    num_fetchers: int = 1  # num.replica.fetchers
    hw_checkpoint_interval_ms: int = 5000  # replica.high.watermark.checkpoint.interval.ms

    @classmethod
    def from_properties(cls, get: Callable[[str, object], object]) -> ReplicationConfig:
        def num(key: str, default: int) -> int:
            return int(str(get(key, default)))

        return cls(
            lag_time_max_ms=num("replica.lag.time.max.ms", 30_000),
            fetch_max_bytes=num("replica.fetch.max.bytes", 1_048_576),
            fetch_response_max_bytes=num("replica.fetch.response.max.bytes", 10_485_760),
            fetch_min_bytes=num("replica.fetch.min.bytes", 1),
            fetch_wait_max_ms=num("replica.fetch.wait.max.ms", 500),
            fetch_backoff_ms=num("replica.fetch.backoff.ms", 1000),
            socket_timeout_ms=num("replica.socket.timeout.ms", 30_000),
            num_fetchers=max(1, num("num.replica.fetchers", 1)),
            hw_checkpoint_interval_ms=num("replica.high.watermark.checkpoint.interval.ms", 5000),
        )


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: FileSlice
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed only
    diverging_epoch: tuple[int, int] | None = None  # follower reads: (epoch, end offset) to truncate to


class AppendResult:
    """One partition's outcome of ``append_records`` (Kafka's ``LogAppendResult``): the append
    (None when it failed) and the error code to answer, with its message and, for INVALID_RECORD,
    the records at fault (KIP-467)."""

    __slots__ = ("error_code", "error_message", "info", "partition", "record_errors", "topic")

    def __init__(
        self, topic: str, partition: int, info: LogAppendInfo | None, error_code: int = ErrorCode.NONE,
        error_message: str | None = None, *, record_errors: Sequence[tuple[int, str]] = (),
    ) -> None:  # fmt: skip
        self.topic = topic
        self.partition = partition
        self.info = info
        self.error_code = error_code
        self.error_message = error_message
        self.record_errors = record_errors

    def __repr__(self) -> str:
        return f"AppendResult({self.topic}-{self.partition}, code={self.error_code}, info={self.info})"


ACKS_MESSAGES: dict[int, str] = {
    ErrorCode.REQUEST_TIMED_OUT: "the in-sync replicas did not all acknowledge within the request's timeout",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "written, but the ISR shrank below min.insync.replicas",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "leadership moved before the in-sync replicas acknowledged",
}


class ReplicaManager:
    """The partitions this broker hosts, led or followed (module docstring)."""

    def __init__(
        self,
        node_id: int,
        logs: LogManager,
        image: Callable[[], MetadataImage],
        topic_config: Callable[[str], LogConfig],
        *,
        clock_ms: Callable[[], int] | None = None,
        config: ReplicationConfig | None = None,
        alter_isr: AlterIsr | None = None,
    ) -> None:
        self._node_id = node_id
        self._logs = logs
        self._image = image
        self._topic_config = topic_config
        self._clock_ms = clock_ms or monotonic_ms
        self.config = config or ReplicationConfig()
        self._alter_isr = alter_isr
        self._partitions: dict[TopicPartition, Partition] = {}
        # Kafka's delayedProducePurgatory / delayedFetchPurgatory / delayedDeleteRecordsPurgatory
        self.delayed_produce: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("Produce")
        self.delayed_fetch: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("Fetch")
        self.delayed_delete_records: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory(
            "DeleteRecords"
        )
        self._marker_listeners: list[MarkerListener] = []
        self._hw_hints: dict[TopicPartition, int] = {}
        for directory in logs.log_dirs:
            self._hw_hints.update(read_checkpoint(directory / HIGH_WATERMARK_CHECKPOINT))
        self.follower_listener: Callable[[], None] | None = None  # the fetchers re-plan on role changes
        # False while a KRaft broker replays the metadata log at start-up: the image may still show
        # leaderships it lost long ago, so it leads nothing until it has caught up (set by the server)
        self.serving = True
        self.isr_shrinks = 0
        self.isr_expands = 0

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def clock_ms(self) -> Callable[[], int]:
        return self._clock_ms

    # -- partitions and roles ----------------------------------------------------------------------
    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def _hosted(self, topic: str, partition: int) -> Partition:
        key = (topic, partition)
        hosted = self._partitions.get(key)
        if hosted is None or hosted.log.closed:
            target = self._logs.get_log(topic, partition) or self._logs.get_or_create_log(
                topic, partition, self._topic_config(topic)
            )
            replaced = hosted
            hosted = self._partitions[key] = Partition(
                self._node_id, topic, partition, target, self._hw_hints.pop(key, 0)
            )
            hosted.listener = lambda: self._try_complete_delayed(key)
            if replaced is not None:
                self._stopped(replaced, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return hosted

    def _try_complete_delayed(self, key: TopicPartition) -> None:
        """A partition moved: re-check what waits on it (Kafka's ``Partition.tryCompleteDelayedRequests``)."""
        self.delayed_produce.check_and_complete(key)
        self.delayed_fetch.check_and_complete(key)
        self.delayed_delete_records.check_and_complete(key)

    def _stopped(self, hosted: Partition, code: int) -> None:
        """This broker stopped hosting ``hosted``: what waits on it answers ``code``."""
        hosted.stopped_code = code
        hosted.listener = None
        self._try_complete_delayed((hosted.topic, hosted.partition))

    def on_image_change(self, old: MetadataImage | None, new: MetadataImage) -> None:
        """Follow the metadata: delete logs of deleted topics, lead or follow every partition that
        names this broker a replica (creating its log), and tell the fetchers.

        At start-up (``old`` None) logs on disk whose topic is unknown are kept and reported,
        never deleted: a lost metadata file must not cost data."""
        if old is not None:
            for name, topic in old.topics.items():
                current = new.topics.get(name)
                if current is None or current.topic_id != topic.topic_id:
                    for partition in topic.partitions:
                        log.info("deleting log of %s-%s: its topic was deleted", name, partition)
                        gone = self._partitions.pop((name, partition), None)
                        self._logs.delete_log(name, partition)
                        if gone is not None:
                            self._stopped(gone, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        now = self._clock_ms()
        followers_changed = False
        for topic in new.topics.values():
            for part in topic.partitions.values():
                before = old.topics.get(topic.name) if old is not None else None
                previous = before.partitions.get(part.partition) if before is not None else None
                if previous == part and (topic.name, part.partition) in self._partitions:
                    continue
                if previous != part and (part.leader == self._node_id or self._node_id in part.replicas):
                    state_change.broker_applied(self._node_id, topic.name, part, previous)
                if part.leader == self._node_id:
                    hosted = self._hosted(topic.name, part.partition)
                    if hosted.become_leader(part, now, record_epoch=self.serving):
                        followers_changed = True
                elif self._node_id in part.replicas:
                    hosted = self._hosted(topic.name, part.partition)
                    if hosted.become_follower(part):
                        followers_changed = True
                elif (topic.name, part.partition) in self._partitions:
                    self._stop_replica(topic.name, part.partition)
                    followers_changed = True
        if old is None and new.epoch > 0:  # a KRaft node starts from an empty image: nothing to judge yet
            for existing in self._logs.logs():
                if existing.topic not in new.topics:
                    log.warning("log %s has no topic in the cluster metadata; keeping it", existing.name)
        brokers_moved = old is None or old.brokers != new.brokers
        if (followers_changed or brokers_moved) and self.follower_listener is not None:
            self.follower_listener()

    def start_serving(self) -> None:
        """The broker caught up with the metadata and serves: the leaderships it holds now are
        real, and their epochs go into the epoch caches (``Partition.become_leader``)."""
        self.serving = True
        for hosted in self._partitions.values():
            if hosted.is_leader:
                hosted.record_leader_epoch()

    def _stop_replica(self, topic: str, partition: int) -> None:
        """This broker left the partition's replicas (KIP-455 reassignment): stop hosting it and,
        once caught up with the metadata (``serving``), delete its log. While replaying the metadata
        log at start-up the log is kept: a later entry may make this broker a replica again, and a
        whole-cluster restart must not delete what the final replicas hold."""
        gone = self._partitions.pop((topic, partition))
        if self.serving:
            log.info("deleting log of %s-%s: this broker is no longer one of its replicas", topic, partition)
            self._logs.delete_log(topic, partition)
        self._stopped(gone, ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def _leader(
        self, topic: str, partition: int, current_leader_epoch: int = -1, *, loading: bool = False
    ) -> Partition:
        """The partition if this broker leads it (at ``current_leader_epoch`` when given). Only a
        coordinator ``loading`` its state may use it before the broker serves."""
        topic_image = self._image().topics.get(topic)
        if topic_image is None or partition not in topic_image.partitions:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
        hosted = self._partitions.get((topic, partition))
        if hosted is None or not hosted.is_leader or not (self.serving or loading):
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self._node_id} does not lead {topic}-{partition}"
            )
        if current_leader_epoch >= 0:
            if current_leader_epoch < hosted.leader_epoch:
                raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is old")
            if current_leader_epoch > hosted.leader_epoch:
                raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is unknown")
        return hosted

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        return self._leader(topic, partition, current_leader_epoch)

    def leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1, *, loading: bool = False) -> Log:
        """The log of a partition this broker leads; raises PartitionError otherwise (``loading``:
        a coordinator reading its state topic, allowed while the broker catches up)."""
        return self._leader(topic, partition, current_leader_epoch, loading=loading).log

    # -- produce -----------------------------------------------------------------------------------
    def append_records(
        self, entries: Iterable[tuple[str, int, Any]], *, acks: int, timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> list[AppendResult] | Coroutine[Any, Any, list[AppendResult]]:  # fmt: skip
        """Append each ``(topic, partition, records)`` as its leader and answer per partition with
        the acks semantics of Kafka's ``ReplicaManager.appendRecords`` (Kafka documentation §4.7
        "Replication"; ``acks`` is -1, 0 or 1, checked by the caller):

        * acks=0 and acks=1 answer after the leader's append; acks=-1 (all) is refused before the
          append with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``;
        * an append that reached ``flush.messages`` answers after that fsync (KAFKA_STORAGE_ERROR
          if it fails), the only durability wait (acks=0 does not wait);
        * acks=-1 then waits in a ``DelayedProduce`` until the high watermark passed every append,
          at most ``timeout_ms``: REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR
          shrank meanwhile; the records stay) or NOT_LEADER_OR_FOLLOWER otherwise.

        Returns the results in entry order, or, when something must be waited for, a coroutine
        returning them. Empty or missing records answer INVALID_RECORD; a duplicate of an
        idempotent producer's batch answers its original offsets (``info.batches`` empty)."""
        results: list[AppendResult] = []
        durable: list[tuple[AppendResult, asyncio.Future[None]]] = []
        delayed: list[tuple[AppendResult, Partition, int]] = []
        for topic, partition, records in entries:
            if records is None or len(records) == 0:
                results.append(AppendResult(topic, partition, None, ErrorCode.INVALID_RECORD,
                                            "the request carries no records for this partition"))  # fmt: skip
                continue
            try:
                hosted = self._leader(topic, partition)
                info = self._append_to_leader(hosted, records, acks, origin)
            except PartitionError as exc:
                results.append(AppendResult(topic, partition, None, exc.code, str(exc)))
                continue
            except LogError as exc:
                errors = getattr(exc, "record_errors", ())
                results.append(AppendResult(topic, partition, None, exc.code, str(exc), record_errors=errors))
                continue
            result = AppendResult(topic, partition, info)
            results.append(result)
            if acks == 0:
                continue
            if info.batches:
                flushing = hosted.log.flusher.wait_durable(info.last_offset + 1)
                if flushing is not None:
                    durable.append((result, flushing))
            if acks == -1 and hosted.high_watermark <= info.last_offset:
                delayed.append((result, hosted, info.last_offset + 1))
        if not durable and not delayed:
            return results
        return self._complete_appends(results, durable, delayed, timeout_ms)

    async def _complete_appends(
        self, results: list[AppendResult], durable: list[tuple[AppendResult, asyncio.Future[None]]],
        delayed: list[tuple[AppendResult, Partition, int]], timeout_ms: int,
    ) -> list[AppendResult]:  # fmt: skip
        for result, flushing in durable:
            try:
                await flushing
            except LogError as exc:
                result.error_code, result.error_message = exc.code, str(exc)
        delayed = [d for d in delayed if d[0].error_code == ErrorCode.NONE]
        if delayed:
            codes = await self._delay_produce([(hosted, required) for _, hosted, required in delayed], timeout_ms)
            for (result, _, _), code in zip(delayed, codes, strict=True):
                if code:
                    result.error_code = code
                    result.error_message = ACKS_MESSAGES.get(code, "the ISR did not acknowledge")
        return results

    def append(
        self, topic: str, partition: int, records: bytes | memoryview, *, acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:  # fmt: skip
        """One partition's append as its leader, without waiting (the coordinators' state topics;
        ``append_records`` is the produce path); raises PartitionError or LogError. With
        ``acks=-1`` the ISR must hold ``min.insync.replicas`` first."""
        return self._append_to_leader(self._leader(topic, partition), records, acks, origin)

    def _append_to_leader(
        self, hosted: Partition, records: bytes | memoryview, acks: int, origin: AppendOrigin
    ) -> LogAppendInfo:
        if acks == -1:
            min_isr = hosted.log.config.min_insync_replicas
            code = hosted.state.acks_all_refusal(min_isr)
            if code:
                raise PartitionError(code, f"ISR {list(hosted.isr)} is smaller than min.insync.replicas={min_isr}")
        return hosted.append_as_leader(records, origin)

    @staticmethod
    def _acks_status(hosted: Partition, required_offset: int) -> int | None:
        """acks=all for a ``DelayedProduce`` (``ReplicaState.acks_status``), or the code of the
        partition's removal from this broker."""
        if hosted.stopped_code:
            return hosted.stopped_code
        return hosted.state.acks_status(required_offset, hosted.log.config.min_insync_replicas)

    async def _delay_produce(self, waits: Sequence[tuple[Partition, int]], timeout_ms: int) -> list[int]:
        """Kafka's DelayedProduce over ``(partition, required offset)`` pairs: their codes."""
        future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        by_key = {(h.topic, h.partition): h for h, _ in waits}
        entries = [((h.topic, h.partition), required) for h, required in waits]
        operation = DelayedProduce(
            entries, lambda key, required: self._acks_status(by_key[key], required), _setter(future)
        )
        return await _delay(self.delayed_produce, operation, by_key, timeout_ms, future)

    def acknowledged(self, topic: str, partition: int, last_offset: int) -> bool:
        """Whether an append is already below the high watermark (a leader alone in its ISR):
        acks=all can then answer without waiting."""
        hosted = self._partitions.get((topic, partition))
        return hosted is not None and hosted.high_watermark > last_offset

    async def wait_for_acks(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> int:
        """A coordinator's append with acks=all (offset commits, markers): wait for the fsync its
        append started (``flush.messages``), then in a ``DelayedProduce`` until the high watermark
        passes ``last_offset``; the error code to answer (NONE, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR)."""
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        durable = hosted.log.flusher.wait_durable(last_offset + 1)
        if durable is not None:
            try:
                await durable
            except LogError as exc:
                return exc.code
        (code,) = await self._delay_produce([(hosted, last_offset + 1)], timeout_ms)
        return code

    def append_internal(self, topic: str, partition: int, records: bytes) -> LogAppendInfo:
        """An append of the group or transaction coordinator to its state topic (as its leader)."""
        return self.append(topic, partition, records, origin=AppendOrigin.COORDINATOR)

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
            target = self._leader(topic, partition)
            offset = target.append_control_marker(producer_id, producer_epoch, coordinator_epoch, commit=commit)
        except LogError as exc:
            raise PartitionError(exc.code, str(exc)) from exc
        for listener in list(self._marker_listeners):
            try:
                listener(topic, partition, producer_id, commit)
            except Exception:
                log.exception("marker listener failed for %s-%s (producer %s)", topic, partition, producer_id)
        return offset

    def marker_replicated(self, topic: str, partition: int, offset: int) -> bool:
        """Whether a marker written at ``offset`` is below the high watermark (committed)."""
        return self.acknowledged(topic, partition, offset)

    async def wait_replicated(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        """Wait until the record at ``offset`` is committed (Kafka writes markers with acks=all);
        the error code (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER)."""
        code = await self.wait_for_acks(topic, partition, offset, timeout_ms)
        return ErrorCode.NONE if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND else code

    def add_marker_listener(self, listener: MarkerListener) -> None:
        """Call ``listener(topic, partition, producer_id, commit)`` after every marker appended
        through ``append_control_marker``."""
        self._marker_listeners.append(listener)

    # -- DeleteRecords ----------------------------------------------------------------------------
    def delete_records(self, topic: str, partition: int, requested_offset: int) -> int:
        """Raise the log start offset of a partition led here to ``requested_offset`` (-1: the high
        watermark) and delete the segments wholly below it; returns the offset deleted before
        (``broker.replication.delete_records``). Raises PartitionError: UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, INVALID_TOPIC_EXCEPTION (an internal topic), POLICY_VIOLATION
        (``cleanup.policy`` without ``delete``), OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR."""
        if topic.startswith("__"):
            raise PartitionError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot delete records of internal topic {topic}")
        hosted = self._leader(topic, partition)
        if not hosted.log.config.delete_enabled:
            raise PartitionError(
                ErrorCode.POLICY_VIOLATION, f"records of {topic}-{partition} cannot be deleted: cleanup.policy=compact"
            )
        code, offset = resolve_offset(requested_offset, hosted.high_watermark)
        if code:
            raise PartitionError(
                code, f"offset {requested_offset} is outside [0, high watermark {hosted.high_watermark}]"
            )
        try:
            hosted.log.delete_records_before(offset, hosted.high_watermark)
        except LogError as exc:
            raise PartitionError(exc.code, str(exc)) from exc
        except OSError as exc:
            raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition}: {exc}") from exc
        # DelayedDeleteRecords may complete; parked follower fetches answer with the new start
        self._try_complete_delayed((topic, partition))
        return offset

    async def wait_for_low_watermark(self, topic: str, partition: int, offset: int, timeout_ms: int) -> tuple[int, int]:
        """DelayedDeleteRecords: ``(error code, low watermark)`` once every live replica's log
        start offset reached ``offset``; ``(REQUEST_TIMED_OUT, -1)`` after ``timeout_ms``."""
        hosted = self._partitions.get((topic, partition))
        if hosted is None or not hosted.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        future: asyncio.Future[list[tuple[int, int]]] = asyncio.get_running_loop().create_future()
        key = (topic, partition)
        operation = DelayedDeleteRecords(
            [(key, offset)], lambda _, wanted: self._low_status(hosted, wanted), _setter(future)
        )
        (outcome,) = await _delay(self.delayed_delete_records, operation, (key,), timeout_ms, future)
        return outcome

    def _low_status(self, hosted: Partition, offset: int) -> tuple[int, int] | None:
        if hosted.stopped_code:
            return hosted.stopped_code, -1
        if not hosted.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        brokers = self._image().brokers
        low = low_watermark(hosted.log.log_start_offset, hosted.followers, brokers.__contains__)
        return (ErrorCode.NONE, low) if low >= offset else None

    # -- consumer reads ---------------------------------------------------------------------------
    def high_watermark(self, target: Log) -> int:
        hosted = self._partitions.get((target.topic, target.partition))
        return hosted.high_watermark if hosted is not None else target.log_end_offset

    def high_watermark_of(self, topic: str, partition: int) -> int | None:
        """The high watermark of a hosted partition (None: not hosted here): retention and the log
        cleaner never touch records above it."""
        hosted = self._partitions.get((topic, partition))
        return hosted.high_watermark if hosted is not None else None

    def last_stable_offset(self, target: Log) -> int:
        """The first offset of the earliest ongoing transaction (at least the log start offset: a
        hanging transaction whose start was deleted; Kafka clamps it so), at most the high
        watermark."""
        hosted = self._partitions.get((target.topic, target.partition))
        if hosted is None:
            return target.log_end_offset
        return hosted.last_stable_offset()

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, *, read_committed: bool,
        current_leader_epoch: int = -1, min_one_batch: bool = True,
    ) -> ReadResult:  # fmt: skip
        """Whole batches from ``offset`` up to the high watermark, or for ``read_committed`` up to
        the LSO with the aborted transactions overlapping them; raises PartitionError or
        OffsetOutOfRangeError."""
        hosted = self._leader(topic, partition, current_leader_epoch)
        target = hosted.log
        hw = hosted.high_watermark
        lso = hosted.last_stable_offset()
        if not read_committed:
            records = target.read(offset, max_bytes, hw, min_one_batch=min_one_batch)
            return ReadResult(records, hw, lso, target.log_start_offset)
        records = target.read(offset, max_bytes, lso, min_one_batch=min_one_batch)
        aborted = target.segments.collect_aborted_transactions(offset, records.next_offset) if records.size else []
        return ReadResult(records, hw, lso, target.log_start_offset, aborted)

    # -- follower reads ------------------------------------------------------------------------------
    def read_for_follower(
        self, replica_id: int, topic: str, partition: int, fetch_offset: int, max_bytes: int, *,
        current_leader_epoch: int, last_fetched_epoch: int, min_one_batch: bool = True,
        log_start_offset: int = -1, record_position: bool = True,
    ) -> ReadResult:  # fmt: skip
        """A follower's fetch (module docstring); raises PartitionError or OffsetOutOfRangeError.
        ``log_start_offset`` is the follower's (what DeleteRecords waits for). The follower's
        position is recorded once per request (``record_position``): a long-poll's later reads
        of the same request only read, as Kafka's ``DelayedFetch.onComplete`` does; recording
        again would take a position the follower may have lost meanwhile (a parked fetch woken
        after its broker restarted with a shorter log) as its progress, and propose it back
        into the ISR."""
        hosted = self._leader(topic, partition, current_leader_epoch)
        target = hosted.log
        if replica_id not in (hosted.role.replicas if hosted.role else ()):
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {replica_id} is not a replica")
        diverging = diverging_epoch(hosted.epochs, target.log_end_offset, last_fetched_epoch, fetch_offset)
        if diverging is not None:
            empty = FileSlice.empty(fetch_offset)
            return ReadResult(
                empty, hosted.high_watermark, hosted.last_stable_offset(), target.log_start_offset,
                diverging_epoch=diverging,
            )  # fmt: skip
        if fetch_offset > target.log_end_offset or fetch_offset < target.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{target.log_start_offset}, {target.log_end_offset}]"
            )
        if record_position:
            hosted.record_follower_fetch(replica_id, fetch_offset, self._clock_ms(), log_start_offset)
            self._maybe_expand_isr(hosted, replica_id)
        records = target.read(fetch_offset, max_bytes, None, min_one_batch=min_one_batch)
        return ReadResult(records, hosted.high_watermark, hosted.last_stable_offset(), target.log_start_offset)

    # -- ISR changes ---------------------------------------------------------------------------------
    def _maybe_expand_isr(self, hosted: Partition, replica_id: int) -> None:
        new_isr = hosted.state.isr_expansion(replica_id, self._clock_ms())
        if new_isr is not None:
            self._propose_isr(hosted, new_isr, "expand")

    def check_isr(self) -> int:
        """Shrink the ISR of every led partition by its out-of-sync followers, and propose again
        a change whose outcome is unknown (``ReplicaState.isr_check``); returns how many
        AlterPartition proposals were started."""
        now = self._clock_ms()
        started = 0
        for hosted in list(self._partitions.values()):
            proposal = hosted.state.isr_check(now, hosted.log.log_end_offset, self.config.lag_time_max_ms)
            if proposal is None:
                continue
            new_isr, kind = proposal
            if kind == "shrink":
                slow = sorted(set(hosted.isr) - set(new_isr))
                log.warning(
                    "%s-%s: follower(s) %s not caught up for %d ms; removing them from the ISR",
                    hosted.topic, hosted.partition, slow, self.config.lag_time_max_ms,
                )  # fmt: skip
            self._propose_isr(hosted, new_isr, kind)
            started += 1
        return started

    def _propose_isr(self, hosted: Partition, new_isr: tuple[int, ...], kind: str) -> None:
        topic = self._image().topics.get(hosted.topic)
        state = hosted.state
        if self._alter_isr is None or topic is None or state.role is None or not state.may_propose(self._clock_ms()):
            return
        change = IsrChange(topic.topic_id, hosted.partition, state.leader_epoch, new_isr, state.role.partition_epoch)
        state.propose_isr(new_isr)
        task = asyncio.get_running_loop().create_task(self._send_isr_change(hosted, change, kind))
        task.add_done_callback(_log_failure)

    async def _send_isr_change(self, hosted: Partition, change: IsrChange, kind: str) -> None:
        assert self._alter_isr is not None
        try:
            codes = await self._alter_isr([change])
            code = codes.get((change.topic_id, change.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
        except Exception as exc:  # noqa: BLE001 - any failure: the next check proposes again
            code = getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
            log.info("%s-%s: ISR %s not applied: %s", hosted.topic, hosted.partition, kind, exc)
        if code == ErrorCode.NONE:
            if len(change.new_isr) < len(hosted.isr) or kind == "shrink":
                self.isr_shrinks += 1
            else:
                self.isr_expands += 1
            log.info("%s-%s: ISR is now %s", hosted.topic, hosted.partition, list(change.new_isr))
        moved = hosted.state.on_isr_answer(
            change.new_isr, code, self._clock_ms(), self.config.fetch_backoff_ms, hosted.log.log_end_offset
        )
        if moved:
            self._try_complete_delayed((hosted.topic, hosted.partition))

    # -- long-poll -----------------------------------------------------------------------------------
    async def wait_for_data(
        self, partitions: Iterable[TopicPartition], max_wait_ms: int, *, follower: bool = False
    ) -> None:
        """Kafka's DelayedFetch: return when any of ``partitions`` moved since this call — an
        append or a log start move (``follower``), a high-watermark or LSO move (consumers), a
        role change, its topic gone — or after ``max_wait_ms``. The caller reads again."""
        keys = list(partitions)
        position = self._follower_position if follower else self._consumer_position
        seen = [position(key) for key in keys]
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def changed() -> bool:
            return any(position(key) != before for key, before in zip(keys, seen, strict=True))

        done = _setter(future)
        operation = DelayedFetch(changed, lambda: done(None))
        await _delay(self.delayed_fetch, operation, keys, max_wait_ms, future)

    def _follower_position(self, key: TopicPartition) -> tuple[object, ...]:
        hosted = self._partitions.get(key)
        if hosted is None:
            return ()
        target = hosted.log
        return hosted, hosted.role, target.log_end_offset, target.log_start_offset, hosted.high_watermark

    def _consumer_position(self, key: TopicPartition) -> tuple[object, ...]:
        hosted = self._partitions.get(key)
        if hosted is None:
            return ()
        return hosted, hosted.role, hosted.high_watermark, hosted.last_stable_offset(), hosted.log.log_start_offset

    # -- high-watermark checkpoints --------------------------------------------------------------
    def high_watermarks_by_dir(self) -> dict[str, dict[TopicPartition, int]]:
        out: dict[str, dict[TopicPartition, int]] = {str(d): {} for d in self._logs.log_dirs}
        for key, hosted in self._partitions.items():
            if not hosted.log.closed:
                out.setdefault(str(hosted.log.directory.parent), {})[key] = hosted.high_watermark
        return out

    async def run_checkpoint_once(self) -> None:
        """Write every dir's ``replication-offset-checkpoint`` in a worker thread (fsyncs)."""
        snapshot = self.high_watermarks_by_dir()
        await asyncio.to_thread(_write_hw_checkpoints, snapshot)

    def write_checkpoints(self) -> None:
        """At shutdown (the loop is about to stop anyway)."""
        _write_hw_checkpoints(self.high_watermarks_by_dir())

    def shutdown(self) -> None:
        for hosted in list(self._partitions.values()):
            self._stopped(hosted, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        for purgatory in (self.delayed_produce, self.delayed_fetch, self.delayed_delete_records):
            purgatory.expire_all()


def _write_hw_checkpoints(by_dir: dict[str, dict[TopicPartition, int]]) -> None:
    for directory, offsets in by_dir.items():
        write_checkpoint(Path(directory) / HIGH_WATERMARK_CHECKPOINT, offsets)


def _setter(future: asyncio.Future[T]) -> Callable[[T], None]:
    def complete(result: T) -> None:
        if not future.done():
            future.set_result(result)

    return complete


async def _delay(
    purgatory: DelayedOperationPurgatory[TopicPartition], operation: DelayedOperation,
    keys: Iterable[TopicPartition], timeout_ms: int, future: asyncio.Future[T],
) -> T:  # fmt: skip
    """The asyncio side of a delayed operation: check it, watch it, expire it after ``timeout_ms``
    (Kafka's ``tryCompleteElseWatch`` and its timer), and stop watching it however it ends."""
    keys = list(keys)
    if not purgatory.try_complete_else_watch(operation, keys):
        timer = asyncio.get_running_loop().call_later(max(timeout_ms, 0) / 1000, operation.expire)
        try:
            await future
        finally:
            timer.cancel()
            purgatory.unwatch(operation, keys)
    return future.result()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("ISR change task failed", exc_info=task.exception())
