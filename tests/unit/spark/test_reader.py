"""The stream and batch readers and the DataSource, driven directly (no SparkSession) against FakeBroker."""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import pickle
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pyspark_log.spark import PylogDataSource, register
from pyspark_log.spark.access import BrokerAccessError, TopicPartition
from pyspark_log.spark.options import PylogOptionError, SourceOptions, parse_options
from pyspark_log.spark.planning import OffsetRange, PylogDataLossError
from pyspark_log.spark.reader import PylogBatchReader, PylogInputPartition, PylogStreamReader
from pyspark_log.spark.source import source_schema
from tests.unit.spark.fake_broker import FakeBroker

TP = TopicPartition


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Env:
    """A broker, a clock and readers wired to them."""

    def __init__(self) -> None:
        self.broker = FakeBroker()
        self.clock = Clock()
        self.sleeps: list[float] = []

    def factory(self, _options: SourceOptions) -> FakeBroker:
        return self.broker

    def stream(self, **options: str) -> PylogStreamReader:
        raw = {"bootstrap.servers": "h:1", "subscribe": "t", **options}
        return PylogStreamReader(parse_options(raw, "stream"), self.factory, self.clock, self.sleeps.append)

    def batch(self, **options: str) -> PylogBatchReader:
        raw = {"bootstrap.servers": "h:1", "subscribe": "t", **options}
        return PylogBatchReader(parse_options(raw, "batch"), self.factory)


@pytest.fixture
def env() -> Env:
    e = Env()
    e.broker.create_topic("t", 2)
    return e


def fill(broker: FakeBroker, partition: int, count: int) -> None:
    broker.produce("t", partition, [f"{partition}-{i}".encode() for i in range(count)])


def ranges(parts: list[InputPartition]) -> list[tuple[str, int, int]]:
    return [(str(p.value.tp), p.value.start, p.value.end) for p in parts]


def values(reader: Any, parts: list[InputPartition]) -> list[bytes]:
    out: list[bytes] = []
    for p in parts:
        for batch in reader.read(p):
            assert isinstance(batch, pa.RecordBatch)
            out.extend(batch.column("value").to_pylist())
    return out


# -- PySpark API shape ------------------------------------------------------------------------------


def test_admission_control_and_available_now_are_advertised(env: Env) -> None:
    reader = env.stream()
    # python_streaming_source_runner: two parameters -> latestOffset(start, limit) is used.
    assert len(inspect.signature(reader.latestOffset).parameters) == 2
    assert isinstance(reader, SupportsTriggerAvailableNow)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, ReadAllAvailable()),
        ({"maxOffsetsPerTrigger": "10"}, ReadMaxRows(10)),
        ({"minOffsetsPerTrigger": "5"}, ReadMinRows(5)),
        ({"maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "5"}, ReadMaxRows(10)),
    ],
)
def test_default_read_limit(env: Env, options: dict[str, str], expected: object) -> None:
    limit = env.stream(**options).getDefaultReadLimit()
    assert limit == expected
    json.dumps(dataclasses.asdict(limit))  # how the runner ships it to the JVM


# -- streaming ------------------------------------------------------------------------------------


def test_initial_offset_latest_by_default_and_earliest_on_request(env: Env) -> None:
    fill(env.broker, 0, 3)
    assert env.stream().initialOffset() == {"t": {"0": 3, "1": 0}}
    assert env.stream(startingOffsets="earliest").initialOffset() == {"t": {"0": 0, "1": 0}}


def test_initial_offset_with_assign_checks_partitions(env: Env) -> None:
    reader = PylogStreamReader(
        parse_options({"bootstrap.servers": "h:1", "assign": '{"t":[0,4]}'}, "stream"), env.factory
    )
    with pytest.raises(PylogOptionError, match=r"\(t-4\)"):
        reader.initialOffset()


def test_a_micro_batch_end_to_end(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest")
    start = reader.initialOffset()
    fill(env.broker, 0, 3)
    fill(env.broker, 1, 2)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 3, "1": 2}}
    parts = reader.partitions(start, end)
    assert ranges(parts) == [("t-0", 0, 3), ("t-1", 0, 2)]
    assert sorted(values(reader, parts)) == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1"]
    assert reader.reportLatestOffset() == {"t": {"0": 3, "1": 2}}
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new: Spark skips the batch
    assert reader.partitions(end, end) == []


