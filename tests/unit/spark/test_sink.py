"""The pylog sink's transactional protocol (sink.py) against an in-memory transaction model, and
its commit messages (writer.py): skip of committed batches, fencing of earlier attempts, abort on
failure, the driver's commit/abort, and pickling of what crosses the executor/driver boundary."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.datasource import WriterCommitMessage

from pyspark_log.client import OffsetAndMetadata, TopicPartition
from pyspark_log.client.errors import ProducerFencedError
from pyspark_log.client.transactions import TransactionHandle
from pyspark_log.spark import writer as writer_module
from pyspark_log.spark.sink import (
    Clients,
    Columns,
    PylogSinkError,
    TaskInfo,
    TaskResult,
    batch_mark,
    complete_all,
    last_committed_batch,
    write_task,
)
from pyspark_log.spark.sink_options import parse_sink_options
from pyspark_log.spark.writer import PylogBatchWriter, PylogCommitMessage
from tests.unit.spark.test_layering import SPARK_DIR, imported_modules
from tests.waiting import wait_until

OPTIONS = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out", "transactionalIdPrefix": "q"}, "stream")
NO_TOPIC = parse_sink_options({"bootstrap.servers": "h:1", "transactionalIdPrefix": "q"}, "stream")
VALUE_ONLY = Columns(value=0)
QUERY = "query-1"


@dataclass
class OpenTxn:
    epoch: int
    records: list[tuple[Any, ...]] = field(default_factory=list)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)


@dataclass
class Model:
    """Kafka's transactional semantics, reduced to what the sink relies on."""

    log: list[tuple[Any, ...]] = field(default_factory=list)  # committed records
    groups: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    open: dict[str, OpenTxn] = field(default_factory=dict)
    done: dict[tuple[str, int], bool] = field(default_factory=dict)  # (txn id, epoch) -> committed?
    producers: list[FakeProducer] = field(default_factory=list)
    fail_send_at: int | None = None
    fail_delivery_at: int | None = None

    def end(self, txn_id: str, epoch: int, commit: bool) -> None:
        if self.done.get((txn_id, epoch)) == commit:
            return  # a retried EndTxn whose outcome is complete
        txn = self.open.get(txn_id)
        if txn is None or txn.epoch != epoch:
            raise ProducerFencedError(f"{txn_id} epoch {epoch} is not current")
        del self.open[txn_id]
        self.done[(txn_id, epoch)] = commit
        if commit:
            self.log.extend(txn.records)
            self.groups.setdefault(txn_id, {}).update(txn.offsets)

    def clients(self) -> Clients:
        return Clients(
            producer=lambda config: FakeProducer(self, config),
            admin=lambda config: FakeAdmin(self),
            complete=lambda config, handle, commit, timeout_ms: self.end(
                handle.transactional_id, handle.producer_epoch, commit
            ),
        )


class FakeProducer:
    def __init__(self, model: Model, config: Mapping[str, str]) -> None:
        self.model = model
        self.txn_id = config["transactional.id"]
        self.epoch = -1
        self.closed = False
        self.aborted = False
        self.sent = 0
        model.producers.append(self)

    def init_transactions(self, timeout_ms: float | None = None) -> None:
        stale = self.model.open.pop(self.txn_id, None)
        if stale is not None:
            self.model.done[(self.txn_id, stale.epoch)] = False
        self.epoch = self.model.epochs.get(self.txn_id, -1) + 1
        self.model.epochs[self.txn_id] = self.epoch

    def begin_transaction(self) -> None:
        self.model.open[self.txn_id] = OpenTxn(self.epoch)

    def _txn(self) -> OpenTxn:
        txn = self.model.open.get(self.txn_id)
        if txn is None or txn.epoch != self.epoch:
            raise ProducerFencedError("fenced")
        return txn

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        on_delivery: Any = None,
    ) -> None:
        self.sent += 1
        if self.model.fail_send_at == self.sent:
            raise RuntimeError("injected send failure")
        self._txn().records.append((topic, value, key, headers, partition))
        error = RuntimeError("injected delivery failure") if self.model.fail_delivery_at == self.sent else None
        on_delivery(None, error)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, Any], group_id: str, timeout_ms: float | None = None
    ) -> None:
        assert group_id == self.txn_id
        self._txn().offsets.update(offsets)

    def prepare_transaction(self, timeout_ms: float | None = None) -> TransactionHandle:
        self._txn()
        return TransactionHandle(self.txn_id, 1000, self.epoch)

    def abort_transaction(self, timeout_ms: float | None = None) -> None:
        self.aborted = True
        self.model.end(self.txn_id, self.epoch, False)

    def close(self, timeout_ms: float | None = None) -> None:
        self.closed = True


