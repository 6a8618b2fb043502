"""The queue workload: idempotent acks=all writers recording a history, and the final read.

Each ``Writer`` runs in its own thread and appends unique values (``<name>-<n>``) round-robin to
the topic's partitions, with a bounded number in flight: an ``invoke`` op when it hands a value to
its client, then ``ok`` (partition and offset from the acknowledgement) or ``info`` when the
client reports an error (with idempotence, a delivery error after retries may or may not have been
written: indeterminate; the harness never claims ``fail``, which would have to be certain).
``ConfluentWriter`` uses confluent-kafka (librdkafka), ``PylogWriter`` pylog's own producer.

``GroupReader`` is a consumer in a group (confluent-kafka, manual commits) reading the topic while
the faults run: every record it is handed (``Read``), every OffsetCommit with its outcome
(``Commit``) and, about once a second, the group's committed offsets as the coordinator returns
them (``Observation``), for ``checker.check_group``.

``read_all`` reads every partition from its log start to its high watermark with a fresh
confluent-kafka consumer (no group commits), after every fault was healed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from pyspark_log.client import Producer as PylogProducer
from tests.chaos.checker import Commit, Observation, Op, Read

IN_FLIGHT = 50
DELIVERY_TIMEOUT_MS = 120_000


class History:
    """Thread-safe append-only list of ops; times relative to ``origin`` (monotonic)."""

    def __init__(self) -> None:
        self.origin = time.monotonic()
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def add(self, process: str, kind: str, value: str, partition: int, index: int, **extra: object) -> None:
        op = Op(process, kind, value, partition, round(time.monotonic() - self.origin, 4), index, **extra)  # type: ignore[arg-type]
        with self._lock:
            self.ops.append(op)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


class Worker:
    """One workload thread (the writers and readers here, in txn.py and metadata.py): ``start``;
    ``join`` sets ``stop``, waits up to ``join_timeout_s`` and raises ``TimeoutError`` (naming it,
    ``_unfinished``) if the thread is still running; an exception that ends ``_run`` is kept in
    ``error`` for the test to assert on."""

    kind = "worker"
    join_timeout_s: float = 120

    def __init__(self, name: str) -> None:
        self.name = name
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=f"chaos-{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.stop.set()
        self.thread.join(self.join_timeout_s)
        if self.thread.is_alive():
            raise TimeoutError(self._unfinished())

    def _unfinished(self) -> str:
        return f"{self.kind} {self.name} did not finish"

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.error = exc

    def _run(self) -> None:
        raise NotImplementedError


class Writer(Worker):
    """A writer thread (see the module docstring); ``interval_s`` paces its sends."""

    kind = "writer"
    join_timeout_s = DELIVERY_TIMEOUT_MS / 1000 + 60

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: History,
                 interval_s: float = 0.004) -> None:  # fmt: skip
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history = history
        self.interval_s = interval_s
        self.slots = threading.BoundedSemaphore(IN_FLIGHT)
        self.acked = 0

    def _completed(self, value: str, partition: int, index: int, offset: int | None, error: str | None) -> None:
        if error is None:
            self.acked += 1
            # a negative offset is "acknowledged, position unknown" (see checker.py, wrong_position)
            known = offset if offset is not None and offset >= 0 else None
            self.history.add(self.name, "ok", value, partition, index, offset=known)
        else:
            self.history.add(self.name, "info", value, partition, index, error=error)
        self.slots.release()

    def _values(self, send: Callable[[str, int, int], None], poll: Callable[[], None]) -> None:
        n = 0
        while not self.stop.is_set():
            while not self.slots.acquire(timeout=0.05):
                poll()
                if self.stop.is_set():
                    return
            partition = n % self.partitions
            value = f"{self.name}-{n}"
            self.history.add(self.name, "invoke", value, partition, n)
            send(value, partition, n)
            n += 1
            poll()
            self.stop.wait(self.interval_s)


class ConfluentWriter(Writer):
    def _run(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS, "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 3,
        })  # fmt: skip

        def send(value: str, partition: int, index: int) -> None:
            def delivered(err: KafkaError | None, msg: object) -> None:
                offset = None if err is not None else msg.offset()  # type: ignore[attr-defined]
                self._completed(value, partition, index, offset, None if err is None else str(err))

            producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=delivered)

        self._values(send, lambda: producer.poll(0))
        producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 30)


class PylogWriter(Writer):
    def _run(self) -> None:
        producer = PylogProducer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS, "metadata.max.age.ms": 1000,
        })  # fmt: skip

        def send(value: str, partition: int, index: int) -> None:
            def done(future: object) -> None:
                try:
                    offset = future.result(0).offset  # type: ignore[attr-defined]
                except Exception as exc:
                    self._completed(value, partition, index, None, repr(exc))
                else:
                    self._completed(value, partition, index, offset, None)

            try:
                future = producer.send(self.topic, value.encode(), partition=partition)
            except Exception as exc:  # refused before it was handed over: indeterminate is safe
                self._completed(value, partition, index, None, repr(exc))
                return
            future.add_done_callback(done)

        try:
            self._values(send, lambda: None)
            producer.flush(DELIVERY_TIMEOUT_MS + 30_000)
        finally:
            producer.close()


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120) -> dict[int, list[tuple[int, str]]]:
    """Every partition's ``(offset, value)`` from the log start to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-read-{topic}",
                         "enable.auto.commit": False, "log_level": 3})  # fmt: skip
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        last: dict[int, int] = dict.fromkeys(range(partitions), -1)
        while any(last[p] < ends[p] - 1 for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read: at {last}, high watermarks {ends}")
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is not None:
                    continue
                out[m.partition()].append((m.offset(), m.value().decode()))
                last[m.partition()] = max(last[m.partition()], m.offset())
    finally:
        consumer.close()
    return out


class GroupReader(Worker):
    """A consumer of group ``group`` in its own thread (see the module docstring); commits the
    next offset of each partition it read from every ``commit_every_s``."""

    kind = "group reader"

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, group: str, origin: float,
                 commit_every_s: float = 0.5, isolation: str = "read_uncommitted") -> None:  # fmt: skip
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions, self.group = bootstrap, topic, partitions, group
        self.origin = origin
        self.commit_every_s = commit_every_s
        self.isolation = isolation
        self.reads: list[Read] = []
        self.commits: list[Commit] = []
        self.observations: list[Observation] = []

    def _now(self) -> float:
        return round(time.monotonic() - self.origin, 4)

    def _commit(self, consumer: Consumer, pending: dict[int, int]) -> None:
        if not pending:
            return
        offsets = [CkTopicPartition(self.topic, p, o) for p, o in pending.items()]
        at = self._now()
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException:  # the whole commit failed (or its outcome is unknown): not acknowledged
            self.commits.extend(Commit(self.name, p, o, at, False) for p, o in pending.items())
        else:
            for tp in result:
                self.commits.append(Commit(self.name, tp.partition, tp.offset, at, tp.error is None))
        pending.clear()

    def _observe(self, consumer: Consumer) -> None:
        start = self._now()
        try:
            got = consumer.committed([CkTopicPartition(self.topic, p) for p in range(self.partitions)], timeout=5)
        except KafkaException:
            return
        end = self._now()
        self.observations.extend(
            Observation(tp.partition, tp.offset, start, end) for tp in got if tp.error is None and tp.offset >= 0
        )

    def _run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 2, "isolation.level": self.isolation,
        })  # fmt: skip
        pending: dict[int, int] = {}

        def revoked(c: Consumer, _partitions: list[CkTopicPartition]) -> None:
            self._commit(c, pending)  # what it read before its partitions move

        consumer.subscribe([self.topic], on_revoke=revoked)
        last_commit = time.monotonic()
        try:
            while not self.stop.is_set():
                for m in consumer.consume(200, timeout=0.2):
                    if m.error() is not None:
                        continue
                    self.reads.append(Read(self.name, m.partition(), m.offset(), m.value().decode(), self._now()))
                    pending[m.partition()] = m.offset() + 1
                if time.monotonic() - last_commit >= self.commit_every_s:
                    self._commit(consumer, pending)
                    self._observe(consumer)
                    last_commit = time.monotonic()
            self._commit(consumer, pending)
        finally:
            consumer.close()


def committed_offsets(bootstrap: str, topic: str, partitions: int, group: str) -> dict[int, int]:
    """The group's committed offset of each partition (-1 when none); ``{}`` while the group's
    coordinator cannot answer yet (loading, or UNSTABLE_OFFSET_COMMIT until an open transaction
    with offsets for it ends, KIP-447: librdkafka asks with ``require_stable``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2})
    try:
        got = consumer.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=30)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in got}
