"""The pure parts of KIP-226 dynamic broker configs (broker.dynamic_config): which changes are
refused with Kafka 4.1.1's messages, the precedence of the levels, the operations, and the
application of the effective values to a BrokerConfig."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.config import BrokerConfig
from broker.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    LIVE_KEYS,
    STATIC_BROKER_CONFIG,
    DynamicBrokerConfig,
    DynamicConfigError,
    apply_operations,
    check_changes,
    check_resource_name,
    effective,
    replace_all,
    source_of,
    synonyms,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import BROKER_RESOURCE, ConfigRecord
from broker.metadata.replay import apply_broker_config


@pytest.mark.parametrize(
    ("resource", "changes", "message"),
    [
        ("1", {"node.id": "5"}, "Cannot update these configs dynamically: Set(node.id)"),
        ("1", {"log.dirs": "/x", "message.max.bytes": "5"}, "Cannot update these configs dynamically: Set(log.dirs)"),
        ("1", {"log.retention.hours": "5"}, "Cannot update these configs dynamically: Set(log.retention.hours)"),
        ("", {"listeners": "PLAINTEXT://:1"},
         "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"),
        ("1", {"ssl.keystore.location": "/x", "ssl.truststore.type": "JKS"},
         "These security configs can be dynamically updated only per-listener using the listener prefix: "
         "HashSet(ssl.keystore.location, ssl.truststore.type)"),
        ("", {"ssl.cipher.suites": "x", "sasl.jaas.config": "x"},
         "Cannot update these configs at default cluster level, broker id must be specified: "
         "Set(sasl.jaas.config, ssl.cipher.suites)"),
        ("1", {"message.max.bytes": "abc"},
         "Invalid value abc for configuration message.max.bytes: Not a number of type INT"),
        ("1", {"message.max.bytes": "-5"},
         "Invalid value -5 for configuration message.max.bytes: Value must be at least 0"),
        ("1", {"log.cleaner.dedupe.buffer.size": "100"}, "config log.cleaner.dedupe.buffer.size=100 is too small"),
        ("", {"leader.replication.throttled.rate": "x"},
         "Invalid value x for configuration leader.replication.throttled.rate: Not a number of type LONG"),
        ("1", {"follower.replication.throttled.rate": "-1"},
         "Invalid value -1 for configuration follower.replication.throttled.rate: Value must be at least 0"),
        ("1", {"log.cleaner.threads": "0"},
         "Invalid value 0 for configuration log.cleaner.threads: Value must be at least 1"),
    ],
)  # fmt: skip
def test_refused_changes_carry_kafkas_messages(resource: str, changes: dict[str, str], message: str) -> None:
    with pytest.raises(DynamicConfigError) as refused:
        check_changes(resource, changes, {})
    assert str(refused.value) == message


def test_accepted_changes() -> None:
    check_changes("1", {"message.max.bytes": "5000", "log.cleaner.threads": "2", "no.such.key": "1"}, {})
    check_changes("", {"log.retention.ms": "1000", "num.replica.fetchers": "2"}, {})
    check_changes("1", {"node.id": None, "message.max.bytes": None}, {})  # deleting is never refused


def test_resource_names() -> None:
    assert check_resource_name("", 1, forwarded=False) is None
    assert check_resource_name("1", 1, forwarded=False) is None
    assert check_resource_name("7", 1, forwarded=False) == "Unexpected broker id, expected 1, but received 7"
    assert check_resource_name("7", 1, forwarded=True) is None  # another broker forwarded it to the controller
    assert check_resource_name("x", 1, forwarded=True) == "Node id must be an integer, but it is: x"


def test_precedence_per_broker_over_default_over_static() -> None:
    static = {"message.max.bytes": "500000", "node.id": "1"}
    levels = {"": {"message.max.bytes": "3000", "log.retention.ms": "9"}, "1": {"message.max.bytes": "2000"}}
    merged = effective(static, levels, 1)
    assert merged["message.max.bytes"] == "2000"
    assert merged["log.retention.ms"] == "9"
    assert effective(static, levels, 2)["message.max.bytes"] == "3000"  # another broker: the default
    assert effective(static, {}, 1)["message.max.bytes"] == "500000"
    assert source_of("message.max.bytes", static, levels, 1) == DYNAMIC_BROKER_CONFIG
    assert source_of("message.max.bytes", static, levels, 2) == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert source_of("message.max.bytes", static, {}, 1) == STATIC_BROKER_CONFIG
    assert source_of("log.segment.bytes", static, levels, 1) == DEFAULT_CONFIG
    assert [(s["value"], s["source"]) for s in synonyms("message.max.bytes", static, levels, 1, "1048588")] == [
        ("2000", 2), ("3000", 3), ("500000", 4), ("1048588", 5),
    ]  # fmt: skip


def test_operations() -> None:
    ops = [
        SimpleNamespace(name="log.cleanup.policy", config_operation=2, value="compact"),
        SimpleNamespace(name="message.max.bytes", config_operation=1, value=None),
        SimpleNamespace(name="log.retention.ms", config_operation=0, value="5"),
    ]
    changes = apply_operations({"log.cleanup.policy": "delete", "message.max.bytes": "1"}, ops)
    assert changes == {"log.cleanup.policy": "delete,compact", "message.max.bytes": None, "log.retention.ms": "5"}
    # no dynamic value yet: APPEND starts from Kafka's default ("delete"), as Kafka 4.1.1 does
    assert apply_operations({}, ops[:1]) == {"log.cleanup.policy": "delete,compact"}
    assert replace_all({"a": "1", "b": "2"}, {"b": "3"}) == {"a": None, "b": "3"}


def test_records_build_the_levels() -> None:
    state = ClusterState()
    state = apply_broker_config(state, ConfigRecord("", "message.max.bytes", "3000", BROKER_RESOURCE))
    state = apply_broker_config(state, ConfigRecord("1", "message.max.bytes", "2000", BROKER_RESOURCE))
    assert state.broker_configs == {"": {"message.max.bytes": "3000"}, "1": {"message.max.bytes": "2000"}}
    state = apply_broker_config(state, ConfigRecord("1", "message.max.bytes", None, BROKER_RESOURCE))
    assert state.broker_configs == {"": {"message.max.bytes": "3000"}}


def test_apply_updates_the_config_and_rebuilds_log_defaults() -> None:
    config = BrokerConfig.from_mapping({"node.id": "1", "message.max.bytes": "500000"}, warn_unknown=False)
    rebuilt: list[int] = []
    dynamic = DynamicBrokerConfig(config, lambda: rebuilt.append(1))
    dynamic.apply({"": {"message.max.bytes": "3000", "num.replica.fetchers": "4"}})
    assert config["message.max.bytes"] == 3000
    assert config.raw["message.max.bytes"] == "3000"
    assert config["num.replica.fetchers"] == 4
    assert rebuilt == [1]
    dynamic.apply({"": {"num.replica.fetchers": "4"}})  # the default removed: the static value again
    assert config["message.max.bytes"] == 500000
    assert config.raw["message.max.bytes"] == "500000"
    dynamic.apply({})
    assert config["num.replica.fetchers"] == 1
    assert "num.replica.fetchers" not in config.raw
    assert "message.max.bytes" in LIVE_KEYS
    assert "log.retention.ms" in LIVE_KEYS
