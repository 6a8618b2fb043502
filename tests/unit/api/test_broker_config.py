"""Broker config keys as server.properties spells them (broker/config.py)."""

from __future__ import annotations

import pytest

from broker.config import KNOWN_KEYS, BrokerConfig
from broker.controller.errors import MetadataError
from broker.controller.topics import validate_topic_config


def test_kafka_names_of_the_quorum_timeouts_are_accepted() -> None:
    """Kafka 3.x spells the KIP-595 timeouts ``controller.quorum.*``; KIP-595 spells them ``quorum.*``."""
    config = BrokerConfig.from_mapping({"controller.quorum.election.timeout.ms": "1234"}, warn_unknown=False)
    assert config["quorum.election.timeout.ms"] == 1234
    both = {"controller.quorum.fetch.timeout.ms": "5000", "quorum.fetch.timeout.ms": "3000"}
    assert BrokerConfig.from_mapping(both, warn_unknown=False)["quorum.fetch.timeout.ms"] == 3000


@pytest.mark.parametrize(
    "key",
    [
        "log.roll.jitter.ms",
        "log.preallocate",
        "compression.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.flush.offset.checkpoint.interval.ms",
    ],
)
def test_log_keys_that_take_effect_are_known(key: str) -> None:
    """A key the log layer reads must not be reported as 'unknown ... ignored' at start-up."""
    assert key in KNOWN_KEYS


def test_segment_jitter_and_preallocate_are_topic_configs() -> None:
    validate_topic_config("segment.jitter.ms", "1000")
    validate_topic_config("preallocate", "true")
    with pytest.raises(MetadataError):
        validate_topic_config("segment.jitter.ms", "soon")
    with pytest.raises(MetadataError):
        validate_topic_config("preallocate", "maybe")
