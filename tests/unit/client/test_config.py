"""Client config under Kafka's key names, given as Python values or strings."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pyspark_log.client.config import ADMIN, CONSUMER, PRODUCER, ConfigDef, parse, parse_host_port
from pyspark_log.client.errors import ConfigError


def test_defaults_are_filled_in() -> None:
    c = parse(PRODUCER, {"bootstrap.servers": "h:1"}, "producer")
    assert c["bootstrap.servers"] == ["h:1"]
    assert c["acks"] == -1
    assert c["batch.size"] == 16384
    assert c["buffer.memory"] == 32 * 1024 * 1024
    assert c["enable.idempotence"] is None
    assert c["compression.type"] == "none"


@pytest.mark.parametrize(("text", "acks"), [("all", -1), ("ALL", -1), ("-1", -1), ("1", 1), (0, 0), ("0", 0)])
def test_acks_values(text: object, acks: int) -> None:
    assert parse(PRODUCER, {"bootstrap.servers": "h", "acks": text}, "producer")["acks"] == acks


def test_strings_are_converted() -> None:
    c = parse(
        PRODUCER,
        {"bootstrap.servers": "a:1, b:2", "linger.ms": "7", "enable.idempotence": "false", "compression.type": "ZSTD"},
        "producer",
    )
    assert c["bootstrap.servers"] == ["a:1", "b:2"]
    assert c["linger.ms"] == 7
    assert c["enable.idempotence"] is False
    assert c["compression.type"] == "zstd"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lingr.ms", 5, "unknown"),
        ("linger.ms", "soon", "integer"),
        ("linger.ms", -1, ">= 0"),
        ("acks", "2", "acks"),
        ("compression.type", "brotli", "one of"),
        ("enable.idempotence", "maybe", "true or false"),
        ("batch.size", True, "integer"),
    ],
)
def test_bad_values_raise_config_error(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(PRODUCER, {"bootstrap.servers": "h", key: value}, "producer")


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        parse(CONSUMER, {}, "consumer")


@pytest.mark.parametrize(("table", "what"), [(PRODUCER, "producer"), (CONSUMER, "consumer"), (ADMIN, "admin")])
def test_serializer_keys_are_accepted_and_ignored(table: Mapping[str, ConfigDef], what: str) -> None:
    """All four (de)serializer keys pass validation under every client type and leave no trace:
    the parsed config equals the one parsed without them."""
    keys = ("key.serializer", "value.serializer", "key.deserializer", "value.deserializer")
    plain = parse(table, {"bootstrap.servers": "h"}, what)
    with_serializers = parse(table, {"bootstrap.servers": "h", **dict.fromkeys(keys, "x.Y")}, what)
    assert with_serializers == plain
    assert not set(keys) & set(with_serializers)


def test_consumer_and_admin_tables() -> None:
    c = parse(CONSUMER, {"bootstrap.servers": "h", "isolation.level": "read_committed"}, "consumer")
    assert c["isolation.level"] == "read_committed"
    assert c["auto.offset.reset"] == "latest"
    admin = parse(ADMIN, {"bootstrap.servers": "h", "acks": 1, "fetch.min.bytes": 1}, "admin")
    assert "acks" not in admin  # another client's key: ignored, not an error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:9092", ("localhost", 9092)),
        ("PLAINTEXT://10.0.0.1:19092", ("10.0.0.1", 19092)),
        ("[::1]:9093", ("::1", 9093)),
        ("broker", ("broker", 9092)),
    ],
)
def test_parse_host_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(text) == expected


@pytest.mark.parametrize("text", ["host:notaport", ":9092", "h:70000"])
def test_parse_host_port_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_host_port(text)