def test_max_rows_limit_is_proportional_and_read_all_ignores_options(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest", maxOffsetsPerTrigger="40")
    start = reader.initialOffset()
    fill(env.broker, 0, 30)
    fill(env.broker, 1, 10)
    assert reader.latestOffset(start, ReadMaxRows(20)) == {"t": {"0": 15, "1": 5}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 30, "1": 10}}
    assert reader.reportLatestOffset() == {"t": {"0": 30, "1": 10}}


def test_min_rows_with_trigger_delay_and_injected_clock(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest", minOffsetsPerTrigger="10", maxTriggerDelay="1m")
    start = reader.initialOffset()
    fill(env.broker, 0, 2)
    first = reader.latestOffset(start, ReadMinRows(10))  # first trigger of a run always runs
    assert first == {"t": {"0": 2, "1": 0}}
    fill(env.broker, 0, 3)
    env.clock.ms += 30_000
    assert reader.latestOffset(first, ReadMinRows(10)) == first  # 3 < 10 and only 30 s
    env.clock.ms += 30_000
    assert reader.latestOffset(first, ReadMinRows(10)) == {"t": {"0": 5, "1": 0}}


def test_legacy_latest_offset_without_arguments_applies_options(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest", maxOffsetsPerTrigger="4")
    reader.initialOffset()
    fill(env.broker, 0, 10)
    assert reader.latestOffset() == {"t": {"0": 4, "1": 0}}
    assert reader.latestOffset() == {"t": {"0": 8, "1": 0}}
    # On restart Spark shows the last offset through partitions(offset, offset).
    fresh = env.stream(maxOffsetsPerTrigger="4")
    assert fresh.partitions({"t": {"0": 8, "1": 0}}, {"t": {"0": 8, "1": 0}}) == []
    assert fresh.latestOffset() == {"t": {"0": 10, "1": 0}}


def test_legacy_latest_offset_of_a_new_query_starts_at_starting_offsets(env: Env) -> None:
    """PySpark 4.0/4.1 ask a new query's latestOffset() before initialOffset(): the first batch
    starts at startingOffsets, limited, and initialOffset() then gives the same start."""
    fill(env.broker, 0, 10)
    reader = env.stream(startingOffsets="earliest", maxOffsetsPerTrigger="4")
    assert reader.latestOffset() == {"t": {"0": 4, "1": 0}}
    fill(env.broker, 0, 5)
    assert reader.initialOffset() == {"t": {"0": 0, "1": 0}}
    latest = env.stream(maxOffsetsPerTrigger="4")  # startingOffsets=latest, resolved once
    assert latest.latestOffset() == {"t": {"0": 15, "1": 0}}
    fill(env.broker, 0, 1)
    assert latest.initialOffset() == {"t": {"0": 15, "1": 0}}


def test_available_now_stops_at_the_target_and_ignores_min_rows(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="5")
    start = reader.initialOffset()
    fill(env.broker, 0, 8)
    reader.prepareForTriggerAvailableNow()
    fill(env.broker, 0, 100)  # arrives after the run started
    env.broker.create_topic("new", 1)
    end1 = reader.latestOffset(start, ReadMaxRows(5))
    assert end1 == {"t": {"0": 5, "1": 0}}
    end2 = reader.latestOffset(end1, ReadMaxRows(5))
    assert end2 == {"t": {"0": 8, "1": 0}}  # 3 left: below minOffsetsPerTrigger, read anyway
    assert reader.latestOffset(end2, ReadMaxRows(5)) == end2  # target reached: the run ends


def test_new_partitions_are_read_from_earliest(env: Env) -> None:
    reader = env.stream()
    start = reader.initialOffset()
    env.broker.add_partitions("t", 1)
    env.broker.produce("t", 2, [b"new-0", b"new-1"])
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 0, "1": 0, "2": 2}}
    parts = reader.partitions(start, end)
    assert ranges(parts) == [("t-2", 0, 2)]
    # Replaying the batch in a fresh reader (after a restart) asks the broker for the earliest offset.
    assert ranges(env.stream().partitions(start, end)) == [("t-2", 0, 2)]


def test_pattern_discovers_new_topics(env: Env) -> None:
    reader = PylogStreamReader(
        parse_options({"bootstrap.servers": "h:1", "subscribePattern": "t|u.*"}, "stream"), env.factory
    )
    start = reader.initialOffset()
    env.broker.create_topic("u1", 1)
    env.broker.produce("u1", 0, [b"x"])
    env.broker.create_topic("other", 1)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 0, "1": 0}, "u1": {"0": 1}}


