"""Writing a transaction's COMMIT/ABORT markers to every partition in it (Kafka documentation §4.6 "Message
Delivery Semantics": control messages let clients tell committed from aborted data; Kafka
``TransactionMarkerChannelManager``).

A ``MarkerJob`` holds the partitions still without their marker. ``TxnMarkerChannel.add`` tries
every partition at once: a partition led here gets its marker through
``ReplicaManager.append_control_marker`` (synchronously), one led by another broker through a
WriteTxnMarkers request (``sender.BrokerSender``, asynchronously). The job's ``on_done`` runs once
no partition is left, and the coordinator then persists CompleteCommit/CompleteAbort.

Per partition, as Kafka's ``TransactionMarkerRequestCompletionHandler``: success removes it;
UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION remove it too (its producer could not have
written there); INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED abandon the whole job (a
newer producer epoch or coordinator owns the transaction now; the job's ``on_abandon`` is told);
every other error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, a partition without a
leader, storage or network errors, ...) keeps it for ``retry``. A partition the metadata no longer
has at all is dropped (its topic was deleted; Kafka skips partitions without a leader endpoint).
Retries back off exponentially per job (``retry_backoff_ms`` doubling up to
``retry_backoff_max_ms``); a job that keeps failing is logged at WARNING at most every
``WARNING_INTERVAL_MS``, naming the transactional id, the partitions and their errors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.coordinator.txn.sender import BrokerSender, MarkerRequest
from broker.metadata.image import MetadataImage
from broker.replication.replica_manager import PartitionError
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_DROPPED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})
_ABANDON = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
WARNING_INTERVAL_MS = 30_000
LOCAL_MARKER_TIMEOUT_MS = 30_000
WARN_AFTER_FAILURES = 3  # the first rounds of a leadership move are expected; later ones are not


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


class ControlMarkerAppender(Protocol):
    """What the channel needs of the replica manager (the partition side's contract)."""

    def append_control_marker(
        self,
        topic: str,
        partition: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> int: ...

    def marker_replicated(self, topic: str, partition: int, offset: int) -> bool:
        """Whether the marker at ``offset`` is committed (every ISR member has it)."""

    async def wait_replicated(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        """Wait until it is; the error code (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER)."""


def _ignore_abandon(code: int) -> None:
    pass


@dataclass(eq=False)
class MarkerJob:
    """One transaction's markers still to write."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    pending: set[TopicPartition]
    on_done: Callable[[], None]
    on_abandon: Callable[[int], None] = _ignore_abandon  # told the error that abandoned the job
    in_flight: set[TopicPartition] = field(default_factory=set)
    closed: bool = False  # done or abandoned: later results are ignored
    failures: int = 0  # rounds in a row that left a partition to retry
    next_attempt_ms: int = 0  # when ``retry`` may drive the job again
    last_warning_ms: int | None = None

    @property
    def retriable(self) -> set[TopicPartition]:
        """The partitions ``retry`` would try: without their marker and not in flight."""
        return self.pending - self.in_flight


class TxnMarkerChannel:
    """See the module docstring. Lives on the broker's event loop; no locks. ``on_reschedule`` is
    called when an answer from another broker changed ``next_retry_ms`` (the coordinator then
    moves its retry timer)."""

    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        local: ControlMarkerAppender,
        sender: BrokerSender | None = None,
        *,
        clock_ms: Callable[[], int],
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
    ) -> None:
        self._node_id = node_id
        self._image = image
        self._local = local
        self._sender = sender
        self._clock_ms = clock_ms
        self._backoff_ms = max(retry_backoff_ms, 1)
        self._backoff_max_ms = max(retry_backoff_max_ms, self._backoff_ms)
        self.jobs: dict[str, MarkerJob] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_reschedule: Callable[[], None] = lambda: None

    @property
    def has_pending(self) -> bool:
        return bool(self.jobs)

    def next_retry_ms(self) -> int | None:
        """When the earliest job has partitions to try again (None: none has)."""
        due = [job.next_attempt_ms for job in self.jobs.values() if job.retriable]
        return min(due) if due else None

    def add(self, job: MarkerJob) -> None:
        """Start writing ``job``'s markers (replacing an older job of the same transactional id)."""
        old = self.jobs.get(job.transactional_id)
        if old is not None:
            old.closed = True
        self.jobs[job.transactional_id] = job
        self._drive_safely(job)

    def remove(self, transactional_id: str) -> None:
        """Stop writing a transaction's markers (its coordinator partition moved away)."""
        job = self.jobs.pop(transactional_id, None)
        if job is not None:
            job.closed = True

    def retry(self) -> None:
        """Try again every partition that is neither written nor in flight, of the jobs whose
        backoff has passed."""
        now = self._clock_ms()
        for job in list(self.jobs.values()):
            if not job.closed and job.next_attempt_ms <= now and job.retriable:
                self._drive_safely(job)

    def close(self) -> None:
        for job in self.jobs.values():
            job.closed = True
        self.jobs.clear()
        for task in self._tasks:
            task.cancel()
        if self._sender is not None:
            self._sender.close()

    # -- internals -----------------------------------------------------------------------------

    def _drive_safely(self, job: MarkerJob) -> None:
        try:
            self._drive(job)
        except Exception:  # a bug must not stop the other jobs nor spin: back off like a failure
            log.exception("writing the markers of %s failed", job.transactional_id)
            self._end_round(job, [(tp, int(ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in sorted(job.retriable)])

    def _drive(self, job: MarkerJob) -> None:
        image = self._image()
        remote: dict[int, list[TopicPartition]] = {}
        errors: list[tuple[TopicPartition, int]] = []
        for tp in sorted(job.retriable):
            if job.closed:
                return
            topic = image.topics.get(tp[0])
            part = topic.partitions.get(tp[1]) if topic is not None else None
            if part is None:
                log.info("%s-%s is gone; the marker of %s is not written there", tp[0], tp[1], job.transactional_id)
                job.pending.discard(tp)
            elif part.leader == self._node_id:
                code, offset = self._write_local(job, tp)
                if code == ErrorCode.NONE and not self._local.marker_replicated(tp[0], tp[1], offset):
                    self._await_local(job, tp, offset)
                else:
                    self._result(job, tp, code, errors)
            elif part.leader in image.brokers and self._sender is not None:
                remote.setdefault(part.leader, []).append(tp)
            else:
                errors.append((tp, int(ErrorCode.LEADER_NOT_AVAILABLE)))
        for node, tps in remote.items():
            if job.closed:
                return
            broker = image.brokers[node]
            if not self._send_remote(job, broker.host, broker.port, tps):
                errors.extend((tp, int(ErrorCode.REQUEST_TIMED_OUT)) for tp in tps)
        self._end_round(job, errors)
        self._maybe_done(job)

    def _write_local(self, job: MarkerJob, tp: TopicPartition) -> tuple[int, int]:
        """``(error code, marker offset)`` of writing the marker to a partition led here."""
        try:
            offset = self._local.append_control_marker(
                tp[0],
                tp[1],
                producer_id=job.producer_id,
                producer_epoch=job.producer_epoch,
                coordinator_epoch=job.coordinator_epoch,
                commit=job.commit,
            )
        except PartitionError as exc:
            return exc.code, -1
        except Exception as exc:  # a LogError (storage, fenced epoch) carries its Kafka code
            code = getattr(exc, "code", None)
            if not isinstance(code, int):
                log.exception("writing a marker to %s-%s failed", *tp)
                return int(ErrorCode.UNKNOWN_SERVER_ERROR), -1
            return code, -1
        return int(ErrorCode.NONE), offset

    def _await_local(self, job: MarkerJob, tp: TopicPartition, offset: int) -> None:
        """A marker written here counts once its partition's ISR has it (Kafka writes markers with
        acks=all): until then the partition is in flight; a failure makes the job write it again."""
        job.in_flight.add(tp)
        local = self._local

        async def wait() -> None:
            try:
                code = await local.wait_replicated(tp[0], tp[1], offset, LOCAL_MARKER_TIMEOUT_MS)
            except Exception:
                log.exception("waiting for the marker of %s on %s-%s failed", job.transactional_id, *tp)
                code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            finally:
                job.in_flight.discard(tp)
            errors: list[tuple[TopicPartition, int]] = []
            self._result(job, tp, code, errors)
            self._end_round(job, errors)
            self._maybe_done(job)
            try:
                self.on_reschedule()
            except Exception:
                log.exception("rescheduling the marker retries failed")

        task = asyncio.get_running_loop().create_task(wait(), name=f"txn-marker-wait-{job.transactional_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _send_remote(self, job: MarkerJob, host: str, port: int, tps: list[TopicPartition]) -> bool:
        """Send the markers of ``tps`` to the broker at host:port; False if it cannot be sent now."""
        if self._sender is None:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False  # no loop (tests driving the coordinator directly): retried later
        request = MarkerRequest(job.producer_id, job.producer_epoch, job.coordinator_epoch, job.commit, tuple(tps))
        job.in_flight.update(tps)
        sender = self._sender
        asked = frozenset(tps)

        async def send() -> None:
            try:
                try:
                    results = await sender.write_txn_markers(host, port, request)
                except Exception:  # the sender answers failures with codes; anything else is a bug
                    log.exception("WriteTxnMarkers of %s to %s:%s failed", job.transactional_id, host, port)
                    results = dict.fromkeys(tps, int(ErrorCode.UNKNOWN_SERVER_ERROR))
                finally:
                    job.in_flight.difference_update(tps)
                errors: list[tuple[TopicPartition, int]] = []
                for tp, code in results.items():
                    if tp in asked:
                        self._result(job, tp, code, errors)
                self._end_round(job, errors)
                self._maybe_done(job)
            except Exception:
                log.exception("handling the WriteTxnMarkers answer for %s failed", job.transactional_id)
            try:
                self.on_reschedule()
            except Exception:
                log.exception("rescheduling the marker retries failed")

        task = loop.create_task(send(), name=f"txn-markers-{job.transactional_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _result(self, job: MarkerJob, tp: TopicPartition, code: int, errors: list[tuple[TopicPartition, int]]) -> None:
        """Apply one partition's answer; a retriable failure goes to ``errors``."""
        if job.closed:
            return
        if code == ErrorCode.NONE:
            job.pending.discard(tp)
            job.failures = 0
        elif code in _DROPPED:
            log.info("marker of %s for %s-%s: %s; dropped from the transaction", job.transactional_id, *tp,
                     error_name(code))  # fmt: skip
            job.pending.discard(tp)
        elif code in _ABANDON:
            log.warning(
                "markers of %s (producer %d epoch %d) abandoned: %s on %s-%s",
                job.transactional_id, job.producer_id, job.producer_epoch, error_name(code), *tp,
            )  # fmt: skip
            job.closed = True
            if self.jobs.get(job.transactional_id) is job:
                del self.jobs[job.transactional_id]
            job.on_abandon(code)
        else:
            errors.append((tp, code))

    def _end_round(self, job: MarkerJob, errors: list[tuple[TopicPartition, int]]) -> None:
        """Back off after a round that left partitions to retry; log them (rate-limited)."""
        if job.closed or not errors:
            return
        now = self._clock_ms()
        job.failures += 1
        delay = min(self._backoff_ms << min(job.failures - 1, 30), self._backoff_max_ms)
        job.next_attempt_ms = now + delay
        warn = job.failures >= WARN_AFTER_FAILURES and (
            job.last_warning_ms is None or now - job.last_warning_ms >= WARNING_INTERVAL_MS
        )
        if warn:
            job.last_warning_ms = now
        log.log(
            logging.WARNING if warn else logging.DEBUG,
            "markers of %s not written yet (%s); attempt %d, next in %d ms",
            job.transactional_id,
            ", ".join(f"{t}-{p}: {error_name(code)}" for (t, p), code in errors),
            job.failures,
            delay,
        )

    def _maybe_done(self, job: MarkerJob) -> None:
        if job.closed or job.pending:
            return
        if self.jobs.get(job.transactional_id) is job:
            del self.jobs[job.transactional_id]
        job.closed = True
        job.on_done()