class FakeAdmin:
    def __init__(self, model: Model) -> None:
        self.model = model

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict:
        assert require_stable
        return dict(self.model.groups.get(group_id, {}))

    def close(self, timeout_ms: float | None = None) -> None:
        pass


def rows(*values: str) -> list[tuple[str]]:
    return [(v,) for v in values]


def stream_task(partition: int, batch: int, attempt: int = 0, query: str | None = QUERY) -> TaskInfo:
    return TaskInfo(partition, attempt, batch, query)


def test_rows_become_visible_only_when_the_driver_commits() -> None:
    model = Model()
    result = write_task(OPTIONS, VALUE_ONLY, rows("a", "b"), stream_task(0, 7), model.clients())
    assert result.rows == 2
    assert result.handle == TransactionHandle("q-0", 1000, 0)
    assert model.log == []
    assert all(p.closed for p in model.producers)
    complete_all(OPTIONS, [result], commit=True, what="b7", clients=model.clients())
    assert [r[:2] for r in model.log] == [("out", "a"), ("out", "b")]
    mark = model.groups["q-0"][TopicPartition("out", 0)]
    assert mark == batch_mark(7, QUERY)
    assert mark.offset == 7
    # A retried commit (the driver's commit() called again) is harmless.
    complete_all(OPTIONS, [result], commit=True, what="b7", clients=model.clients())
    assert len(model.log) == 2


def test_a_replayed_batch_that_was_committed_writes_nothing() -> None:
    model = Model()
    first = write_task(OPTIONS, VALUE_ONLY, rows("a", "b"), stream_task(0, 3), model.clients())
    complete_all(OPTIONS, [first], commit=True, what="b3", clients=model.clients())
    again = write_task(OPTIONS, VALUE_ONLY, rows("a", "b"), stream_task(0, 3), model.clients())
    assert again == TaskResult("q", 0, 2, None, skipped=True)
    older = write_task(OPTIONS, VALUE_ONLY, rows("x"), stream_task(0, 2), model.clients())
    assert older.skipped
    newer = write_task(OPTIONS, VALUE_ONLY, rows("c"), stream_task(0, 4), model.clients())
    assert newer.handle is not None
    complete_all(OPTIONS, [again, newer], commit=True, what="b4", clients=model.clients())
    assert [r[1] for r in model.log] == ["a", "b", "c"]


def test_a_retried_task_fences_the_attempt_that_prepared_but_never_committed() -> None:
    model = Model()
    zombie = write_task(OPTIONS, VALUE_ONLY, rows("a"), stream_task(1, 0), model.clients())
    retry = write_task(OPTIONS, VALUE_ONLY, rows("a"), stream_task(1, 0, attempt=1), model.clients())
    assert retry.handle is not None
    assert zombie.handle is not None
    assert retry.handle.producer_epoch > zombie.handle.producer_epoch
    complete_all(OPTIONS, [retry], commit=True, what="b0", clients=model.clients())
    assert [r[1] for r in model.log] == ["a"]
    with pytest.raises(PylogSinkError, match=r"could not commit 1 of 1 transactions \(q-1: .*restart the query"):
        complete_all(OPTIONS, [zombie], commit=True, what="b0", clients=model.clients())


def test_a_commit_tries_every_handle_before_failing_and_an_abort_never_raises() -> None:
    model = Model()
    results = [write_task(OPTIONS, VALUE_ONLY, rows(f"r{p}"), stream_task(p, 0), model.clients()) for p in range(3)]
    model.open.pop("q-1")  # e.g. the coordinator aborted it on timeout
    with pytest.raises(PylogSinkError, match=r"could not commit 1 of 3.*kafka\.transaction\.timeout\.ms"):
        complete_all(OPTIONS, results, commit=True, what="b0", clients=model.clients())
    assert sorted(r[1] for r in model.log) == ["r0", "r2"]
    complete_all(OPTIONS, results, commit=False, what="b0", clients=model.clients())  # logs, does not raise


