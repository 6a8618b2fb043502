"""Options of format("pylog"): names, defaults, precedence and every error message (options.py)."""

from __future__ import annotations

import logging

import pytest

from pyspark_log.spark.access import TopicPartition
from pyspark_log.spark.options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    PylogOptionError,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_duration_ms,
    parse_options,
)

TP = TopicPartition

BASE = {"bootstrap.servers": "localhost:9092", "subscribe": "t"}


def opts(**extra: str) -> dict[str, str]:
    return {**BASE, **extra}


def fails(raw: dict[str, str], mode: str | None = "stream", *parts: str) -> str:
    with pytest.raises(PylogOptionError) as info:
        parse_options(raw, mode)  # type: ignore[arg-type]
    message = str(info.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


# -- defaults and case --------------------------------------------------------------------------


def test_stream_defaults_mirror_the_connector() -> None:
    o = parse_options(BASE, "stream")
    assert o.bootstrap_servers == "localhost:9092"
    assert o.subscription == Subscribe(("t",))
    assert o.starting == LatestOffsets("startingOffsets")
    assert o.ending is None
    assert o.fail_on_data_loss is True
    assert o.max_offsets_per_trigger is None
    assert o.min_offsets_per_trigger is None
    assert o.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 15 * 60 * 1000
    assert o.min_partitions is None
    assert o.max_records_per_partition is None
    assert o.include_headers is False
    assert o.isolation_level == "read_committed"
    assert o.group_id is None


def test_batch_defaults_read_earliest_to_latest() -> None:
    o = parse_options(BASE, "batch")
    assert isinstance(o.starting, EarliestOffsets)
    assert o.ending == LatestOffsets("endingOffsets")


def test_keys_are_case_insensitive() -> None:
    o = parse_options(
        {"BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t.*", "MAXOFFSETSPERTRIGGER": "10", "includeheaders": "TRUE"},
        "stream",
    )
    assert o.subscription == SubscribePattern("t.*")
    assert o.max_offsets_per_trigger == 10
    assert o.include_headers is True


def test_pyspark_case_insensitive_dict_is_accepted() -> None:
    from pyspark.sql.datasource import CaseInsensitiveDict

    raw = CaseInsensitiveDict({"Bootstrap.Servers": "h:1", "Assign": '{"t":[1,0]}', "startingOffsets": "earliest"})
    o = parse_options(raw, "stream")
    assert o.subscription == Assign((TP("t", 0), TP("t", 1)))
    assert isinstance(o.starting, EarliestOffsets)


def test_same_key_twice_with_different_values_is_an_error() -> None:
    fails({**BASE, "minPartitions": "2", "MINPARTITIONS": "3"}, "stream", "given twice")


# -- servers and subscription -------------------------------------------------------------------


def test_kafka_prefixed_bootstrap_servers_is_accepted() -> None:
    o = parse_options({"kafka.bootstrap.servers": "h:9", "subscribe": "t"}, "stream")
    assert o.bootstrap_servers == "h:9"
    assert "bootstrap.servers" not in o.client_config


def test_missing_bootstrap_servers() -> None:
    fails({"subscribe": "t"}, "stream", "bootstrap.servers is not set", "localhost:9092")


def test_conflicting_bootstrap_spellings() -> None:
    fails(opts(**{"kafka.bootstrap.servers": "other:1"}), "stream", "bootstrap.servers", "other:1", "give only one")


@pytest.mark.parametrize(
    "raw",
    [{"bootstrap.servers": "h:1"}, {**BASE, "subscribePattern": "x"}, {**BASE, "assign": '{"t":[0]}'}],
)
def test_exactly_one_strategy(raw: dict[str, str]) -> None:
    fails(raw, "stream", "exactly one of assign, subscribe, subscribePattern")


def test_subscribe_trims_and_dedupes_topics() -> None:
    o = parse_options({**BASE, "subscribe": " a, b ,,a "}, "stream")
    assert o.subscription == Subscribe(("a", "b"))


def test_subscribe_without_topics() -> None:
    fails({**BASE, "subscribe": " , "}, "stream", "subscribe (' , ') names no topics", "comma-separated")


def test_pattern_must_compile_and_matches_whole_names() -> None:
    fails(
        {"bootstrap.servers": "h:1", "subscribePattern": "(a"},
        "stream",
        "subscribePattern ('(a')",
        "regular expression",
    )
    pattern = SubscribePattern("logs-.*")
    assert pattern.matches("logs-a")
    assert not pattern.matches("xlogs-a")
    assert not pattern.matches("old")
    assert pattern.select({"logs-1": 2, "other": 1}) == {TP("logs-1", 0), TP("logs-1", 1)}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("t", "not valid JSON"),
        ("{}", "names no partitions"),
        ('{"t": []}', "no partition list"),
        ('{"t": [-1]}', "partitions are integers >= 0"),
        ('{"t": ["0"]}', "partitions are integers >= 0"),
    ],
)
def test_assign_json_errors(value: str, problem: str) -> None:
    fails({"bootstrap.servers": "h:1", "assign": value}, "stream", "assign", problem)


