"""The sink's Arrow path (``sink_arrow.write_task_arrow``) under the same transaction model as the
row path (``test_sink.py``): the same records reach the producer (through ``send_batch``), the
mark goes to the first row's topic, a replay skips and consumes the input, failures abort, and
bad rows fail with the row path's messages."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from pyspark_log.client import TopicPartition
from pyspark_log.records.columnar_encode import HEADERS_TYPE
from pyspark_log.spark import sink_arrow
from pyspark_log.spark.sink import Columns, PylogSinkError, TaskResult, complete_all, write_task
from pyspark_log.spark.sink_arrow import write_task_arrow
from tests.unit.spark.test_sink import (
    NO_TOPIC,
    OPTIONS,
    VALUE_ONLY,
    FakeProducer,
    Model,
    stream_task,
    wait_until_closed,
)

pytestmark = pytest.mark.unit


def _send_batch(self: FakeProducer, topic: str, data: Any, *, on_delivery: Any = None, **_: Any) -> None:
    """The fake producer's batch API: every row becomes what ``send`` would have recorded."""
    columns = {k: v.to_pylist() for k, v in data.items()}
    n = len(columns["value"])
    for i in range(n):
        headers = columns.get("headers", [None] * n)[i]
        self.send(
            topic,
            columns["value"][i],
            columns.get("key", [None] * n)[i],
            [(h["key"], h["value"]) for h in headers] if headers else None,
            columns.get("partition", [None] * n)[i],
            on_delivery=on_delivery,
        )


@pytest.fixture(autouse=True)
def batch_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeProducer, "send_batch", _send_batch, raising=False)


SCHEMA = pa.schema(
    [
        ("value", pa.binary()),
        ("key", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("headers", HEADERS_TYPE),
    ]
)
ROWS = [
    (b"v1", "k1", "t1", 2, [("h", b"x"), ("n", None)]),
    (None, None, "t2", None, None),
    (b"", "k3", "t1", None, []),
]
COLUMNS = Columns(value=0, key=1, topic=2, partition=3, headers=4)


def batches(rows: list[tuple[Any, ...]], schema: pa.Schema = SCHEMA, size: int = 2) -> list[pa.RecordBatch]:
    out = []
    for lo in range(0, len(rows), size):
        chunk = rows[lo : lo + size]
        arrays = []
        for j, field in enumerate(schema):
            values = [r[j] for r in chunk]
            if field.name == "headers":
                values = [None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in values]
            arrays.append(pa.array(values, field.type))
        out.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return [pa.RecordBatch.from_pylist([], schema=schema), *out]  # an empty batch is skipped


def test_arrow_and_row_paths_give_the_same_records_and_mark() -> None:
    by_rows, by_arrow = Model(), Model()
    r = write_task(NO_TOPIC, COLUMNS, ROWS, stream_task(0, 5), by_rows.clients())
    a = write_task_arrow(NO_TOPIC, COLUMNS, batches(ROWS), stream_task(0, 5), by_arrow.clients())
    assert (r.rows, a.rows) == (3, 3)
    complete_all(NO_TOPIC, [r], commit=True, what="b5", clients=by_rows.clients())
    complete_all(NO_TOPIC, [a], commit=True, what="b5", clients=by_arrow.clients())
    assert sorted(by_arrow.log, key=repr) == sorted(by_rows.log, key=repr)
    assert [x for x in by_arrow.log if x[0] == "t1"] == [x for x in by_rows.log if x[0] == "t1"]
    assert list(by_arrow.groups["q-0"]) == list(by_rows.groups["q-0"]) == [TopicPartition("t1", 0)]


def test_a_replayed_batch_skips_and_consumes_its_input() -> None:
    model = Model()
    data = batches([(b"a",), (b"b",), (b"c",)], pa.schema([("value", pa.binary())]))
    first = write_task_arrow(OPTIONS, VALUE_ONLY, data, stream_task(0, 3), model.clients())
    complete_all(OPTIONS, [first], commit=True, what="b3", clients=model.clients())
    again = write_task_arrow(OPTIONS, VALUE_ONLY, iter(data), stream_task(0, 3), model.clients())
    assert again == TaskResult("q", 0, 3, None, skipped=True)
    assert [r[1] for r in model.log] == [b"a", b"b", b"c"]


def test_an_empty_task_begins_no_transaction() -> None:
    model = Model()
    empty = [pa.RecordBatch.from_pylist([], schema=SCHEMA)]
    assert write_task_arrow(OPTIONS, COLUMNS, empty, stream_task(0, 0), model.clients()) == TaskResult("q", 0, 0)
    wait_until_closed(model)
    assert model.epochs == {}
    assert model.open == {}


def test_a_failed_delivery_aborts() -> None:
    model = Model(fail_delivery_at=2)
    with pytest.raises(RuntimeError, match="injected delivery failure"):
        write_task_arrow(OPTIONS, COLUMNS, batches(ROWS), stream_task(0, 0), model.clients())
    assert model.open == {}
    assert model.log == []


def test_bad_rows_fail_with_the_row_paths_messages() -> None:
    model = Model()
    rows = [(b"a", None, "t", None, None), (b"b", None, None, None, None)]
    with pytest.raises(PylogSinkError, match=r"row 2 of this task has a null topic: set the topic option"):
        write_task_arrow(NO_TOPIC, COLUMNS, batches(rows, size=1), stream_task(0, 0), model.clients())
    rows = [(b"a", None, "t", None, []), (b"b", None, "t", None, [(None, b"x")])]
    with pytest.raises(PylogSinkError, match=r"row 2 of this task has a null header or header key"):
        write_task_arrow(NO_TOPIC, COLUMNS, batches(rows), stream_task(0, 0), model.clients())
    assert model.open == {}


def test_small_batches_are_coalesced_and_a_big_one_goes_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's Arrow batches below ``COALESCE_ROWS`` are concatenated (one copy per column) before
    ``send_batch``; a batch at the threshold is handed over as it is (its value buffer, no copy),
    after what was pending, so the order of the rows is kept."""
    monkeypatch.setattr(sink_arrow, "COALESCE_ROWS", 3)
    calls: list[tuple[list[Any], int]] = []

    def recording(self: FakeProducer, topic: str, data: Any, **kw: Any) -> None:
        calls.append((data["value"].to_pylist(), data["value"].buffers()[2].address))
        _send_batch(self, topic, data, **kw)

    monkeypatch.setattr(FakeProducer, "send_batch", recording, raising=False)
    schema = pa.schema([("value", pa.binary())])
    sizes = [2, 2, 5, 1]
    data, n = [], 0
    for size in sizes:
        data.append(pa.RecordBatch.from_pylist([{"value": b"%d" % (n + i)} for i in range(size)], schema=schema))
        n += size
    model = Model()
    result = write_task_arrow(OPTIONS, VALUE_ONLY, data, stream_task(0, 0), model.clients())
    assert result.rows == 10
    assert [len(values) for values, _ in calls] == [4, 5, 1]
    assert [v for values, _ in calls for v in values] == [b"%d" % i for i in range(10)]
    assert calls[1][1] == data[2].column(0).buffers()[2].address
    complete_all(OPTIONS, [result], commit=True, what="b0", clients=model.clients())
    assert [r[1] for r in model.log] == [b"%d" % i for i in range(10)]