def wait_until_closed(model: Model) -> None:
    """The clients an empty or failed task built on its helper thread get closed (polled)."""
    wait_until(
        lambda: model.producers and all(p.closed for p in model.producers),
        "the task's unused producer to be closed",
        interval_s=0.01,
    )


def test_an_empty_task_begins_no_transaction_and_closes_its_clients() -> None:
    """Clients are built while a task waits for its first input, but init_transactions (which
    fences and aborts) runs only once there is input: an empty task touches no transaction."""
    model = Model()
    assert write_task(OPTIONS, VALUE_ONLY, [], stream_task(0, 0), model.clients()) == TaskResult("q", 0, 0)
    wait_until_closed(model)
    assert model.epochs == {}
    assert model.open == {}


def test_the_clients_are_built_while_the_task_waits_for_its_first_input() -> None:
    model = Model()
    built = threading.Event()
    clients = model.clients()

    def producer(config: Mapping[str, str]) -> FakeProducer:
        made = FakeProducer(model, config)
        built.set()
        return made

    def slow_input() -> Iterator[tuple[str]]:
        assert built.wait(30), "the producer was not built before the first row arrived"
        yield ("a",)

    overlapping = Clients(producer=producer, admin=clients.admin, complete=clients.complete)
    result = write_task(OPTIONS, VALUE_ONLY, slow_input(), stream_task(0, 0), overlapping)
    complete_all(OPTIONS, [result], commit=True, what="b0", clients=overlapping)
    assert [r[1] for r in model.log] == ["a"]


def test_a_task_whose_input_fails_closes_its_clients_and_begins_nothing() -> None:
    model = Model()

    def failing() -> Iterator[tuple[str]]:
        raise RuntimeError("injected input failure")
        yield ("never",)

    with pytest.raises(RuntimeError, match="injected input failure"):
        write_task(OPTIONS, VALUE_ONLY, failing(), stream_task(0, 0), model.clients())
    wait_until_closed(model)
    assert model.epochs == {}


def test_a_failing_send_aborts_the_transaction() -> None:
    model = Model(fail_send_at=2)
    with pytest.raises(RuntimeError, match="injected send failure"):
        write_task(OPTIONS, VALUE_ONLY, rows("a", "b", "c"), stream_task(0, 0), model.clients())
    assert model.producers[0].aborted
    assert model.producers[0].closed
    assert model.open == {}
    assert model.log == []


def test_a_failed_delivery_fails_the_task() -> None:
    model = Model(fail_delivery_at=1)
    with pytest.raises(RuntimeError, match="injected delivery failure"):
        write_task(OPTIONS, VALUE_ONLY, rows("a", "b"), stream_task(0, 0), model.clients())
    assert model.open == {}
    assert model.log == []


def test_columns_become_record_fields_and_the_mark_goes_to_the_first_topic() -> None:
    model = Model()
    columns = Columns(value=0, key=1, topic=2, partition=3, headers=4)
    data = [
        (b"v1", "k1", "t1", 2, [("h", b"x")]),
        (None, None, "t2", None, None),
    ]
    result = write_task(NO_TOPIC, columns, data, stream_task(0, 5), model.clients())
    complete_all(NO_TOPIC, [result], commit=True, what="b5", clients=model.clients())
    assert model.log == [("t1", b"v1", "k1", [("h", b"x")], 2), ("t2", None, None, None, None)]
    assert list(model.groups["q-0"]) == [TopicPartition("t1", 0)]


def test_a_row_without_a_topic_fails_with_the_fix() -> None:
    model = Model()
    with pytest.raises(PylogSinkError, match=r"row 2 of this task has a null topic: set the topic option"):
        write_task(NO_TOPIC, Columns(value=0, topic=1), [("a", "t"), ("b", None)], stream_task(0, 0), model.clients())
    assert model.open == {}


