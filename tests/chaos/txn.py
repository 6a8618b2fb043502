"""The transactions workload and its checker (issue 31).

``TxnWriter``: a confluent-kafka transactional producer (``transactional.id`` = its name) in its
own thread. Transaction ``n`` writes one record ``<name>-<n>/<p>`` to every partition ``p`` of the
topic, then ``send_offsets_to_transaction`` commits offset ``n + 1`` of partition 0 of an input
topic for its own consumer group (KIP-98's consume-transform-produce: the offsets and the records
commit or abort together), then commits — every ``abort_every``-th is aborted on purpose. The
history (``checker.Op``, ``value`` = ``<name>-<n>``, ``partition`` -1): ``invoke``, then ``ok``
(commit_transaction returned), ``fail`` (aborted: abort_transaction returned) or ``info`` (any
other outcome; the producer is then replaced, whose ``init_transactions`` fences the old one and
ends its open transaction, KIP-98).

``read_committed`` reads every partition to its end with ``isolation.level=read_committed``.

``check_txn`` (pure) on the history, the final read_committed read, what read_committed consumers
saw during the run, and each writer's group's final committed input offset:

- ``partial``: some but not all of a transaction's records visible (atomicity);
- ``aborted_visible``: a record of an aborted transaction read (finally or during the run);
- ``uncommitted_read``: a record read during the run that the final read does not hold;
- ``lost``: a committed (``ok``) transaction not visible;
- ``duplicated``: a record visible more than once;
- ``order``: one producer's transactions out of their commit order in some partition;
- ``offsets``: the committed input offset ``C`` disagrees with the records: transaction ``C - 1``
  not visible, or a transaction ``≥ C`` visible.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from tests.chaos.checker import Op, Read
from tests.chaos.workload import History, Worker

TXN_ANOMALIES = ("partial", "aborted_visible", "uncommitted_read", "lost", "duplicated", "order", "offsets")
TXN_TIMEOUT_S = 30


class TxnWriter(Worker):
    """See the module docstring."""

    kind = "transactional writer"
    join_timeout_s = 300

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, input_topic: str, group: str,
                 history: History, abort_every: int = 5, interval_s: float = 0.05) -> None:  # fmt: skip
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.input_topic, self.group, self.history = input_topic, group, history
        self.abort_every, self.interval_s = abort_every, interval_s
        self.committed = 0
        self.replaced = 0
        self.step = "starting"  # what it is doing now (for a writer that does not finish)
        self.init_errors: list[str] = []  # init_transactions failures (the last ones)
        self.stuck: str | None = None  # a librdkafka call that never returned (see ``join``)

    def join(self) -> None:
        """As ``Worker.join``, except for a writer stuck in ``send_offsets_to_transaction``:
        librdkafka ignores that call's timeout and can block forever once its cached group
        coordinator was fenced out of the metadata (confluentinc/librdkafka#5456, #5511, open).
        Its transaction stays an invoke without outcome (indeterminate, as ``info``); the
        coordinator aborts it after ``transaction.timeout.ms`` (fencing the stuck producer), and
        the run goes on to the checks."""
        try:
            super().join()
        except TimeoutError:
            if not self.step.endswith("send_offsets_to_transaction"):
                raise
            self.stuck = self._unfinished()

    def _unfinished(self) -> str:
        return (f"transactional writer {self.name} did not finish: {self.step}; "
                f"last init_transactions errors {self.init_errors[-5:]}")  # fmt: skip

    def _producer(self) -> Producer | None:
        deadline = time.monotonic() + 300
        while True:
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "transactional.id": self.name, "acks": "all",
                "transaction.timeout.ms": 20_000, "message.timeout.ms": 20_000, "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 1000, "log_level": 2,
            })  # fmt: skip
            try:
                self.step = "init_transactions"
                producer.init_transactions(TXN_TIMEOUT_S)
                return producer
            except KafkaException as exc:
                self.init_errors = [*self.init_errors[-20:], f"{time.monotonic() - self.history.origin:.1f}s {exc}"]
                if time.monotonic() > deadline:
                    raise
                producer.flush(0)
                if self.stop.wait(0.5):  # told to stop: what it left open is already recorded ``info``
                    return None

    def _run(self) -> None:
        meta_consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "log_level": 2})
        metadata = meta_consumer.consumer_group_metadata()
        producer = self._producer()
        n = 0
        try:
            while producer is not None and not self.stop.is_set():
                value = f"{self.name}-{n}"
                self.history.add(self.name, "invoke", value, -1, n)
                outcome, error = self._one(producer, n, value, metadata)
                self.history.add(self.name, outcome, value, -1, n, error=error)
                if outcome == "ok":
                    self.committed += 1
                elif outcome == "info":  # a new producer fences this one and ends what it left open
                    self.replaced += 1
                    producer = self._producer()
                n += 1
                self.stop.wait(self.interval_s)
        finally:
            meta_consumer.close()

    def _one(self, producer: Producer, n: int, value: str, metadata: Any) -> tuple[str, str | None]:
        try:
            self.step = f"transaction {n}: produce"
            producer.begin_transaction()
            for p in range(self.partitions):
                producer.produce(self.topic, value=f"{value}/{p}".encode(), partition=p)
            offsets = [CkTopicPartition(self.input_topic, 0, n + 1)]
            self.step = f"transaction {n}: send_offsets_to_transaction"
            producer.send_offsets_to_transaction(offsets, metadata, TXN_TIMEOUT_S)
            if n % self.abort_every == self.abort_every - 1:
                producer.abort_transaction(TXN_TIMEOUT_S)
                return "fail", "aborted on purpose"
            for attempt in range(3):
                try:
                    self.step = f"transaction {n}: commit_transaction attempt {attempt}"
                    producer.commit_transaction(TXN_TIMEOUT_S)
                    return "ok", None
                except KafkaException as exc:
                    if not exc.args[0].retriable() or attempt == 2:
                        raise
            raise AssertionError("unreachable")
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                try:
                    self.step = f"transaction {n}: abort_transaction after {err}"
                    producer.abort_transaction(TXN_TIMEOUT_S)
                except KafkaException as again:
                    return "info", f"{err}; abort: {again.args[0]}"
                return "fail", str(err)
            return "info", str(err)


def read_committed(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 120
) -> dict[int, list[tuple[int, str]]]:
    """Every partition's ``(offset, value)`` as read_committed sees it, up to the high watermark
    (the position passes the markers, which a consumer is never handed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-txn-read-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 2})  # fmt: skip
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        tps = [CkTopicPartition(topic, p) for p in range(partitions)]
        ends = {p: consumer.get_watermark_offsets(tps[p], timeout=30)[1] for p in range(partitions)}
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while True:
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value().decode()))
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if all(positions[p] >= ends[p] for p in range(partitions)):
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_committed: at {positions}, high watermarks {ends}")
    finally:
        consumer.close()


