"""``pylog configs``: kafka-configs' entity options and config lists."""

from __future__ import annotations

import pytest

from pyspark_log.cli.configs import describe_entity, entity_spec, parse_quota_ops
from pyspark_log.cli.errors import UsageError


def test_entity_types_take_the_name_or_default_that_follows_them():
    parts = [("type", "users"), ("name", "alice"), ("type", "clients"), ("default", [])]
    assert entity_spec(parts) == [("user", "alice", True), ("client-id", None, True)]
    assert entity_spec([("type", "clients")]) == [("client-id", None, False)]


def test_entity_option_errors_name_the_fix():
    with pytest.raises(UsageError, match="must follow an --entity-type"):
        entity_spec([("name", "x")])
    with pytest.raises(UsageError, match="entity-type users"):
        entity_spec([])
    with pytest.raises(UsageError, match="once"):
        entity_spec([("type", "clients"), ("type", "clients")])
    with pytest.raises(UsageError, match="must follow"):
        entity_spec([("type", "clients"), ("name", "a"), ("name", "b")])


def test_add_and_delete_config_lists():
    ops = parse_quota_ops(["producer_byte_rate=1024,consumer_byte_rate=2048"], ["request_percentage"])
    assert ops == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0, "request_percentage": None}
    with pytest.raises(UsageError, match="key=number"):
        parse_quota_ops(["producer_byte_rate"], None)


def test_kafka_configs_wording():
    assert describe_entity([("client-id", "loader")]) == "client-id 'loader'"
    assert describe_entity([("client-id", None), ("user", "alice")]) == "user-principal 'alice', the default client-id"
