"""Kafka 3.7 config keys that pylog accepts, stores and reports, but does not act on.

Issue 17: "Topic and broker config keys that Kafka 3.7 accepts but ignores or deprecates
(``message.format.version``, ``log.message.format.version``, and any other key in Kafka 3.7's
config lists) are accepted with a warning and documented, never refused as unknown;
CreateTopics/AlterConfigs/IncrementalAlterConfigs answer exactly as Kafka 3.7 does for them."

Topic keys: the entries of Kafka 3.7's ``LogConfig`` definition (``TopicConfig``) that pylog's
log has no use for. Each value is checked as Kafka 3.7 checks it (INVALID_CONFIG otherwise, with
Kafka's wording where it has one). DescribeConfigs reports them with Kafka 3.7's defaults. The
tiered-storage keys (``remote.storage.enable``, ``local.retention.*``) are served
(``broker.log.remote``), not listed here.

Broker keys: the ``KafkaConfig`` entries of Kafka 3.7 that pylog reads nowhere; start-up warns
once per key that it is ignored (and why), where a key Kafka 3.7 does not know is warned about as
unknown. Both are kept and never stop the broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BOOLEAN, STRING, LONG, LIST = 1, 2, 5, 7  # DescribeConfigs ``config_type`` (Kafka's ConfigDef types)

# MetadataVersion strings Kafka 3.7 parses (``MetadataVersion.fromVersionString``): a release from
# 0.8.0 to 3.7 (three numbers before 1.0, two after; more are ignored), optionally ``-IVn``.
_RELEASES = frozenset({
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0", "2.1", "2.2",
    "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7",
})  # fmt: skip
_METADATA_VERSION = re.compile(r"^(\d+(?:\.\d+)+)(?:-IV\d+)?$")
_THROTTLED_ENTRY = re.compile(r"^\s*\d+\s*:\s*\d+\s*$")


def _metadata_version(name: str, value: str) -> None:
    found = _METADATA_VERSION.match(value.strip())
    parts = found.group(1).split(".") if found else []
    release = ".".join(parts[: 3 if parts and parts[0] == "0" else 2])
    if release not in _RELEASES:
        raise ValueError(f"Invalid value {value} for configuration {name}: Version `{value}` is not a valid version")


def _boolean(name: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"Invalid value {value} for configuration {name}: Expected value to be either true or false")


def long_at_least(low: int) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(f"Invalid value {value} for configuration {name}: Not a number of type LONG") from None
        if number < low:
            raise ValueError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")

    return check


def _throttled_replicas(name: str, value: str) -> None:
    entries = [e for e in value.split(",") if e.strip()] if value.strip() else []
    if value.strip() == "*" or all(_THROTTLED_ENTRY.match(e) for e in entries):
        return
    raise ValueError(
        f"Invalid value {value} for configuration {name}: {name} must be the literal '*' or a list of replicas "
        "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


@dataclass(frozen=True)
class IgnoredTopicConfig:
    default: str  # Kafka 3.7's default, as DescribeConfigs reports it
    config_type: int
    reason: str  # why pylog ignores it; empty for a key honoured outside the log (the throttles)
    check: Callable[[str, str], None]


IGNORED_TOPIC_CONFIGS: dict[str, IgnoredTopicConfig] = {
    "message.format.version": IgnoredTopicConfig(
        "3.0-IV1", STRING, "deprecated since Kafka 3.0 and ignored there too: batches are always v2", _metadata_version
    ),
    "message.downconversion.enable": IgnoredTopicConfig(
        "true", BOOLEAN, "pylog never down-converts: fetches before v4 are not served", _boolean
    ),
    # not log settings: read from the metadata image by broker.quota.replication
    "leader.replication.throttled.replicas": IgnoredTopicConfig("", LIST, "", _throttled_replicas),
    "follower.replication.throttled.replicas": IgnoredTopicConfig("", LIST, "", _throttled_replicas),
}  # fmt: skip


def check_ignored_topic_config(name: str, value: str | None) -> None:
    """Raise ValueError (Kafka's message) for a value Kafka 3.7 refuses; None deletes the key."""
    if value is not None:
        IGNORED_TOPIC_CONFIGS[name].check(name, value)


_ZK = "ZooKeeper mode is not supported: pylog runs without ZooKeeper (KRaft or its metadata file)"
# Security keys are read or refused by name in broker.security (docs/security.md), not listed here.
_SECURITY = "a failed SASL login is answered and the connection closed at once"
_ONE_LOOP = "one asyncio event loop does this work"

# Kafka 3.7 broker keys (KafkaConfig) that pylog reads nowhere, with the reason start-up logs.
IGNORED_BROKER_CONFIGS: dict[str, str] = {
    "log.message.format.version": "deprecated since Kafka 3.0 and ignored there too: batches are always v2",
    "log.message.downconversion.enable": "pylog never down-converts: fetches before v4 are not served",
    "inter.broker.protocol.version": "the inter-broker protocol is Kafka 3.7's (metadata.version 3.7-IV4)",
    "num.recovery.threads.per.data.dir": "logs are recovered one after another",
    "num.replica.alter.log.dirs.threads": "one task of the event loop copies every AlterReplicaLogDirs move",
    "background.threads": _ONE_LOOP,
    "queued.max.requests": _ONE_LOOP,
    "queued.max.request.bytes": _ONE_LOOP,
    "socket.listen.backlog.size": "the listen backlog is asyncio's default",
    "connection.failed.authentication.delay.ms": _SECURITY,
    "log.cleaner.io.buffer.size": "the cleaner sizes its own buffers",
    "log.cleanup.interval.ms": "retention runs on log.retention.check.interval.ms",
    "log.dir.failure.timeout.ms": "pylog probes offline dirs instead (log.dir.failure.probe.interval.ms)",
    "log.initial.task.delay.ms": "background tasks start one interval after start-up",
    "create.topic.policy.class.name": "no pluggable policies",
    "alter.config.policy.class.name": "no pluggable policies",
    "zookeeper.connect": _ZK,
    "zookeeper.connection.timeout.ms": _ZK,
    "zookeeper.session.timeout.ms": _ZK,
    "zookeeper.set.acl": _ZK,
    "zookeeper.metadata.migration.enable": _ZK,
    "controlled.shutdown.enable": "shutdown hands leadership over through the controller in KRaft mode",
    "controlled.shutdown.max.retries": "shutdown hands leadership over through the controller in KRaft mode",
    "controlled.shutdown.retry.backoff.ms": "shutdown hands leadership over through the controller in KRaft mode",
    "reserved.broker.max.id": "broker ids are not generated",
    "broker.id.generation.enable": "broker ids are not generated",
    "broker.rack": "rack-aware placement is not implemented",
    "replica.selector.class": "consumers always fetch from the leader (KIP-392 not implemented)",
    "metric.reporters": "metrics are served at metrics.port",
    "metrics.num.samples": "metrics are served at metrics.port",
    "metrics.sample.window.ms": "metrics are served at metrics.port",
    "metrics.recording.level": "metrics are served at metrics.port",
    "kafka.metrics.reporters": "metrics are served at metrics.port",
    "kafka.metrics.polling.interval.secs": "metrics are served at metrics.port",
    "auto.include.jmx.reporter": "metrics are served at metrics.port",
    "client.quota.callback.class": "client quotas follow the built-in precedence list (no callback plug-in)",
    "group.consumer.regex.refresh.interval.ms": "subscription regexes are re-evaluated at every heartbeat",
    "offsets.load.buffer.size": "offsets are loaded in one pass",
    "offsets.topic.compression.codec": "offset commits are written uncompressed",
    "transaction.state.log.load.buffer.size": "transaction state is loaded in one pass",
    "transaction.partition.verification.enable": "not configurable: pylog's transaction checks are fixed",
    "metadata.log.dir": "the metadata log lives in the first log dir",
    "metadata.log.segment.bytes": "the metadata log is not segmented by size",
    "metadata.log.segment.ms": "the metadata log is not segmented by age",
    "early.start.listeners": "every listener starts once the logs are loaded",
    "delete.records.purgatory.purge.interval.requests": "no purgatories: waiting requests are asyncio tasks",
    "fetch.purgatory.purge.interval.requests": "no purgatories: waiting requests are asyncio tasks",
    "producer.purgatory.purge.interval.requests": "no purgatories: waiting requests are asyncio tasks",
    "unstable.api.versions.enable": "only Kafka 3.7's stable API versions are served",
    "unstable.metadata.versions.enable": "only Kafka 3.7's stable API versions are served",
}
