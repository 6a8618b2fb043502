"""Pure parsing of the CLI's values: k=v, headers, properties files, timestamps, separators."""

from __future__ import annotations

import argparse

import pytest

from pyspark_log.cli.errors import UsageError
from pyspark_log.cli.parsing import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    format_bytes,
    format_timestamp_ms,
    non_negative_int,
    parse_headers,
    parse_kv,
    parse_kv_list,
    parse_properties,
    parse_replica_assignment,
    parse_time_spec,
    parse_timestamp_ms,
    positive_int,
    unescape_separator,
)

BASE_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def test_replica_assignment_lists_partitions_then_brokers() -> None:
    assert parse_replica_assignment("4:5,5:4,4") == [[4, 5], [5, 4], [4]]
    for bad in ("", "1,", "1:a", "1;2"):
        with pytest.raises(UsageError, match="--replica-assignment"):
            parse_replica_assignment(bad)


def test_kv_splits_at_the_first_equals_and_allows_empty_values() -> None:
    assert parse_kv("retention.ms=1000") == ("retention.ms", "1000")
    assert parse_kv("a=b=c") == ("a", "b=c")
    assert parse_kv(" k =") == ("k", "")


@pytest.mark.parametrize("text", ["novalue", "=x", "", " =1"])
def test_kv_without_key_or_equals_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="must look like key=value"):
        parse_kv(text)


def test_kv_list_keeps_order_and_the_last_value_wins() -> None:
    assert parse_kv_list(["b=1", "a=2", "b=3"]) == {"b": "3", "a": "2"}
    assert list(parse_kv_list(["b=1", "a=2"])) == ["b", "a"]
    assert parse_kv_list(None) == {}


def test_headers_keep_repeats_and_encode_utf8() -> None:
    assert parse_headers(["h=1", "h=2", "ü=ö"]) == [("h", b"1"), ("h", b"2"), ("ü", "ö".encode())]
    with pytest.raises(UsageError, match="header"):
        parse_headers(["nope"])


def test_properties_file() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "bootstrap.servers = a:1,b:2\n"
        "client.id: me\n"
        "sasl.jaas.config=x=y;\n"
        "long.value=one,\\\n    two\n"
    )
    assert parse_properties(text) == {
        "bootstrap.servers": "a:1,b:2",
        "client.id": "me",
        "sasl.jaas.config": "x=y;",
        "long.value": "one,two",
    }


def test_properties_line_without_separator_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="line 2"):
        parse_properties("a=1\njunk\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        (str(BASE_MS), BASE_MS),
        ("2023-11-14T22:13:20Z", BASE_MS),
        ("2023-11-14T22:13:20.250Z", BASE_MS + 250),
        ("2023-11-14T22:13:20", BASE_MS),  # no zone: UTC, as Kafka's --to-datetime
        ("2023-11-15T00:13:20+02:00", BASE_MS),
        ("2023-11-14", BASE_MS - (22 * 3600 + 13 * 60 + 20) * 1000),
        (" 2023-11-14T22:13:20Z ", BASE_MS),
    ],
)
def test_timestamps(text: str, expected: int) -> None:
    assert parse_timestamp_ms(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "-5", "1969-12-31T23:59:59Z", "2023-13-01", ""])
def test_bad_timestamps_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_timestamp_ms(text)


def test_time_specs_name_listoffsets_special_values() -> None:
    assert parse_time_spec("earliest") == EARLIEST == -2
    assert parse_time_spec("LATEST") == LATEST == -1
    assert parse_time_spec("max-timestamp") == MAX_TIMESTAMP == -3
    assert parse_time_spec("2023-11-14T22:13:20Z") == BASE_MS


def test_format_timestamp_round_trips_through_parse() -> None:
    assert format_timestamp_ms(BASE_MS + 5) == "2023-11-14T22:13:20.005Z"
    assert parse_timestamp_ms(format_timestamp_ms(BASE_MS + 5)) == BASE_MS + 5
    assert format_timestamp_ms(-1) == "-"


def test_separator_escapes() -> None:
    assert unescape_separator("\\t") == "\t"
    assert unescape_separator(",") == ","
    assert unescape_separator("a\\\\b\\n") == "a\\b\n"
    assert unescape_separator("\\x") == "\\x"
    with pytest.raises(UsageError):
        unescape_separator("")


def test_format_bytes() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"


def test_int_types_for_argparse() -> None:
    assert non_negative_int("0") == 0
    assert positive_int("7") == 7
    for fn, text in ((non_negative_int, "-1"), (positive_int, "0"), (positive_int, "x")):
        with pytest.raises(argparse.ArgumentTypeError):
            fn(text)