def test_assign_selects_only_existing_partitions() -> None:
    assign = Assign((TP("t", 0), TP("t", 3)))
    assert assign.select({"t": 2}) == {TP("t", 0)}


# -- starting / ending ----------------------------------------------------------------------------


def test_starting_offsets_forms() -> None:
    assert isinstance(parse_options(opts(startingOffsets="EARLIEST"), "stream").starting, EarliestOffsets)
    spec = parse_options(opts(startingOffsets='{"t":{"0":5,"1":-2,"2":-1}}'), "stream").starting
    assert spec == SpecificOffsets({TP("t", 0): 5, TP("t", 1): -2, TP("t", 2): -1}, "startingOffsets")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("newest", "is not earliest, latest or JSON"),
        ('{"t":{"0":-3}}', "gives -3 for t-0"),
        ('{"t":{"x":1}}', "names partition 'x'"),
        ('{"t":{"0":"5"}}', "gives '5' for t-0"),
        ('{"t":[0]}', "no partition object"),
    ],
)
def test_starting_offsets_errors(value: str, problem: str) -> None:
    fails(opts(startingOffsets=value), "stream", "startingOffsets", problem)


def test_batch_rejects_latest_start_and_earliest_end() -> None:
    fails(opts(startingOffsets="latest"), "batch", "startingOffsets ('latest') is not allowed in a batch query")
    fails(opts(startingOffsets='{"t":{"0":-1}}'), "batch", "gives -1 (latest) for t-0", "use -2")
    fails(opts(endingOffsets="earliest"), "batch", "endingOffsets ('earliest') is not allowed", "use latest")
    fails(opts(endingOffsets='{"t":{"0":-2}}'), "batch", "gives -2 (earliest) for t-0", "use -1")
    fails(opts(endingOffsets='{"t":{"0":-3}}'), "batch", "endingOffsets", "gives -3")


def test_batch_ending_offsets_json() -> None:
    o = parse_options(opts(endingOffsets='{"t":{"0":-1,"1":7}}'), "batch")
    assert o.ending == SpecificOffsets({TP("t", 0): -1, TP("t", 1): 7}, "endingOffsets")


@pytest.mark.parametrize("key", ["endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"])
def test_ending_options_are_batch_only(key: str) -> None:
    fails(opts(**{key: "1"}), "stream", key, "only for batch queries", "remove it")


def test_starting_precedence_timestamp_then_by_timestamp_then_offsets(caplog: pytest.LogCaptureFixture) -> None:
    by_ts = '{"t":{"0":100}}'
    with caplog.at_level(logging.WARNING):
        o = parse_options(
            opts(startingTimestamp="50", startingOffsetsByTimestamp=by_ts, startingOffsets="earliest"), "stream"
        )
    assert o.starting == GlobalTimestamp(50, "error", "startingTimestamp")
    assert "startingOffsetsByTimestamp is ignored" in caplog.text
    assert "startingOffsets is ignored" in caplog.text
    o = parse_options(opts(startingOffsetsByTimestamp=by_ts, startingOffsets="earliest"), "stream")
    assert o.starting == SpecificTimestamps({TP("t", 0): 100}, "error", "startingOffsetsByTimestamp")


