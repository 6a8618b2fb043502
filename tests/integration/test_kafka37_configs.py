"""Kafka 3.7 config keys that pylog accepts and ignores, through real clients (issue 17: "accepted
with a warning and documented, never refused as unknown; CreateTopics/AlterConfigs/
IncrementalAlterConfigs answer exactly as Kafka 3.7 does for them").

confluent-kafka creates a topic with ``message.format.version`` and friends and alters them
incrementally; kafka-python's AlterConfigs (the legacy, whole-set API) sets one; values Kafka 3.7
refuses (a bad version string, ``remote.storage.enable=true`` without tiered storage) answer
INVALID_CONFIG. The broker starts with ``log.message.format.version`` and warns it is ignored.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from pyspark_log.embedded import EmbeddedBroker

with warnings.catch_warnings():  # kafka-python loads its schemas with importlib APIs deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"log.message.format.version": "2.8", "inter.broker.protocol.version": "3.7"}
    with EmbeddedBroker(tmp_path_factory.mktemp("kafka37-configs"), overrides=overrides) as b:
        yield b


def describe(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)


def error_code(future: object) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT_S)  # type: ignore[attr-defined]
    return int(info.value.args[0].code())


def test_broker_warns_once_per_ignored_key_and_starts(broker: EmbeddedBroker) -> None:
    lines = broker.output().splitlines()
    ignored = [line for line in lines if "log.message.format.version" in line]
    assert len(ignored) == 1, ignored
    assert " WARNING " in ignored[0]
    assert "accepted and ignored by pylog" in ignored[0]
    assert not any("unknown config key 'inter.broker.protocol.version'" in line for line in lines)


def test_ignored_broker_key_is_described_read_only(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    assert configs["log.message.format.version"].value == "2.8"
    assert configs["log.message.format.version"].is_read_only
    assert configs["log.message.format.version"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_confluent_create_describe_alter_ignored_topic_configs(broker: EmbeddedBroker, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {
        "message.format.version": "0.10.0",
        "message.downconversion.enable": "false",
        "leader.replication.throttled.replicas": "*",
        "local.retention.ms": "-2",
    }
    admin.create_topics([NewTopic(topic_name, 1, 1, config=config)], operation_timeout=TIMEOUT_S)[topic_name].result(
        TIMEOUT_S
    )
    configs = describe(admin, topic_name)
    for key, value in config.items():
        assert configs[key].value == value, key
        assert configs[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["remote.storage.enable"].value == "false"
    assert configs["remote.storage.enable"].is_default
    assert configs["follower.replication.throttled.replicas"].value == ""

    change = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("message.format.version", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("local.retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([change], request_timeout=TIMEOUT_S)[change].result(TIMEOUT_S)
    configs = describe(admin, topic_name)
    assert configs["message.format.version"].value == "3.0-IV1"  # Kafka 3.7's default
    assert configs["message.format.version"].is_default
    assert configs["local.retention.bytes"].value == "1048576"

    refused = [
        ConfigEntry("message.format.version", "banana", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("follower.replication.throttled.replicas", "0-1", incremental_operation=AlterConfigOpType.SET),
    ]
    for entry in refused:
        res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[entry])
        code = error_code(admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S)[res])
        assert code == KafkaError.INVALID_CONFIG, entry.name
    bad_create = NewTopic(f"{topic_name}-x", 1, 1, config={"remote.storage.enable": "true"})
    future = admin.create_topics([bad_create], operation_timeout=TIMEOUT_S)[bad_create.topic]
    assert error_code(future) == KafkaError.INVALID_CONFIG


def test_kafka_python_alter_configs_sets_an_ignored_key(broker: EmbeddedBroker, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic_name, 1, 1)], operation_timeout=TIMEOUT_S)[topic_name].result(TIMEOUT_S)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic_name, configs={"message.format.version": "2.8"})])
    finally:
        kp.close()
    assert describe(admin, topic_name)["message.format.version"].value == "2.8"
    assert any("message.format.version='2.8' is accepted and ignored" in line for line in broker.output().splitlines())