def check_txn(
    history: Iterable[Op], final_read: Mapping[int, Sequence[tuple[int, str]]], reads: Iterable[Read],
    partitions: int, committed_input: Mapping[str, int],
) -> dict[str, list[Any]]:  # fmt: skip
    """The anomalies of ``TXN_ANOMALIES`` (see the module docstring), each with examples."""
    out: dict[str, list[Any]] = {a: [] for a in TXN_ANOMALIES}
    outcome: dict[str, Op] = {}
    for op in history:
        if op.type != "invoke":
            outcome[op.value] = op
    seen: dict[str, list[tuple[int, int]]] = defaultdict(list)  # txn -> [(partition, offset)]
    for p, rows in final_read.items():
        last: dict[str, tuple[int, int]] = {}  # producer -> (txn index, offset)
        for offset, record in rows:
            txn, _, _ = record.rpartition("/")
            seen[txn].append((p, offset))
            producer, _, index = txn.rpartition("-")
            prev = last.get(producer)
            if prev is not None and int(index) < prev[0]:
                out["order"].append({"partition": p, "offset": offset, "txn": txn, "after": prev})
            last[producer] = (int(index), offset)
    for txn, where in seen.items():
        parts = [p for p, _ in where]
        if len(set(parts)) != len(parts):
            out["duplicated"].append({"txn": txn, "positions": where})
        if set(parts) != set(range(partitions)):
            out["partial"].append({"txn": txn, "positions": where})
        done = outcome.get(txn)
        if done is not None and done.type == "fail":
            out["aborted_visible"].append({"txn": txn, "positions": where, "error": done.error})
    for txn, done in outcome.items():
        if done.type == "ok" and txn not in seen:
            out["lost"].append({"txn": txn})
    final_at = {(p, o): v for p, rows in final_read.items() for o, v in rows}
    for r in reads:
        there = final_at.get((r.partition, r.offset))
        if there != r.value:
            out["uncommitted_read"].append({"consumer": r.consumer, "partition": r.partition, "offset": r.offset,
                                            "value": r.value, "final_read": there})  # fmt: skip
        txn = r.value.rpartition("/")[0]
        done = outcome.get(txn)
        if done is not None and done.type == "fail":
            out["aborted_visible"].append({"consumer": r.consumer, "txn": txn, "error": done.error})
    visible: dict[str, set[int]] = defaultdict(set)
    for txn in seen:
        producer, _, index = txn.rpartition("-")
        visible[producer].add(int(index))
    for producer, committed in committed_input.items():
        c = max(committed, 0)
        high = [i for i in visible.get(producer, ()) if i >= c]
        if (c > 0 and c - 1 not in visible.get(producer, ())) or high:
            out["offsets"].append({"producer": producer, "committed_input_offset": c, "visible_at_or_above": high[:5],
                                   "last_below_visible": c - 1 in visible.get(producer, ())})  # fmt: skip
    return out


def probe(bootstrap: str, topic: str, transactional_id: str, timeout_s: float = 120) -> list[str]:
    """After heal: a fresh transactional producer inits and commits one transaction (a record to
    partition 0), retried until ``timeout_s``; returns the errors met on the way (raises
    TimeoutError with them when it never succeeds: the transaction coordinator stayed unavailable)."""
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 2})
        try:
            producer.init_transactions(TXN_TIMEOUT_S)
            producer.begin_transaction()
            producer.produce(topic, value=f"{transactional_id}-probe/0".encode(), partition=0)
            producer.commit_transaction(TXN_TIMEOUT_S)
            return errors
        except KafkaException as exc:
            errors.append(str(exc.args[0]))
        finally:
            producer.flush(0)
        time.sleep(1)
    raise TimeoutError(f"no transaction committed {timeout_s}s after heal: {errors[-5:]}")