def test_ending_precedence_and_timestamp_values() -> None:
    o = parse_options(opts(endingTimestamp="99", endingOffsets="latest"), "batch")
    assert o.ending == GlobalTimestamp(99, "error", "endingTimestamp")
    fails(opts(startingTimestamp="yesterday"), "stream", "startingTimestamp ('yesterday') is not a whole number")
    fails(opts(startingTimestamp="-5"), "stream", "startingTimestamp ('-5') is negative")
    fails(opts(startingOffsetsByTimestamp='{"t":{"0":-1}}'), "stream", "gives -1 for t-0", "ms since the epoch")


def test_by_timestamp_strategy() -> None:
    o = parse_options(opts(startingTimestamp="5", startingOffsetsByTimestampStrategy="LATEST"), "stream")
    assert isinstance(o.starting, GlobalTimestamp)
    assert o.starting.strategy == "latest"
    fails(
        opts(startingTimestamp="5", startingOffsetsByTimestampStrategy="skip"),
        "stream",
        "startingOffsetsByTimestampStrategy ('skip') is not a strategy",
        "use error or latest",
    )


def test_strategy_without_timestamps_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_options(opts(startingOffsetsByTimestampStrategy="latest"), "stream")
    assert "has no effect" in caplog.text


def test_offsets_for_topics_not_read_are_rejected() -> None:
    fails(opts(startingOffsets='{"other":{"0":1}}'), "stream", "names topic 'other'", "not subscribed")
    pattern = {"bootstrap.servers": "h:1", "subscribePattern": "a.*", "startingOffsets": '{"b":{"0":1}}'}
    fails(pattern, "stream", "does not match subscribePattern 'a.*'")
    assign = {"bootstrap.servers": "h:1", "assign": '{"t":[0,1]}', "startingOffsets": '{"t":{"0":1,"2":3}}'}
    fails(assign, "stream", "exactly the assigned partitions", "missing: ['t-1']", "not assigned: ['t-2']")


# -- numbers, booleans, durations ----------------------------------------------------------------


def test_min_offsets_larger_than_max_is_an_error_with_the_fix() -> None:
    message = fails(opts(minOffsetsPerTrigger="500", maxOffsetsPerTrigger="100"), "stream")
    assert message == (
        "minOffsetsPerTrigger (500) is larger than maxOffsetsPerTrigger (100): "
        "lower minOffsetsPerTrigger or raise maxOffsetsPerTrigger"
    )


@pytest.mark.parametrize(
    "key", ["maxOffsetsPerTrigger", "minOffsetsPerTrigger", "minPartitions", "maxRecordsPerPartition"]
)
@pytest.mark.parametrize(
    ("value", "problem"), [("0", "must be positive"), ("-4", "must be positive"), ("1e3", "not a whole")]
)
def test_positive_integers(key: str, value: str, problem: str) -> None:
    fails(opts(**{key: value}), "stream", f"{key} ({value!r})", problem)


