"""DescribeConfigs of a broker resource: Kafka's ``config_type`` per key and Java's rendering of
DOUBLE values (differences found by tests/differential against Kafka 4.1.1)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.api.configs import BOOLEAN, DOUBLE, INT, LIST, LONG, STRING, describe_broker_configs, java_double
from broker.config import BrokerConfig


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.7976931348623157e308, "1.7976931348623157E308"),  # log.cleaner.io.max.bytes.per.second
        (0.9, "0.9"),
        (0.5, "0.5"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (1e-4, "1.0E-4"),
        (0.00123, "0.00123"),
        (-3e20, "-3.0E20"),
    ],
)
def test_doubles_are_written_as_java_double_to_string(value: float, text: str) -> None:
    assert java_double(value) == text


def test_broker_configs_carry_kafka_config_types() -> None:
    broker = SimpleNamespace(
        config=BrokerConfig.from_mapping({"node.id": "1"}, warn_unknown=False),
        image=lambda: SimpleNamespace(broker_configs={}),
    )
    configs = {c["name"]: c for c in describe_broker_configs(broker)}  # type: ignore[arg-type]
    expected = {
        "message.max.bytes": INT,
        "log.retention.bytes": LONG,
        "auto.create.topics.enable": BOOLEAN,
        "log.cleaner.min.cleanable.ratio": DOUBLE,
        "log.cleanup.policy": LIST,
        "listeners": STRING,
        "offsets.topic.replication.factor": 4,  # SHORT
    }
    assert {name: configs[name]["config_type"] for name in expected} == expected
    assert configs["log.cleaner.io.max.bytes.per.second"]["value"] == "1.7976931348623157E308"
    assert all(c["config_type"] != 0 for c in configs.values())


def test_quorum_timeouts_are_listed_under_kafka_names() -> None:
    raw = {"node.id": "1", "quorum.fetch.timeout.ms": "3000"}
    broker = SimpleNamespace(
        config=BrokerConfig.from_mapping(raw, warn_unknown=False), image=lambda: SimpleNamespace(broker_configs={})
    )
    configs = {c["name"]: c for c in describe_broker_configs(broker)}  # type: ignore[arg-type]
    assert configs["controller.quorum.election.timeout.ms"]["value"] == "1000"
    assert configs["controller.quorum.election.timeout.ms"]["config_source"] == 5  # DEFAULT_CONFIG
    assert configs["controller.quorum.fetch.timeout.ms"]["value"] == "3000"
    assert configs["controller.quorum.fetch.timeout.ms"]["config_source"] == 4  # STATIC_BROKER_CONFIG
    assert configs["quorum.fetch.timeout.ms"]["value"] == "3000"  # the spelling given
    assert "quorum.election.timeout.ms" not in configs
    assert "quorum.voters" not in configs
