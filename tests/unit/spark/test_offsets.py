"""Checkpoint offset JSON and resolution of starting/ending offsets (offsets.py)."""

from __future__ import annotations

import json

import pytest

from pyspark_log.spark.access import TopicPartition
from pyspark_log.spark.offsets import (
    CheckpointOffsetError,
    check_assigned_exist,
    check_batch_bounds,
    discover_partitions,
    from_checkpoint,
    resolve_offsets,
    to_checkpoint,
)
from pyspark_log.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    PylogOptionError,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)
from tests.unit.spark.fake_broker import FakeBroker

TP = TopicPartition


@pytest.fixture
def broker() -> FakeBroker:
    b = FakeBroker()
    b.create_topic("t", 2)
    b.produce("t", 0, [b"a", b"b", b"c"], timestamp=100)  # offsets 0-2, ts 100-102
    b.produce("t", 1, [b"x"], timestamp=500)  # offset 0, ts 500
    return b


ALL = frozenset({TP("t", 0), TP("t", 1)})


def test_checkpoint_round_trip_is_sorted_and_stable() -> None:
    offsets = {TP("b", 10): 7, TP("a", 2): 0, TP("b", 9): 3, TP("a", 10): 1}
    data = to_checkpoint(offsets)
    assert json.dumps(data) == '{"a": {"2": 0, "10": 1}, "b": {"9": 3, "10": 7}}'
    assert from_checkpoint(json.loads(json.dumps(data))) == offsets
    assert to_checkpoint({}) == {}
    assert from_checkpoint({}) == {}


@pytest.mark.parametrize(
    "bad",
    [[], "x", {"t": [1]}, {"t": {"p": 1}}, {"t": {"0": -1}}, {"t": {"0": "1"}}, {"t": {"0": True}}, {1: {"0": 1}}],
)
def test_malformed_checkpoint_offsets_are_rejected(bad: object) -> None:
    with pytest.raises(CheckpointOffsetError):
        from_checkpoint(bad)


def test_discover_partitions_by_subscription(broker: FakeBroker) -> None:
    broker.create_topic("u", 1)
    assert discover_partitions(Subscribe(("t", "missing")), broker) == ALL
    assert discover_partitions(SubscribePattern("[tu]"), broker) == ALL | {TP("u", 0)}
    assert discover_partitions(Assign((TP("t", 1), TP("t", 5))), broker) == {TP("t", 1)}


def test_assigned_partitions_must_exist() -> None:
    check_assigned_exist(Subscribe(("t",)), set())
    with pytest.raises(PylogOptionError, match=r"assign names partitions that do not exist on the broker \(t-5\)"):
        check_assigned_exist(Assign((TP("t", 1), TP("t", 5))), {TP("t", 1)})


def test_earliest_and_latest(broker: FakeBroker) -> None:
    broker.delete_records("t", 0, 1)
    assert resolve_offsets(EarliestOffsets(), ALL, broker, "read_committed", is_starting=True) == {
        TP("t", 0): 1,
        TP("t", 1): 0,
    }
    assert resolve_offsets(LatestOffsets(), ALL, broker, "read_committed", is_starting=True) == {
        TP("t", 0): 3,
        TP("t", 1): 1,
    }


def test_latest_respects_isolation_level(broker: FakeBroker) -> None:
    broker.produce("t", 1, [b"open"], producer_id=7, transactional=True)  # offset 1, transaction open
    committed = resolve_offsets(LatestOffsets(), ALL, broker, "read_committed", is_starting=True)
    uncommitted = resolve_offsets(LatestOffsets(), ALL, broker, "read_uncommitted", is_starting=True)
    assert committed[TP("t", 1)] == 1
    assert uncommitted[TP("t", 1)] == 2


def test_specific_offsets_resolve_sentinels(broker: FakeBroker) -> None:
    broker.delete_records("t", 1, 0)
    spec = SpecificOffsets({TP("t", 0): -1, TP("t", 1): -2})
    assert resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True) == {TP("t", 0): 3, TP("t", 1): 0}
    spec = SpecificOffsets({TP("t", 0): 2, TP("t", 1): 99})  # out of range is the planner's business
    assert resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True) == {TP("t", 0): 2, TP("t", 1): 99}


def test_specific_offsets_must_cover_exactly_the_partitions(broker: FakeBroker) -> None:
    with pytest.raises(PylogOptionError, match=r"startingOffsets does not name every partition.*missing: t-1.*-2 for"):
        resolve_offsets(SpecificOffsets({TP("t", 0): 1}), ALL, broker, "read_committed", is_starting=True)
    spec = SpecificOffsets({TP("t", 0): 1, TP("t", 1): 1, TP("t", 7): 1})
    with pytest.raises(PylogOptionError, match=r"startingOffsets names partitions that do not exist.*\(t-7\)"):
        resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True)


def test_partitions_that_vanish_while_resolving_are_left_out(broker: FakeBroker) -> None:
    gone = ALL | {TP("gone", 0)}
    assert TP("gone", 0) not in resolve_offsets(EarliestOffsets(), gone, broker, "read_committed", is_starting=True)


def test_global_timestamp(broker: FakeBroker) -> None:
    spec = GlobalTimestamp(101, "latest")
    assert resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True) == {TP("t", 0): 1, TP("t", 1): 0}


def test_timestamp_without_a_match_errors_by_default(broker: FakeBroker) -> None:
    spec = GlobalTimestamp(200, "error")
    with pytest.raises(PylogOptionError) as info:
        resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True)
    message = str(info.value)
    assert "startingTimestamp: no record in t-0 has a timestamp at or after 200" in message
    assert "startingOffsetsByTimestampStrategy=latest" in message


def test_timestamp_without_a_match_uses_latest_with_the_strategy(broker: FakeBroker) -> None:
    spec = SpecificTimestamps({TP("t", 0): 200, TP("t", 1): 1}, "latest")
    assert resolve_offsets(spec, ALL, broker, "read_committed", is_starting=True) == {TP("t", 0): 3, TP("t", 1): 0}


def test_ending_timestamps_without_a_match_mean_latest(broker: FakeBroker) -> None:
    spec = GlobalTimestamp(10_000, "error", "endingTimestamp")
    assert resolve_offsets(spec, ALL, broker, "read_committed", is_starting=False) == {TP("t", 0): 3, TP("t", 1): 1}


def test_by_timestamp_must_cover_the_partitions(broker: FakeBroker) -> None:
    with pytest.raises(PylogOptionError, match="startingOffsetsByTimestamp does not name every partition"):
        resolve_offsets(SpecificTimestamps({TP("t", 0): 1}), ALL, broker, "read_committed", is_starting=True)


def test_batch_end_before_start_or_beyond_latest_is_an_option_error() -> None:
    check_batch_bounds({TP("t", 0): 3}, {TP("t", 0): 3}, {TP("t", 0): 3}, "endingOffsets")
    with pytest.raises(PylogOptionError, match=r"endingOffsets resolves to 2 for t-0, before the starting offset 5"):
        check_batch_bounds({TP("t", 0): 5}, {TP("t", 0): 2}, {TP("t", 0): 9}, "endingOffsets")
    with pytest.raises(PylogOptionError, match=r"resolves to 12 for t-0, beyond its latest offset 9: use -1"):
        check_batch_bounds({TP("t", 0): 5}, {TP("t", 0): 12}, {TP("t", 0): 9}, "endingOffsets")