def test_limits_are_parsed() -> None:
    o = parse_options(
        opts(
            maxOffsetsPerTrigger="100",
            minOffsetsPerTrigger="10",
            maxTriggerDelay="30s",
            minPartitions="8",
            maxRecordsPerPartition="1000",
        ),
        "stream",
    )
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 30_000)
    assert (o.min_partitions, o.max_records_per_partition) == (8, 1000)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 900_000),
        ("30s", 30_000),
        ("1h", 3_600_000),
        ("500", 500),
        ("250ms", 250),
        ("2d", 172_800_000),
        (" 10 min ", 600_000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms("maxtriggerdelay", text) == ms


@pytest.mark.parametrize("text", ["", "-1s", "soon", "1.5h", "3w"])
def test_bad_durations(text: str) -> None:
    fails(
        opts(maxTriggerDelay=text, minOffsetsPerTrigger="1"), "stream", "maxTriggerDelay", "is not a duration", '"15m"'
    )


def test_max_trigger_delay_without_min_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_options(opts(maxTriggerDelay="1m"), "stream")
    assert "maxTriggerDelay has no effect without minOffsetsPerTrigger" in caplog.text


def test_stream_limits_in_batch_queries_only_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_options(opts(maxOffsetsPerTrigger="5"), "batch")
    assert "maxOffsetsPerTrigger is ignored in batch queries" in caplog.text


@pytest.mark.parametrize(
    ("key", "field"), [("failOnDataLoss", "fail_on_data_loss"), ("includeHeaders", "include_headers")]
)
def test_booleans(key: str, field: str) -> None:
    assert getattr(parse_options(opts(**{key: "False"}), "stream"), field) is False
    fails(opts(**{key: "yes"}), "stream", f"{key} ('yes') is not a boolean", "use true or false")


# -- isolation, groups, passthrough ---------------------------------------------------------------


def test_isolation_level() -> None:
    assert parse_options(opts(isolationLevel="READ_UNCOMMITTED"), "stream").isolation_level == "read_uncommitted"
    assert (
        parse_options(opts(**{"kafka.isolation.level": "read_uncommitted"}), "stream").isolation_level
        == "read_uncommitted"
    )
    fails(
        opts(isolationLevel="serializable"),
        "stream",
        "isolationLevel ('serializable')",
        "read_committed or read_uncommitted",
    )
    fails(opts(isolationLevel="read_committed", **{"kafka.isolation.level": "read_uncommitted"}), "stream", "disagree")


def test_group_id_and_its_kafka_alias() -> None:
    assert parse_options(opts(groupId="g"), "stream").group_id == "g"
    o = parse_options(opts(**{"kafka.group.id": "g2"}), "stream")
    assert o.group_id == "g2"
    assert "group.id" not in o.client_config
    fails(opts(groupId=" "), "stream", "groupId (' ') is empty")


def test_client_settings_pass_through() -> None:
    raw = {
        "kafka.client.id": "me",
        "fetch.max.wait.ms": "100",
        "kafka.max.partition.fetch.bytes": "2048",
        "kafkaConsumer.pollTimeoutMs": "5000",
        "fetchOffset.numRetries": "5",
        "fetchOffset.retryIntervalMs": "0",
    }
    o = parse_options(opts(**raw), "stream")
    assert o.client_config == {
        "client.id": "me",
        "fetch.max.wait.ms": "100",
        "max.partition.fetch.bytes": "2048",
        "fetch.timeout.ms": "5000",
    }
    assert o.max_partition_fetch_bytes == 2048
    assert (o.fetch_offset_retries, o.fetch_offset_retry_interval_ms) == (5, 0)


@pytest.mark.parametrize(
    ("key", "fix"),
    [
        ("kafka.auto.offset.reset", "set startingOffsets"),
        ("kafka.key.deserializer", "always returned as binary"),
        ("kafka.value.deserializer", "always returned as binary"),
        ("kafka.enable.auto.commit", "set groupId"),
        ("kafka.interceptor.classes", "not supported"),
    ],
)
def test_unsupported_kafka_settings(key: str, fix: str) -> None:
    fails(opts(**{key: "x"}), "stream", key, "is not supported", fix)


def test_unknown_options_suggest_the_right_name() -> None:
    fails(
        opts(maxOffsetPerTrigger="5"),
        "stream",
        "maxoffsetpertrigger ('5') is not an option",
        "did you mean maxOffsetsPerTrigger?",
    )
    fails(opts(colour="blue"), "stream", "colour ('blue') is not an option", "kafka. prefix")
    fails(opts(path="/tmp/x"), "stream", "path ('/tmp/x') is not used by pylog")
    fails(opts(**{"kafka.": "x"}), "stream", "has no setting name")


def test_group_id_prefix_is_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse_options(opts(groupIdPrefix="p"), "stream")
    assert "groupIdPrefix is ignored" in caplog.text


def test_schema_time_validation_skips_mode_rules() -> None:
    o = parse_options(opts(endingOffsets="latest", startingOffsets="latest"), None)
    assert o.ending is None