def test_a_batch_write_has_no_mark_and_no_admin_lookup() -> None:
    model = Model()
    options = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out"}, "batch")
    clients = Clients(
        producer=model.clients().producer,
        admin=lambda config: pytest.fail("no admin in batch writes"),
        complete=model.clients().complete,
    )
    result = write_task(options, VALUE_ONLY, rows("a"), TaskInfo(4, 0), clients)
    assert result.transactional_id == f"{options.transactional_id_prefix}-4"
    complete_all(options, [result], commit=True, what="job", clients=clients)
    assert not any(model.groups.values())
    assert [r[1] for r in model.log] == ["a"]


def test_the_default_prefix_is_the_query_id() -> None:
    model = Model()
    options = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out"}, "stream")
    result = write_task(options, VALUE_ONLY, rows("a"), stream_task(2, 0, query="abc"), model.clients())
    assert result.transactional_id == "pylog-abc-2"
    with pytest.raises(PylogSinkError, match="set transactionalIdPrefix"):
        write_task(options, VALUE_ONLY, rows("a"), stream_task(2, 0, query=None), model.clients())


def test_group_id_prefix_names_the_derived_transactional_id_and_its_mark_group() -> None:
    model = Model()
    options = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out", "groupIdPrefix": "team-a"}, "stream")
    result = write_task(options, VALUE_ONLY, rows("a"), stream_task(2, 0, query="abc"), model.clients())
    assert result.transactional_id == "team-a-abc-2"
    complete_all(options, [result], commit=True, what="batch 0", clients=model.clients())
    assert set(model.groups) == {"team-a-abc-2"}


def test_a_prefix_used_by_another_query_or_a_consumer_group_is_refused() -> None:
    model = Model()
    result = write_task(OPTIONS, VALUE_ONLY, rows("a"), stream_task(0, 9, query="old-query"), model.clients())
    complete_all(OPTIONS, [result], commit=True, what="b9", clients=model.clients())
    with pytest.raises(PylogSinkError, match=r"a new checkpoint needs a new transactionalIdPrefix") as info:
        write_task(OPTIONS, VALUE_ONLY, rows("a"), stream_task(0, 0, query="new-query"), model.clients())
    assert "old-query (batch 9)" in str(info.value)
    assert model.open == {}
    foreign = {TopicPartition("t", 0): OffsetAndMetadata(5, "")}
    with pytest.raises(PylogSinkError, match="collides with a consumer group"):
        last_committed_batch(foreign, "q-0", QUERY)
    assert last_committed_batch({}, "q-0", QUERY) is None


def test_commit_messages_pickle_with_their_handles() -> None:
    message = PylogCommitMessage(3, TaskResult("q", 3, 10, TransactionHandle("q-3", 42, 7)))
    assert isinstance(message, WriterCommitMessage)
    copy = pickle.loads(pickle.dumps(message))
    assert copy == message
    assert copy.result.handle == TransactionHandle("q-3", 42, 7)
    assert copy.result.transactional_id == "q-3"


def test_a_batch_abort_fences_the_tasks_that_reported_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fenced: list[list[str]] = []
    completed: list[tuple[list[TaskResult], bool]] = []
    monkeypatch.setattr(writer_module, "fence", lambda options, ids: fenced.append(list(ids)))
    monkeypatch.setattr(
        writer_module, "complete_all", lambda options, results, *, commit, what: completed.append((results, commit))
    )
    options = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out", "transactionalIdPrefix": "job"}, "batch")
    writer = PylogBatchWriter(options, VALUE_ONLY)
    ok = PylogCommitMessage(1, TaskResult("job", 1, 5, TransactionHandle("job-1", 1, 0)))
    writer.abort([None, ok, None])
    assert completed == [([ok.result], False)]
    assert fenced == [["job-0", "job-2"]]


@pytest.mark.parametrize("module", ["sink", "sink_options"])
def test_the_sink_protocol_does_not_import_pyspark(module: str) -> None:
    imports = imported_modules(SPARK_DIR / f"{module}.py")
    assert not [m for m in imports if m == "pyspark" or m.startswith("pyspark.")]
