"""KIP-405 settings: Kafka's broker keys and defaults (``RemoteLogManagerConfig``) and Kafka
4.1's topic checks (``LogConfig.validate`` with remote storage), with Kafka's messages."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.log.config import LogConfig
from broker.log.remote.config import (
    TOPIC_BASED_RLMM,
    RemoteConfigError,
    RemoteLogManagerConfig,
    check_topic_config,
)


def _rlm(**raw: str) -> RemoteLogManagerConfig:
    config = BrokerConfig.from_mapping(raw, warn_unknown=False)
    return RemoteLogManagerConfig.from_properties(config.get, config.raw)


def test_broker_defaults_are_kafkas() -> None:
    rlm = _rlm()
    assert rlm == RemoteLogManagerConfig()
    assert (rlm.system_enabled, rlm.task_interval_ms, rlm.rsm_prefix, rlm.rlmm_prefix) == (
        False, 30_000, "rsm.config.", "rlmm.config.",
    )  # fmt: skip
    assert rlm.rlmm_class_name == TOPIC_BASED_RLMM
    assert (rlm.metadata_topic_partitions, rlm.metadata_topic_replication_factor) == (50, 3)


def test_metadata_topic_keys_under_the_rlmm_prefix() -> None:
    rlm = _rlm(**{"rlmm.config.remote.log.metadata.topic.num.partitions": "3"})
    assert rlm.metadata_topic_partitions == 3
    rlm = _rlm(**{"remote.log.metadata.manager.impl.prefix": "x.", "x.remote.log.metadata.topic.num.partitions": "7"})
    assert rlm.metadata_topic_partitions == 7


def test_enabled_system_needs_a_storage_manager_class() -> None:
    with pytest.raises(ValueError, match=r"remote\.log\.storage\.manager\.class\.name"):  # ConfigError at start
        _rlm(**{"remote.log.storage.system.enable": "true"})


def test_only_the_topic_based_metadata_manager_is_served() -> None:
    with pytest.raises(ValueError, match="TopicBasedRemoteLogMetadataManager"):
        _rlm(**{
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "broker.log.remote.storage.FileSystemRemoteStorageManager",
            "remote.log.metadata.manager.class.name": "com.example.Other",
        })  # fmt: skip


def test_topic_keys_parse_with_kafka_defaults() -> None:
    config = LogConfig.from_properties({})
    assert (config.remote_storage_enable, config.local_retention_ms, config.local_retention_bytes) == (False, -2, -2)
    config = LogConfig.from_properties({"log.local.retention.ms": "5", "remote.storage.enable": "true"})
    assert (config.remote_storage_enable, config.local_retention_ms) == (True, 5)
    assert LogConfig.from_properties({"local.retention.ms": "7", "log.local.retention.ms": "5"}).local_retention_ms == 7


def test_remote_storage_refused_when_the_system_is_disabled() -> None:
    with pytest.raises(RemoteConfigError, match="Tiered Storage functionality is disabled in the broker"):
        check_topic_config(LogConfig(remote_storage_enable=True), system_enabled=False)
    check_topic_config(LogConfig(remote_storage_enable=False), system_enabled=False)


def test_remote_storage_on_a_compacted_topic_is_refused() -> None:
    config = LogConfig(remote_storage_enable=True, cleanup_policy=("compact",))
    with pytest.raises(RemoteConfigError, match=r"only supports topics with cleanup\.policy=delete"):
        check_topic_config(config, system_enabled=True)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"local_retention_ms": -1, "retention_ms": 1000}, "must not be -1 as retention.ms value is set as 1000."),
        (
            {"local_retention_ms": 2000, "retention_ms": 1000},
            "Value must not be more than retention.ms property value: 10",
        ),
        (
            {"local_retention_bytes": 9, "retention_bytes": 8},
            "Value must not be more than retention.bytes property value",
        ),
    ],
)
def test_local_retention_above_total_is_refused(changes: dict[str, int], message: str) -> None:
    with pytest.raises(RemoteConfigError) as caught:
        check_topic_config(LogConfig(remote_storage_enable=True, **changes), system_enabled=True)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert str(caught.value).startswith("Invalid value ")


def test_local_retention_within_total_is_accepted() -> None:
    check_topic_config(
        LogConfig(remote_storage_enable=True, local_retention_ms=500, retention_ms=1000, retention_bytes=-1),
        system_enabled=True,
    )
