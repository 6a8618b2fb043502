"""Kafka 3.7 config keys pylog accepts and ignores (issue 17 "Fidelity with Kafka 3.7": "accepted
with a warning and documented, never refused as unknown"), their value checks as Kafka 3.7's, and
that a broker key Kafka 3.7 knows is warned about as ignored, not as unknown."""

from __future__ import annotations

import logging

import pytest

from broker.config import KNOWN_KEYS, BrokerConfig
from broker.controller.errors import MetadataError
from broker.controller.topics import TOPIC_CONFIG_BROKER_KEYS, validate_topic_config
from broker.ignored_configs import IGNORED_BROKER_CONFIGS, IGNORED_TOPIC_CONFIGS
from pyspark_log.wire.errors import ErrorCode

# Kafka 3.7's LogConfig definition (TopicConfig names): every one is served or ignored, none unknown
KAFKA_37_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable", "message.format.version",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
    "preallocate", "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
    "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
}  # fmt: skip


def test_every_kafka_37_topic_config_is_served_or_ignored() -> None:
    assert set(TOPIC_CONFIG_BROKER_KEYS) | set(IGNORED_TOPIC_CONFIGS) == KAFKA_37_TOPIC_CONFIGS
    assert not set(TOPIC_CONFIG_BROKER_KEYS) & set(IGNORED_TOPIC_CONFIGS)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("message.format.version", "0.10.0"),
        ("message.format.version", "2.8"),
        ("message.format.version", "3.0-IV1"),
        ("message.format.version", "0.10.2.1"),
        ("message.downconversion.enable", "false"),
        ("leader.replication.throttled.replicas", "*"),
        ("follower.replication.throttled.replicas", "0:1, 1:2"),
        ("follower.replication.throttled.replicas", ""),
        ("remote.storage.enable", "false"),
        ("local.retention.ms", "-2"),
        ("local.retention.bytes", "1048576"),
        ("message.format.version", None),  # a delete
    ],
)
def test_accepted_as_kafka_37_accepts(key: str, value: str | None) -> None:
    validate_topic_config(key, value)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("message.format.version", "banana", "is not a valid version"),
        ("message.format.version", "3.9", "is not a valid version"),
        ("message.downconversion.enable", "maybe", "true or false"),
        ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId]"),
        ("remote.storage.enable", "maybe", "true or false"),
        ("local.retention.ms", "-3", "at least -2"),
        ("local.retention.bytes", "x", "LONG"),
    ],
)
def test_refused_as_kafka_37_refuses(key: str, value: str, why: str) -> None:
    with pytest.raises(MetadataError) as caught:
        validate_topic_config(key, value)
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert why in str(caught.value)


def test_unknown_topic_config_is_still_refused() -> None:
    with pytest.raises(MetadataError) as caught:
        validate_topic_config("no.such.config", "1")
    assert caught.value.code == ErrorCode.INVALID_CONFIG


def test_ignored_broker_keys_warn_as_ignored_not_unknown(caplog: pytest.LogCaptureFixture) -> None:
    assert not set(IGNORED_BROKER_CONFIGS) & set(KNOWN_KEYS)
    caplog.set_level(logging.WARNING)
    config = BrokerConfig.from_mapping(
        {"log.message.format.version": "2.8", "inter.broker.protocol.version": "3.7", "bogus.key": "1"}
    )
    assert config.extra["log.message.format.version"] == "2.8"
    messages = [r.getMessage() for r in caplog.records]
    assert any("log.message.format.version='2.8' is accepted and ignored by pylog: deprecated" in m for m in messages)
    assert any("inter.broker.protocol.version" in m and "ignored by pylog" in m for m in messages)
    assert any("unknown config key 'bogus.key'" in m for m in messages)
    assert len(messages) == 3
