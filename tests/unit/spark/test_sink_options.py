"""Options and columns of the pylog sink: defaults, every error message naming the option or
column and its fix (sink_options.py, writer.sink_columns)."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pyspark_log.spark.sink import Columns
from pyspark_log.spark.sink_options import DEFAULT_TRANSACTION_TIMEOUT_MS, SinkOptions, parse_sink_options
from pyspark_log.spark.specs import PylogOptionError
from pyspark_log.spark.writer import batch_writer, sink_columns, stream_writer

BASE = {"bootstrap.servers": "localhost:9092", "topic": "out"}


def fails(raw: dict[str, str], *parts: str, mode: str = "stream") -> str:
    with pytest.raises(PylogOptionError) as info:
        parse_sink_options(raw, mode)  # type: ignore[arg-type]
    message = str(info.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def test_defaults_for_a_stream() -> None:
    options = parse_sink_options(BASE, "stream")
    assert options == SinkOptions("localhost:9092", "out", None, DEFAULT_TRANSACTION_TIMEOUT_MS, {})
    assert options.transaction_timeout_ms == 900_000


def test_a_batch_write_gets_a_random_prefix_per_write() -> None:
    first = parse_sink_options(BASE, "batch").transactional_id_prefix
    second = parse_sink_options(BASE, "batch").transactional_id_prefix
    assert first is not None
    assert second is not None
    assert first.startswith("pylog-batch-")
    assert first != second


def test_group_id_prefix_starts_every_name_the_sink_derives() -> None:
    batch = parse_sink_options({**BASE, "groupIdPrefix": "team-a"}, "batch")
    assert batch.transactional_id_prefix is not None
    assert batch.transactional_id_prefix.startswith("team-a-batch-")
    stream = parse_sink_options({**BASE, "groupIdPrefix": "team-a"}, "stream")
    assert (stream.transactional_id_prefix, stream.derived_prefix) == (None, "team-a")
    given = parse_sink_options({**BASE, "groupIdPrefix": "team-a", "transactionalIdPrefix": "orders"}, "batch")
    assert given.transactional_id_prefix == "orders"
    fails({**BASE, "groupIdPrefix": " "}, "groupIdPrefix", "is empty or contains whitespace", "ACLs allow")


def test_names_are_case_insensitive_and_both_server_spellings_work() -> None:
    options = parse_sink_options(
        {"KAFKA.BOOTSTRAP.SERVERS": " h:1 ", "TransactionalIdPrefix": "orders", "Topic": "t"}, "stream"
    )
    assert (options.bootstrap_servers, options.transactional_id_prefix, options.topic) == ("h:1", "orders", "t")


def test_producer_settings_pass_through_and_the_sink_keeps_its_own() -> None:
    raw = {
        **BASE,
        "kafka.linger.ms": "20",
        "kafka.compression.type": "zstd",
        "kafka.transaction.timeout.ms": "60000",
        "kafka.acks": "all",
        "checkpointLocation": "/tmp/chk",
    }
    options = parse_sink_options(raw, "stream")
    assert options.transaction_timeout_ms == 60_000
    config = options.producer_config("orders-3")
    assert config["linger.ms"] == "20"
    assert config["compression.type"] == "zstd"
    assert config["transactional.id"] == "orders-3"
    assert config["transaction.timeout.ms"] == "60000"
    assert (config["enable.idempotence"], config["acks"]) == ("true", "all")
    assert config["bootstrap.servers"] == "localhost:9092"
    assert config["batch.size"] == "1048576"  # the sink's default (rows go to the producer in bulk)
    own = parse_sink_options({**BASE, "kafka.batch.size": "65536"}, "stream").producer_config("x")
    assert own["batch.size"] == "65536"
    assert "transactional.id" not in options.admin_config()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"bootstrap.servers": ""}, "bootstrap.servers is not set"),
        ({"kafka.bootstrap.servers": "other:1"}, "disagree"),
        ({"topic": "bad topic"}, "topic ('bad topic') is not a legal topic name"),
        ({"topic": ".."}, "legal topic name"),
        ({"transactionalIdPrefix": "  "}, "transactionalIdPrefix"),
        ({"transactionalIdPrefix": "a b"}, "whitespace"),
        ({"kafka.transactional.id": "x"}, "set transactionalIdPrefix instead"),
        ({"kafka.enable.idempotence": "false"}, "kafka.enable.idempotence ('false') cannot be turned off"),
        ({"kafka.acks": "1"}, "transactions need acks=all"),
        ({"kafka.value.serializer": "x"}, "values are written as given"),
        ({"kafka.transaction.timeout.ms": "soon"}, "kafka.transaction.timeout.ms"),
        ({"kafka.transaction.timeout.ms": "0"}, "must be positive"),
        ({"kafka.linger.ms": "-1"}, "kafka.linger.ms is not a valid producer setting"),
        ({"kafka.no.such.setting": "1"}, "kafka.no.such.setting"),
        ({"kafka.": "1"}, "has no setting name"),
        ({"subscribe": "in"}, "subscribe ('in') is an option of the pylog source, not of the sink"),
        ({"startingOffsets": "earliest"}, "source"),
        ({"transactionalIdPrefx": "p"}, "did you mean transactionalIdPrefix?"),
        ({"path": "/x"}, "path"),
        ({"somethingElse": "1"}, "is not an option of the pylog sink"),
        ({"includeHeaders": "maybe"}, "includeHeaders"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(extra: dict[str, str], expected: str) -> None:
    message = fails({**BASE, **extra}, expected)
    assert ": " in message  # problem: fix


@pytest.mark.parametrize("value", ["true", "false", "TRUE"])
def test_include_headers_is_accepted_as_by_sparks_sink(value: str) -> None:
    assert parse_sink_options({**BASE, "includeHeaders": value}, "stream") == parse_sink_options(BASE, "stream")


def test_a_key_given_twice_with_different_values_fails() -> None:
    fails({**BASE, "TOPIC": "a", "topic": "b"}, "given twice")


def test_options_pickle() -> None:
    options = parse_sink_options({**BASE, "kafka.linger.ms": "1"}, "batch")
    assert pickle.loads(pickle.dumps(options)) == options


# ---------------------------------------------------------------------------------------------
# Columns

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, dtype) for name, dtype in fields])  # type: ignore[arg-type]


def test_all_columns_are_found_and_extra_ones_ignored() -> None:
    s = schema(
        ("other", LongType()),
        ("key", StringType()),
        ("value", BinaryType()),
        ("topic", StringType()),
        ("partition", IntegerType()),
        ("headers", HEADERS),
    )
    no_topic_option = parse_sink_options({"bootstrap.servers": "h:1"}, "stream")
    assert sink_columns(s, no_topic_option) == Columns(value=2, key=1, topic=3, partition=4, headers=5)
    # The topic option overrides the topic column, as in Spark's Kafka sink.
    assert sink_columns(s, parse_sink_options(BASE, "stream")).topic is None


def test_a_timestamp_column_is_the_records_create_time() -> None:
    s = schema(("value", BinaryType()), ("timestamp", TimestampType()))
    assert sink_columns(s, parse_sink_options(BASE, "stream")) == Columns(value=0, timestamp=1)
    with pytest.raises(PylogOptionError, match="column timestamp is bigint"):
        sink_columns(schema(("value", BinaryType()), ("timestamp", LongType())), parse_sink_options(BASE, "stream"))


def test_headers_with_non_nullable_fields_are_accepted() -> None:
    strict = ArrayType(
        StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)]), False
    )
    columns = sink_columns(schema(("value", StringType()), ("headers", strict)), parse_sink_options(BASE, "stream"))
    assert columns.headers == 1


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ((("v", StringType()),), "no value column (columns: v)"),
        ((("Value", StringType()),), "rename Value to value"),
        ((("value", LongType()),), "column value is bigint, but the pylog sink needs string or binary"),
        ((("value", StringType()), ("key", IntegerType())), "column key is int"),
        (
            (("value", StringType()), ("partition", LongType())),
            "column partition is bigint, but the pylog sink needs int",
        ),
        ((("value", StringType()), ("headers", StringType())), "column headers is string"),
        ((("value", StringType()), ("topic", BinaryType())), "column topic is binary"),
    ],
)
def test_bad_columns_name_the_column_and_the_fix(fields: tuple, expected: str) -> None:
    with pytest.raises(PylogOptionError, match=r"e\.g\.") as info:
        sink_columns(schema(*fields), parse_sink_options(BASE, "stream"))
    assert expected in str(info.value)


def test_no_topic_column_and_no_topic_option() -> None:
    with pytest.raises(PylogOptionError, match=r"no output topic: set the topic option"):
        sink_columns(schema(("value", StringType())), parse_sink_options({"bootstrap.servers": "h:1"}, "stream"))


def test_writers_reject_overwrite_and_check_at_creation() -> None:
    s = schema(("value", StringType()))
    with pytest.raises(PylogOptionError, match=r'mode\("append"\)'):
        batch_writer(BASE, s, overwrite=True)
    with pytest.raises(PylogOptionError, match="no value column"):
        stream_writer(BASE, schema(("x", StringType())))
    writer = batch_writer(BASE, s, overwrite=False)
    assert pickle.loads(pickle.dumps(writer)).columns == Columns(value=0)
    assert stream_writer(BASE, s).options.transactional_id_prefix is None