def test_split_options_apply_to_stream_partitions(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest", minPartitions="4")
    start = reader.initialOffset()
    fill(env.broker, 0, 8)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert ranges(reader.partitions(start, end)) == [("t-0", 0, 2), ("t-0", 2, 4), ("t-0", 4, 6), ("t-0", 6, 8)]


def test_lagging_latest_is_retried_then_tolerated_within_a_run(env: Env) -> None:
    reader = env.stream(startingOffsets="earliest")
    start = reader.initialOffset()
    fill(env.broker, 0, 10)
    end = reader.latestOffset(start, ReadAllAvailable())
    env.broker.lagging_latest[TP("t", 0)] = [4, 4, 4]
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # seen 10 in this run: no loss, no retry
    assert env.sleeps == []


def test_checkpoint_beyond_the_log_retries_then_fails(env: Env) -> None:
    fill(env.broker, 0, 5)
    reader = env.stream(**{"fetchOffset.retryIntervalMs": "250"})
    env.broker.lagging_latest[TP("t", 0)] = [1, 2]
    start = {"t": {"0": 5, "1": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # caught up on the 3rd answer
    assert env.sleeps == [0.25, 0.25]
    env.broker.reset_partition("t", 0)
    with pytest.raises(PylogDataLossError, match=r"t-0: the query's next offset is 5 but the broker's log ends at 0"):
        env.stream().latestOffset(start, ReadAllAvailable())


def test_retention_skips_with_fail_on_data_loss_false(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    reader = env.stream(startingOffsets="earliest", failOnDataLoss="false")
    start = reader.initialOffset()
    fill(env.broker, 0, 10)
    env.broker.delete_records("t", 0, 6)
    with caplog.at_level(logging.WARNING):
        end = reader.latestOffset(start, ReadAllAvailable())
    assert "offsets 0 to 5 were deleted" in caplog.text
    parts = reader.partitions(start, end)
    assert ranges(parts) == [("t-0", 6, 10)]
    assert values(reader, parts) == [b"0-6", b"0-7", b"0-8", b"0-9"]
    with pytest.raises(PylogDataLossError, match="offsets 0 to 5 were deleted"):
        env.stream(startingOffsets="earliest").latestOffset(start, ReadAllAvailable())


def test_deleted_topic_is_data_loss(env: Env) -> None:
    reader = env.stream(failOnDataLoss="false")
    start = reader.initialOffset()
    env.broker.delete_topic("t")
    assert reader.latestOffset(start, ReadAllAvailable()) == {}
    with pytest.raises(PylogDataLossError, match="t-0 no longer exists"):
        env.stream().latestOffset(start, ReadAllAvailable())


def test_commit_stores_offsets_in_the_group_only_when_asked(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    env.stream().commit({"t": {"0": 3}})
    assert env.broker.commits == []
    reader = env.stream(groupId="lag-watch")
    reader.commit({"t": {"0": 3, "1": 1}})
    assert env.broker.commits == [("lag-watch", {TP("t", 0): 3, TP("t", 1): 1})]
    env.broker.commit_error = BrokerAccessError("coordinator not available")
    with caplog.at_level(logging.WARNING):
        reader.commit({"t": {"0": 4}})
    assert "could not commit offsets to group lag-watch" in caplog.text


def test_reader_pickles_without_its_connection(env: Env) -> None:
    reader = PylogStreamReader(parse_options({"bootstrap.servers": "h:1", "subscribe": "t"}, "stream"))
    reader._access = env.broker  # type: ignore[assignment]  # a live connection must not travel
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._access is None
    assert copy.options == reader.options
    reader.stop()
    assert env.broker.closed == 1


def test_partition_objects_pickle() -> None:
    part = PylogInputPartition(OffsetRange(TP("t", 0), 1, 5))
    assert pickle.loads(pickle.dumps(part)).value == OffsetRange(TP("t", 0), 1, 5)
    assert repr(part) == "PylogInputPartition(t-0, [1, 5))"


def test_read_of_the_placeholder_partition_is_empty(env: Env) -> None:
    assert list(env.stream().read(InputPartition(None))) == []


# -- batch ----------------------------------------------------------------------------------------


def test_batch_reads_earliest_to_latest(env: Env) -> None:
    fill(env.broker, 0, 3)
    fill(env.broker, 1, 1)
    reader = env.batch()
    parts = reader.partitions()
    assert ranges(parts) == [("t-0", 0, 3), ("t-1", 0, 1)]
    assert sorted(values(reader, parts)) == [b"0-0", b"0-1", b"0-2", b"1-0"]
    assert env.broker.closed >= 1


def test_batch_with_ending_offsets_and_max_records(env: Env) -> None:
    fill(env.broker, 0, 10)
    reader = env.batch(
        startingOffsets='{"t":{"0":2,"1":-2}}', endingOffsets='{"t":{"0":8,"1":-1}}', maxRecordsPerPartition="3"
    )
    assert ranges(reader.partitions()) == [("t-0", 2, 5), ("t-0", 5, 8)]


def test_batch_end_before_start_is_an_error(env: Env) -> None:
    fill(env.broker, 0, 10)
    reader = env.batch(startingOffsets='{"t":{"0":5,"1":-2}}', endingOffsets='{"t":{"0":3,"1":-1}}')
    with pytest.raises(PylogOptionError, match="before the starting offset 5"):
        reader.partitions()


def test_batch_ending_beyond_the_log_is_an_error(env: Env) -> None:
    fill(env.broker, 0, 10)
    reader = env.batch(endingOffsets='{"t":{"0":50,"1":-1}}')
    with pytest.raises(PylogOptionError, match="beyond its latest offset 10"):
        reader.partitions()


def test_batch_range_wholly_deleted_is_data_loss(env: Env) -> None:
    fill(env.broker, 0, 10)
    env.broker.delete_records("t", 0, 8)
    reader = env.batch(startingOffsets='{"t":{"0":0,"1":-2}}', endingOffsets='{"t":{"0":5,"1":-1}}')
    with pytest.raises(PylogDataLossError, match="offsets 0 to 7 were deleted"):
        reader.partitions()


def test_batch_start_below_earliest(env: Env) -> None:
    fill(env.broker, 0, 10)
    env.broker.delete_records("t", 0, 4)
    with pytest.raises(PylogDataLossError, match="offsets 0 to 3 were deleted"):
        env.batch(startingOffsets='{"t":{"0":0,"1":-2}}').partitions()
    parts = env.batch(startingOffsets='{"t":{"0":0,"1":-2}}', failOnDataLoss="false").partitions()
    assert ranges(parts) == [("t-0", 4, 10)]


def test_batch_with_nothing_to_read(env: Env) -> None:
    assert env.batch().partitions() == []


# -- DataSource -----------------------------------------------------------------------------------


def test_data_source_schema_name_and_readers() -> None:
    options = {"bootstrap.servers": "h:1", "subscribe": "t", "includeHeaders": "true"}
    source = PylogDataSource(options)
    assert PylogDataSource.name() == "pylog"
    assert source.schema() == source_schema(True)
    assert source.schema().simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert isinstance(source.streamReader(source_schema(True)), PylogStreamReader)
    assert isinstance(source.reader(source_schema(True)), PylogBatchReader)


def test_data_source_rejects_a_user_schema_and_bad_options() -> None:
    source = PylogDataSource({"bootstrap.servers": "h:1", "subscribe": "t"})
    with pytest.raises(PylogOptionError, match=r"fixed schema.*remove \.schema"):
        source.reader(source_schema(True))
    with pytest.raises(PylogOptionError, match="only for batch queries"):
        PylogDataSource({"bootstrap.servers": "h:1", "subscribe": "t", "endingOffsets": "latest"}).streamReader(
            source_schema(False)
        )
    with pytest.raises(PylogOptionError, match="exactly one of"):
        PylogDataSource({"bootstrap.servers": "h:1"}).schema()


def test_register_uses_the_session_registry() -> None:
    registered: list[type] = []

    class Registry:
        def register(self, cls: type) -> None:
            registered.append(cls)

    register(SimpleNamespace(dataSource=Registry()))
    assert registered == [PylogDataSource]


def test_available_now_target_below_the_checkpoint_is_refreshed(env: Env) -> None:
    fill(env.broker, 0, 10)
    reader = env.stream()
    env.broker.lagging_latest[TP("t", 0)] = [4]  # the target is taken from a lagging leader
    reader.prepareForTriggerAvailableNow()
    start = {"t": {"0": 8, "1": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 10, "1": 0}}
