"""``LogConfig``: Kafka's topic-config names and defaults, broker ``log.*`` synonyms."""

from __future__ import annotations

import pytest

from broker.log.config import LONG_MAX, LogConfig, LogManagerConfig


def test_kafka_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.file_delete_delay_ms == 60000
    assert config.cleanup_policy == ("delete",)


def test_topic_names_win_over_broker_synonyms() -> None:
    config = LogConfig.from_properties(
        {
            "log.segment.bytes": "1000",
            "segment.bytes": "2000",
            "log.roll.hours": "2",
            "log.retention.minutes": "3",
            "log.retention.hours": "5",
            "log.flush.interval.messages": "1",
            "message.max.bytes": "500",
            "log.cleanup.policy": "compact,delete",
            "log.segment.delete.delay.ms": "7",
            "log.message.timestamp.type": "LogAppendTime",
            "unrelated.key": "x",
        }
    )
    assert config.segment_bytes == 2000
    assert config.segment_ms == 2 * 3_600_000
    assert config.retention_ms == 3 * 60_000
    assert config.flush_messages == 1
    assert config.max_message_bytes == 500
    assert config.cleanup_policy == ("compact", "delete")
    assert config.file_delete_delay_ms == 7
    assert config.log_append_time


def test_overrides_keep_the_base() -> None:
    base = LogConfig.from_properties({"log.retention.bytes": 100, "log.retention.ms": -1})
    topic = base.with_overrides({"retention.ms": "1000"})
    assert (topic.retention_bytes, topic.retention_ms) == (100, 1000)
    assert base.retention_ms == -1


def test_legacy_timestamp_difference_bounds_both_ways() -> None:
    config = LogConfig.from_properties({"message.timestamp.difference.max.ms": "10"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (10, 10)


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "ten"},
        {"segment.bytes": "10"},
        {"message.timestamp.type": "WallClock"},
        {"cleanup.policy": "forever"},
        {"flush.messages": "0"},
        {"preallocate": "maybe"},
    ],
)
def test_bad_values_name_the_key(props: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(props)).replace(".", r"\.")):
        LogConfig.from_properties(props)


def test_manager_config() -> None:
    config = LogManagerConfig.from_properties({"log.dirs": "/a, /b", "log.retention.check.interval.ms": "10"})
    assert config.log_dirs == ("/a", "/b")
    assert config.retention_check_interval_ms == 10
    assert LogManagerConfig.from_properties({"log.dir": "/c"}).log_dirs == ("/c",)
