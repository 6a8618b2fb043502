"""Rules for topic names and topic-level configs (Kafka's ``Topic.validate`` and ``LogConfig`` names)."""

from __future__ import annotations

import re

from broker.controller.errors import MetadataError
from broker.ignored_configs import IGNORED_TOPIC_CONFIGS, check_ignored_topic_config, long_at_least
from pyspark_log.wire.errors import ErrorCode

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# Topic-level configs and the broker keys their defaults come from.
TOPIC_CONFIG_BROKER_KEYS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    # KIP-405 (broker.log.remote.config checks them against the broker's tiered storage)
    "remote.storage.enable": "",  # no broker default (Kafka: topic-level only)
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}

_INT_CONFIGS = {
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms", "index.interval.bytes",
    "max.message.bytes", "message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms", "max.compaction.lag.ms", "min.compaction.lag.ms", "min.insync.replicas",
    "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
}  # fmt: skip


def validate_topic_name(name: str) -> None:
    """Raise ErrorCode.INVALID_TOPIC_EXCEPTION unless ``name`` is a legal Kafka topic name."""
    if not name:
        raise MetadataError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise MetadataError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise MetadataError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise MetadataError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'",
        )


def validate_topic_config(key: str, value: str | None) -> None:
    """Raise ErrorCode.INVALID_CONFIG for an unknown key or a value of the wrong kind. Kafka 3.7
    keys pylog ignores (``broker.ignored_configs``) are checked as Kafka checks them."""
    if key in IGNORED_TOPIC_CONFIGS:
        try:
            check_ignored_topic_config(key, value)
        except ValueError as exc:
            raise MetadataError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return
    if key not in TOPIC_CONFIG_BROKER_KEYS:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
    if value is None:
        return
    if key in ("local.retention.ms", "local.retention.bytes"):  # Kafka's LogConfig: atLeast(-2)
        try:
            long_at_least(-2)(key, value)
        except ValueError as exc:
            raise MetadataError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if key in _INT_CONFIGS:
        try:
            int(value)
        except ValueError:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"topic config {key}={value!r} is not an integer") from None
    if key == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
        raise MetadataError(ErrorCode.INVALID_CONFIG, "message.timestamp.type must be CreateTime or LogAppendTime")
    booleans = ("preallocate", "unclean.leader.election.enable", "remote.storage.enable")
    if key in booleans and value.lower() not in ("true", "false"):
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"topic config {key}={value!r} must be true or false")
    if key == "min.insync.replicas" and int(value) < 1:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"min.insync.replicas={value} must be at least 1")
    if key == "min.cleanable.dirty.ratio":
        try:
            ratio = float(value)
        except ValueError:
            ratio = -1.0
        if not 0 <= ratio <= 1:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"min.cleanable.dirty.ratio={value!r} must be in [0, 1]")
    if key == "cleanup.policy" and not set(value.split(",")) <= {"delete", "compact"}:
        raise MetadataError(ErrorCode.INVALID_CONFIG, "cleanup.policy must be delete, compact, or both")
