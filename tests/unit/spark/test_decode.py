"""Executor data path: fetched batches -> Arrow, transactions, gaps and out-of-range fetches (decode.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from pyspark_log.records.fetched import arrow_schema
from pyspark_log.spark.access import TopicPartition
from pyspark_log.spark.decode import read_range
from pyspark_log.spark.planning import OffsetRange, PylogDataLossError
from tests.unit.spark.fake_broker import FakeBroker

TP = TopicPartition

T0 = TP("t", 0)


def read(broker: FakeBroker, start: int, end: int, **kw: object) -> pa.Table:
    args: dict[str, object] = {
        "isolation_level": "read_committed",
        "max_bytes": 1 << 20,
        "include_headers": False,
        "fail_on_data_loss": True,
    }
    args.update(kw)
    batches = list(read_range(broker, OffsetRange(T0, start, end), **args))  # type: ignore[arg-type]
    include_headers = bool(args["include_headers"])
    for b in batches:
        assert b.schema.equals(arrow_schema(include_headers))
    return pa.Table.from_batches(batches, schema=arrow_schema(include_headers))


@pytest.fixture
def broker() -> FakeBroker:
    b = FakeBroker()
    b.create_topic("t", 1)
    return b


def test_arrow_schema_is_what_pyspark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from pyspark_log.spark.source import source_schema

    for headers in (False, True):
        assert to_arrow_schema(source_schema(headers), timezone="UTC").equals(arrow_schema(headers))
    # the Kafka connector's columns, as users see them
    assert source_schema(True).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert source_schema(False).fieldNames() == source_schema(True).fieldNames()[:-1]
    assert all(f.nullable for f in source_schema(True).fields)


def test_columns_and_values(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"v0", None], key=b"k", timestamp=1_700_000_000_123)
    table = read(broker, 0, 2)
    assert table.column("key").to_pylist() == [b"k", b"k"]
    assert table.column("value").to_pylist() == [b"v0", None]
    assert table.column("topic").to_pylist() == ["t", "t"]
    assert table.column("partition").to_pylist() == [0, 0]
    assert table.column("offset").to_pylist() == [0, 1]
    assert table.column("timestamp").to_pylist()[0] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert table.column("timestampType").to_pylist() == [0, 0]


def test_headers_column(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"v"], headers=(("h1", b"x"), ("h2", None)))
    table = read(broker, 0, 1, include_headers=True)
    assert table.column("headers").to_pylist() == [[{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}]]


def test_log_append_time_is_reported(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"v"], log_append_time=True)
    assert read(broker, 0, 1).column("timestampType").to_pylist() == [1]


def test_records_outside_the_range_are_dropped(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"0", b"1", b"2", b"3", b"4"])  # one batch, offsets 0-4
    broker.produce("t", 0, [b"5", b"6"])
    assert read(broker, 2, 6).column("offset").to_pylist() == [2, 3, 4, 5]


def test_one_record_batch_per_fetch_chunk(broker: FakeBroker) -> None:
    for i in range(5):
        broker.produce("t", 0, [b"x" * 100, str(i).encode()])
    batches = list(
        read_range(
            broker,
            OffsetRange(T0, 0, 10),
            isolation_level="read_committed",
            max_bytes=1,  # every fetch returns one whole batch
            include_headers=False,
            fail_on_data_loss=True,
        )
    )
    assert [b.num_rows for b in batches] == [2] * 5


def test_compaction_gaps_are_not_data_loss(broker: FakeBroker) -> None:
    for i in range(4):
        broker.produce("t", 0, [str(i).encode()])
    broker.compact("t", 0, {1, 2})
    assert read(broker, 0, 4).column("offset").to_pylist() == [0, 3]


def test_read_committed_drops_aborted_transactions_and_markers(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"plain"])  # 0
    broker.produce("t", 0, [b"aborted-1"], producer_id=7, transactional=True)  # 1
    broker.produce("t", 0, [b"committed-1"], producer_id=8, transactional=True)  # 2
    broker.produce("t", 0, [b"aborted-2"], producer_id=7, transactional=True)  # 3
    broker.end_transaction("t", 0, 7, commit=False)  # 4
    broker.end_transaction("t", 0, 8, commit=True)  # 5
    broker.produce("t", 0, [b"after"], producer_id=7, transactional=True)  # 6, pid 7 again, new txn
    broker.end_transaction("t", 0, 7, commit=True)  # 7
    committed = read(broker, 0, 8)
    assert committed.column("value").to_pylist() == [b"plain", b"committed-1", b"after"]
    uncommitted = read(broker, 0, 8, isolation_level="read_uncommitted")
    assert uncommitted.column("offset").to_pylist() == [0, 1, 2, 3, 6]  # markers never show


def test_aborted_transactions_across_fetch_chunks(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"a1"], producer_id=3, transactional=True)
    broker.produce("t", 0, [b"a2"], producer_id=3, transactional=True)
    broker.end_transaction("t", 0, 3, commit=False)
    broker.produce("t", 0, [b"ok"])
    batches = read_range(
        broker,
        OffsetRange(T0, 0, 4),
        isolation_level="read_committed",
        max_bytes=1,
        include_headers=False,
        fail_on_data_loss=True,
    )
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"ok"]


def test_an_empty_range_of_markers_yields_nothing(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"a"], producer_id=3, transactional=True)
    broker.end_transaction("t", 0, 3, commit=False)
    assert read(broker, 0, 2).num_rows == 0


def test_retention_during_the_read_fails_by_default(broker: FakeBroker) -> None:
    for i in range(4):
        broker.produce("t", 0, [str(i).encode()])
    broker.delete_records("t", 0, 2)
    with pytest.raises(PylogDataLossError, match=r"t-0: offsets 0 to 1 were deleted.*failOnDataLoss=false"):
        read(broker, 0, 4)


def test_retention_during_the_read_skips_with_fail_on_data_loss_false(
    broker: FakeBroker, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(4):
        broker.produce("t", 0, [str(i).encode()])
    broker.delete_records("t", 0, 2)
    with caplog.at_level(logging.WARNING):
        table = read(broker, 0, 4, fail_on_data_loss=False)
    assert table.column("offset").to_pylist() == [2, 3]
    assert "skipping" in caplog.text


def test_log_ending_before_the_range_is_a_reset(broker: FakeBroker) -> None:
    broker.produce("t", 0, [b"a", b"b"])
    with pytest.raises(PylogDataLossError, match="log ends at 2"):
        read(broker, 0, 5)
    broker.reset_partition("t", 0)
    assert read(broker, 1, 5, fail_on_data_loss=False).num_rows == 0


def test_deleted_partition_during_the_read(broker: FakeBroker) -> None:
    broker.delete_topic("t")
    with pytest.raises(PylogDataLossError, match="t-0 no longer exists"):
        read(broker, 0, 5)
    assert read(broker, 0, 5, fail_on_data_loss=False).num_rows == 0


def test_large_chunks_take_the_vectorised_decoder_and_keep_the_schema(broker: FakeBroker) -> None:
    broker.produce("t", 0, [str(i).encode() for i in range(300)], headers=(("h", b"x"),), timestamp=5)
    table = read(broker, 10, 290, include_headers=True)
    assert table.column("offset").to_pylist() == list(range(10, 290))
    assert table.column("value").to_pylist()[:2] == [b"10", b"11"]
    assert table.column("timestamp").to_pylist()[0] == datetime(1970, 1, 1, 0, 0, 0, 15000, tzinfo=UTC)
    assert table.column("headers").to_pylist()[0] == [{"key": "h", "value": b"x"}]
