"""Cleaner settings under Kafka's names (Kafka documentation §4.8 "Log Compaction" "Configuring The Log Cleaner")."""

from __future__ import annotations

import pytest

from broker.log.cleaner.config import CleanerConfig
from broker.log.config import LogConfig


def test_section_4_8_the_cleaner_is_enabled_by_default() -> None:
    """the log cleaner is enabled by default."""
    config = CleanerConfig.from_properties({})
    assert config.enable
    assert (config.threads, config.dedupe_buffer_size, config.backoff_ms) == (1, 128 * 1024 * 1024, 15_000)


def test_broker_keys_are_read() -> None:
    config = CleanerConfig.from_properties(
        {
            "log.cleaner.enable": "false",
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.buffer.load.factor": "0.5",
            "log.cleaner.backoff.ms": "100",
            "log.cleaner.io.max.bytes.per.second": "1e6",
        }
    )
    assert not config.enable
    assert config.map_bytes_per_thread == 524288
    assert (config.io_buffer_load_factor, config.backoff_ms, config.io_max_bytes_per_second) == (0.5, 100, 1e6)
    with pytest.raises(ValueError, match=r"log\.cleaner\.threads"):
        CleanerConfig.from_properties({"log.cleaner.threads": "0"})


def test_section_4_8_topic_settings_and_their_broker_synonyms() -> None:
    """``log.cleanup.policy`` is the broker default of ``cleanup.policy``; ``log.cleaner.min.
    compaction.lag.ms`` and friends the defaults of the topic keys; a topic key wins."""
    broker = LogConfig.from_properties(
        {
            "log.cleanup.policy": "compact",
            "log.cleaner.delete.retention.ms": "1000",
            "log.cleaner.min.compaction.lag.ms": "2000",
            "log.cleaner.max.compaction.lag.ms": "3000",
            "log.cleaner.min.cleanable.ratio": "0.25",
        }
    )
    assert broker.compact_enabled
    assert not broker.delete_enabled
    assert (broker.delete_retention_ms, broker.min_compaction_lag_ms, broker.max_compaction_lag_ms) == (
        1000,
        2000,
        3000,
    )
    assert broker.min_cleanable_dirty_ratio == 0.25
    topic = broker.with_overrides({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1"})
    assert topic.compact_enabled
    assert topic.delete_enabled
    assert topic.min_cleanable_dirty_ratio == 0.1
    with pytest.raises(ValueError, match=r"min\.cleanable\.dirty\.ratio"):
        LogConfig.from_properties({"min.cleanable.dirty.ratio": "1.5"})


def test_section_4_8_max_compaction_lag_rolls_the_active_segment_of_a_compacted_topic() -> None:
    """ "the active segment" is never compacted: for ``max.compaction.lag.ms`` to hold, the active segment
    of a compacted topic rolls at ``min(segment.ms, max.compaction.lag.ms)`` (Kafka ``maxSegmentMs``)."""
    assert LogConfig(segment_ms=10_000, max_compaction_lag_ms=3_000).max_segment_ms == 10_000  # delete policy
    compacted = LogConfig(segment_ms=10_000, max_compaction_lag_ms=3_000, cleanup_policy=("compact",))
    assert compacted.max_segment_ms == 3_000
    assert LogConfig(cleanup_policy=("compact",)).max_segment_ms == LogConfig().segment_ms
