"""Broker configuration under Kafka's ``server.properties`` names.

``BrokerConfig.load(file, overrides)`` reads a properties file (optional), applies
``--override key=value`` pairs, converts values to the declared types, and keeps Kafka's defaults
for everything not given. Unknown keys are kept (so topic-level ``log.*`` passthroughs still
reach the log) but logged as a warning naming the key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.ignored_configs import IGNORED_BROKER_CONFIGS, IGNORED_TOPIC_CONFIGS
from broker.properties import load_properties
from broker.raft.config import RaftConfigError, validate_quorum_config
from broker.security.protocols import ProtocolMapError, listener_protocol, parse_protocol_map
from broker.security.unsupported import is_security_key, refusals

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
# Key name parts whose values are never logged (Kafka's PASSWORD-type configs).
_SECRET_WORDS = frozenset({"password", "secret", "jaas", "key", "credentials"})


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and the fix."""


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError("expected true or false")


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True)
class ConfigKey:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str


_KEYS: list[ConfigKey] = [
    ConfigKey("node.id", int, 1, "this broker's id"),
    ConfigKey("broker.id", int, None, "legacy name of node.id"),
    ConfigKey("process.roles", _list, ["broker", "controller"], "broker, controller, or both"),
    ConfigKey("controller.quorum.voters", str, "", "id@host:port,... of the metadata quorum"),
    ConfigKey("quorum.voters", str, "", "KIP-595 name of controller.quorum.voters"),
    ConfigKey("controller.quorum.bootstrap.servers", str, "", "host:port,... to find a dynamic quorum (KIP-853)"),
    ConfigKey("controller.listener.names", _list, ["CONTROLLER"], "listener name(s) the controllers use"),
    ConfigKey("inter.broker.listener.name", str, None, "listener other brokers use (default: first non-controller)"),
    ConfigKey("cluster.id", str, "", "checked: the cluster id the log dirs were formatted with (pylog storage)"),
    ConfigKey("log.dirs", _list, ["/tmp/pylog-logs"], "data directories"),  # noqa: S108 - Kafka-like default
    ConfigKey("log.dir", str, None, "single data directory (used when log.dirs is not set)"),
    ConfigKey("listeners", _list, ["PLAINTEXT://127.0.0.1:9092"], "listener URIs"),
    ConfigKey("advertised.listeners", _list, [], "URIs given to clients (default: listeners)"),
    ConfigKey("listener.security.protocol.map", str, "", "NAME:PROTOCOL,... (default: each protocol maps to itself)"),
    ConfigKey("security.inter.broker.protocol", str, "PLAINTEXT", "names the inter-broker listener (by its protocol)"),
    ConfigKey("num.partitions", int, 1, "partitions of an auto-created topic"),
    ConfigKey("default.replication.factor", int, 1, "replication factor of an auto-created topic"),
    ConfigKey("min.insync.replicas", int, 1, "acks=all needs this many in-sync replicas (topic default)"),
    ConfigKey("unclean.leader.election.enable", _bool, False, "elect an out-of-sync replica when the ISR is gone"),
    ConfigKey("auto.leader.rebalance.enable", _bool, True, "move leadership back to preferred replicas"),
    ConfigKey("leader.imbalance.check.interval.seconds", int, 300, "how often the controller checks leader balance"),
    ConfigKey(
        "leader.imbalance.per.broker.percentage", int, 10, "share of a broker's preferred partitions led elsewhere"
    ),
    ConfigKey("auto.create.topics.enable", _bool, True, "create topics on Metadata/Produce"),
    ConfigKey("delete.topic.enable", _bool, True, "allow DeleteTopics"),
    ConfigKey("message.max.bytes", int, 1048588, "largest record batch accepted"),
    ConfigKey("log.segment.bytes", int, 1073741824, "segment size before roll"),
    ConfigKey("log.roll.ms", int, None, "segment age before roll (ms)"),
    ConfigKey("log.roll.hours", int, 168, "segment age before roll (hours)"),
    ConfigKey("log.retention.ms", int, None, "retention by time (ms); -1 = forever"),
    ConfigKey("log.retention.minutes", int, None, "retention by time (minutes)"),
    ConfigKey("log.retention.hours", int, 168, "retention by time (hours)"),
    ConfigKey("log.retention.bytes", int, -1, "retention by size per partition; -1 = unlimited"),
    ConfigKey("log.retention.check.interval.ms", int, 300000, "how often retention runs"),
    ConfigKey("log.flush.interval.messages", int, LONG_MAX, "fsync after this many messages"),
    ConfigKey("log.flush.interval.ms", int, None, "fsync after this many ms"),
    ConfigKey("log.flush.scheduler.interval.ms", int, LONG_MAX, "how often the flusher checks"),
    ConfigKey("log.index.interval.bytes", int, 4096, "bytes between offset index entries"),
    ConfigKey("log.index.size.max.bytes", int, 10485760, "offset index size"),
    ConfigKey("log.segment.delete.delay.ms", int, 60000, "delay before deleting a .deleted segment"),
    ConfigKey("log.message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime"),
    ConfigKey("log.cleanup.policy", _list, ["delete"], "delete and/or compact"),
    ConfigKey("log.cleaner.enable", _bool, True, "run the log cleaner (compacted topics)"),
    ConfigKey("log.cleaner.threads", int, 1, "logs cleaned at the same time (worker processes)"),
    ConfigKey("log.cleaner.dedupe.buffer.size", int, 134217728, "offset map memory of all cleaner workers"),
    ConfigKey("log.cleaner.io.buffer.load.factor", float, 0.9, "how full an offset map may get"),
    ConfigKey("log.cleaner.backoff.ms", int, 15000, "sleep when no log needs cleaning"),
    ConfigKey("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308, "cleaner read+write cap"),
    ConfigKey("log.cleaner.delete.retention.ms", int, 86400000, "default delete.retention.ms"),
    ConfigKey("log.cleaner.min.compaction.lag.ms", int, 0, "default min.compaction.lag.ms"),
    ConfigKey("log.cleaner.max.compaction.lag.ms", int, LONG_MAX, "default max.compaction.lag.ms"),
    ConfigKey("log.cleaner.min.cleanable.ratio", float, 0.5, "default min.cleanable.dirty.ratio"),
    ConfigKey("log.roll.jitter.ms", int, None, "random jitter subtracted from the roll age (ms)"),
    ConfigKey("log.roll.jitter.hours", int, 0, "random jitter subtracted from the roll age (hours)"),
    ConfigKey("log.preallocate", _bool, False, "preallocate segment files (stored only)"),
    ConfigKey("compression.type", str, "producer", "topic compression (only 'producer': batches kept as sent)"),
    ConfigKey("log.message.timestamp.before.max.ms", int, LONG_MAX, "largest age of a CreateTime timestamp"),
    ConfigKey("log.message.timestamp.after.max.ms", int, 3600000, "largest future skew of a CreateTime timestamp"),
    ConfigKey("log.message.timestamp.difference.max.ms", int, None, "legacy: sets both bounds above"),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", int, 60000, "how often recovery points are written"),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", int, 60000, "how often log start offsets are written"),
    ConfigKey(
        "log.dir.failure.probe.interval.ms", int, 10000, "pylog: how often an offline log dir is probed for recovery"
    ),
    ConfigKey("socket.request.max.bytes", int, 104857600, "largest request frame accepted"),
    # Kafka's default is 102400; -1 keeps the kernel's autotuned buffers, which measured 2-3x
    # faster on produce and fetch (bench/broker_throughput.py; docs/compatibility.md).
    ConfigKey("socket.send.buffer.bytes", int, -1, "SO_SNDBUF (-1: OS default)"),
    ConfigKey("socket.receive.buffer.bytes", int, -1, "SO_RCVBUF (-1: OS default)"),
    ConfigKey("connections.max.idle.ms", int, 600000, "close connections idle this long"),
    ConfigKey("connections.max.reauth.ms", int, 0, "KIP-368: a SASL login's session lifetime (0: no expiry)"),
    ConfigKey(
        "socket.request.frame.timeout.ms", int, 30000, "close a connection whose request frame takes longer (pylog)"
    ),
    ConfigKey("max.connections", int, 2147483647, "connections across all listeners (KIP-402)"),
    ConfigKey("max.connections.per.ip", int, 2147483647, "connections from one address (KIP-306)"),
    ConfigKey("max.connections.per.ip.overrides", str, "", "ip:count,... per-address limits (KIP-306)"),
    ConfigKey("max.connection.creation.rate", int, 2147483647, "new connections per second, broker-wide (KIP-612)"),
    ConfigKey("quota.window.num", int, 11, "samples a client quota rate is measured over"),
    ConfigKey("quota.window.size.seconds", int, 1, "length of one client quota sample"),
    ConfigKey("replication.quota.window.num", int, 11, "samples a replication throttle's rate is measured over"),
    ConfigKey("replication.quota.window.size.seconds", int, 1, "length of one replication throttle sample"),
    ConfigKey("num.network.threads", int, 3, "accepted for compatibility; pylog uses one event loop"),
    ConfigKey("num.io.threads", int, 8, "accepted for compatibility; pylog uses one event loop"),
    ConfigKey("replica.fetch.max.bytes", int, 1048576, "bytes a follower asks per partition"),
    ConfigKey("replica.fetch.response.max.bytes", int, 10485760, "bytes a follower asks per fetch"),
    ConfigKey("replica.fetch.min.bytes", int, 1, "bytes the leader waits for before answering a follower"),
    ConfigKey("replica.fetch.wait.max.ms", int, 500, "longest a follower's fetch waits at the leader"),
    ConfigKey("replica.fetch.backoff.ms", int, 1000, "a follower's pause after a failed fetch"),
    ConfigKey("replica.lag.time.max.ms", int, 30000, "a follower not caught up this long leaves the ISR"),
    ConfigKey("replica.socket.timeout.ms", int, 30000, "timeout of a follower's fetch request"),
    ConfigKey("replica.socket.receive.buffer.bytes", int, 65536, "accepted; the OS sizes follower sockets"),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", int, 5000, "how often high watermarks are saved"),
    ConfigKey("num.replica.fetchers", int, 1, "fetcher connections per source broker"),
    ConfigKey("fetch.max.bytes", int, 57671680, "largest fetch response"),
    ConfigKey("group.initial.rebalance.delay.ms", int, 3000, "delay of a new group's first rebalance"),
    ConfigKey("group.min.session.timeout.ms", int, 6000, "smallest session timeout"),
    ConfigKey("group.max.session.timeout.ms", int, 1800000, "largest session timeout"),
    ConfigKey("group.max.size", int, 2147483647, "most members of one consumer group"),
    # KIP-848 consumer groups (broker.coordinator.consumer_group.config checks them as Kafka 4.1)
    ConfigKey("group.coordinator.rebalance.protocols", _list, ["classic", "consumer"], "group protocols served"),
    ConfigKey("group.consumer.session.timeout.ms", int, 45000, "session timeout of consumer-protocol members"),
    ConfigKey("group.consumer.min.session.timeout.ms", int, 45000, "smallest group.consumer.session.timeout.ms"),
    ConfigKey("group.consumer.max.session.timeout.ms", int, 60000, "largest group.consumer.session.timeout.ms"),
    ConfigKey("group.consumer.heartbeat.interval.ms", int, 5000, "heartbeat interval given to consumer members"),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", int, 5000, "smallest group.consumer.heartbeat.interval.ms"),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", int, 15000, "largest group.consumer.heartbeat.interval.ms"),
    ConfigKey("group.consumer.max.size", int, 2147483647, "most members of one consumer-protocol group"),
    ConfigKey("group.consumer.assignors", _list, ["uniform", "range"], "server-side assignors, the default first"),
    ConfigKey("group.consumer.migration.policy", str, "bidirectional", "online classic<->consumer group migration"),
    # KIP-932 share groups (broker.coordinator.share_group.config checks them as Kafka 4.1)
    ConfigKey("group.share.enable", _bool, False, "accepted; share groups follow the share.version feature (on)"),
    ConfigKey("group.share.session.timeout.ms", int, 45000, "session timeout of share group members"),
    ConfigKey("group.share.min.session.timeout.ms", int, 45000, "smallest group.share.session.timeout.ms"),
    ConfigKey("group.share.max.session.timeout.ms", int, 60000, "largest group.share.session.timeout.ms"),
    ConfigKey("group.share.heartbeat.interval.ms", int, 5000, "heartbeat interval given to share group members"),
    ConfigKey("group.share.min.heartbeat.interval.ms", int, 5000, "smallest group.share.heartbeat.interval.ms"),
    ConfigKey("group.share.max.heartbeat.interval.ms", int, 15000, "largest group.share.heartbeat.interval.ms"),
    ConfigKey("group.share.max.size", int, 200, "most members of one share group"),
    ConfigKey("group.share.assignors", _list, ["simple"], "share group assignors (simple)"),
    ConfigKey("group.share.record.lock.duration.ms", int, 30000, "acquisition lock of a delivered record"),
    ConfigKey("group.share.min.record.lock.duration.ms", int, 15000, "smallest share.record.lock.duration.ms"),
    ConfigKey("group.share.max.record.lock.duration.ms", int, 60000, "largest share.record.lock.duration.ms"),
    ConfigKey("group.share.delivery.count.limit", int, 5, "deliveries of a record before it is archived"),
    ConfigKey("group.share.partition.max.record.locks", int, 2000, "in-flight records of one share-partition"),
    ConfigKey("group.share.max.share.sessions", int, 2000, "share sessions a broker keeps"),
    ConfigKey("share.coordinator.state.topic.num.partitions", int, 50, "partitions of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.replication.factor", int, 3, "replication of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.min.isr", int, 2, "min.insync.replicas of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.segment.bytes", int, 104857600, "segment.bytes of __share_group_state"),
    ConfigKey("share.coordinator.snapshot.update.records.per.snapshot", int, 500, "ShareUpdates per ShareSnapshot"),
    ConfigKey("share.coordinator.write.timeout.ms", int, 5000, "how long a state write waits for replication"),
    ConfigKey("offsets.topic.num.partitions", int, 50, "partitions of __consumer_offsets"),
    ConfigKey("offsets.topic.replication.factor", int, 3, "replication of __consumer_offsets (capped to live brokers)"),
    ConfigKey("offsets.topic.segment.bytes", int, 104857600, "segment.bytes of __consumer_offsets (at creation)"),
    ConfigKey("offsets.commit.required.acks", int, -1, "accepted; an offset commit always waits for the ISR"),
    ConfigKey("offsets.commit.timeout.ms", int, 5000, "longest an offset commit waits for the ISR"),
    ConfigKey("offsets.retention.minutes", int, 10080, "offset expiry for empty groups"),
    ConfigKey("offsets.retention.check.interval.ms", int, 600000, "how often offsets expire"),
    ConfigKey("offset.metadata.max.bytes", int, 4096, "largest metadata of a committed offset"),
    ConfigKey("transaction.state.log.num.partitions", int, 50, "partitions of __transaction_state"),
    ConfigKey(
        "transaction.state.log.replication.factor",
        int,
        3,
        "replication of __transaction_state (capped to live brokers)",
    ),
    ConfigKey(
        "transaction.state.log.segment.bytes", int, 104857600, "segment.bytes of __transaction_state (at creation)"
    ),
    ConfigKey("transaction.state.log.min.isr", int, 2, "min.insync.replicas of __transaction_state"),
    ConfigKey("transaction.max.timeout.ms", int, 900000, "largest transaction.timeout.ms"),
    ConfigKey("request.timeout.ms", int, 30000, "longest the transaction coordinator waits for its state record's ISR"),
    ConfigKey("transactional.id.expiration.ms", int, 604800000, "expiry of idle transactional ids"),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000, "how often timed-out txns abort"
    ),
    ConfigKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000, "how often idle txn ids expire"
    ),
    ConfigKey("producer.id.expiration.ms", int, 86400000, "expiry of idle producer ids"),
    ConfigKey("quorum.election.timeout.ms", int, 1000, "KIP-595 election timeout"),
    ConfigKey("quorum.fetch.timeout.ms", int, 2000, "KIP-595 fetch timeout"),
    ConfigKey("quorum.election.backoff.max.ms", int, 1000, "KIP-595 election backoff"),
    ConfigKey("quorum.request.timeout.ms", int, 2000, "KIP-595 request timeout"),
    ConfigKey("quorum.retry.backoff.ms", int, 20, "KIP-595 retry backoff"),
    ConfigKey("quorum.retry.backoff.max.ms", int, 1000, "KIP-595 retry backoff cap"),
    *(
        ConfigKey(f"controller.{name}", int, None, f"Kafka's name of {name}")
        for name in (
            "quorum.election.timeout.ms",
            "quorum.fetch.timeout.ms",
            "quorum.election.backoff.max.ms",
            "quorum.request.timeout.ms",
            "quorum.retry.backoff.ms",
            "quorum.retry.backoff.max.ms",
        )
    ),
    ConfigKey(
        "metadata.log.max.record.bytes.between.snapshots", int, 20971520, "KIP-630: snapshot after this many bytes"
    ),
    ConfigKey("metadata.log.max.snapshot.interval.ms", int, 3600000, "KIP-630: snapshot at least this often (0: off)"),
    ConfigKey("metadata.max.retention.bytes", int, 104857600, "KIP-630: metadata log kept below a snapshot (-1: all)"),
    ConfigKey("metadata.max.retention.ms", int, 604800000, "KIP-630: age of metadata log kept (-1: forever)"),
    ConfigKey("metrics.port", int, -1, "Prometheus text endpoint port (-1: off)"),
    ConfigKey("log.format", str, "text", "pylog: application log format, text or json (broker.logging_setup)"),
    ConfigKey("kafka.logs.dir", str, None, "pylog: directory of server.log, state-change.log, kafka-request.log"),
    ConfigKey("log.file.max.bytes", int, 104857600, "pylog: an application log file rolls over at this size"),
    ConfigKey("log.file.backup.count", int, 10, "pylog: rolled-over application log files kept"),
    ConfigKey("log.recovery.progress.interval.ms", int, 5000, "pylog: start-up log recovery progress line interval"),
    ConfigKey("gc.freeze.enable", _bool, True, "freeze the start-up heap out of Python's garbage collection"),
    # KIP-405 tiered storage (broker.log.remote; Kafka's RemoteLogManagerConfig names and defaults)
    ConfigKey("remote.log.storage.system.enable", _bool, False, "KIP-405: tiered storage on this broker"),
    ConfigKey("remote.log.manager.task.interval.ms", int, 30000, "KIP-405: how often segments are tiered"),
    ConfigKey("remote.log.storage.manager.class.name", str, None, "KIP-405: RemoteStorageManager (dotted path)"),
    ConfigKey("remote.log.storage.manager.impl.prefix", str, "rsm.config.", "KIP-405: prefix of the RSM's keys"),
    ConfigKey(
        "remote.log.metadata.manager.class.name",
        str,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "KIP-405: only the topic-based one (__remote_log_metadata)",
    ),
    ConfigKey("remote.log.metadata.manager.impl.prefix", str, "rlmm.config.", "KIP-405: prefix of the RLMM's keys"),
    ConfigKey("remote.log.metadata.manager.listener.name", str, None, "accepted: metadata is read locally"),
    ConfigKey("log.local.retention.ms", int, -2, "KIP-405: default local.retention.ms (-2: retention.ms)"),
    ConfigKey("log.local.retention.bytes", int, -2, "KIP-405: default local.retention.bytes (-2: retention.bytes)"),
    ConfigKey("broker.heartbeat.interval.ms", int, 2000, "KRaft: a broker heartbeats to the controller this often"),
    ConfigKey("broker.session.timeout.ms", int, 9000, "KRaft: a broker silent this long is fenced"),
]
KNOWN_KEYS: dict[str, ConfigKey] = {key.name: key for key in _KEYS}


@dataclass
class BrokerConfig:
    """Typed broker settings. ``values`` holds every known key (defaults filled); ``extra`` the rest."""

    values: dict[str, Any]
    extra: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)  # every key as given, for LogConfig

    def __getitem__(self, key: str) -> Any:
        if key in self.values:
            return self.values[key]
        return self.extra[key]

    def get(self, key: str, default: Any = None) -> Any:
        value = self.values.get(key, self.extra.get(key))
        return default if value is None else value

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self.values["log.dirs"])

    @property
    def retention_ms(self) -> int:
        if self.values["log.retention.ms"] is not None:
            return int(self.values["log.retention.ms"])
        if self.values["log.retention.minutes"] is not None:
            return int(self.values["log.retention.minutes"]) * 60_000
        return int(self.values["log.retention.hours"]) * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self.values["log.roll.ms"] is not None:
            return int(self.values["log.roll.ms"])
        return int(self.values["log.roll.hours"]) * 3_600_000

    @classmethod
    def from_mapping(cls, raw: Mapping[str, str], *, warn_unknown: bool = True) -> BrokerConfig:
        values = {key.name: key.default for key in _KEYS}
        extra: dict[str, str] = {}
        # KIP-405: keys under these prefixes configure the RSM and the RLMM (broker.log.remote.config)
        plugin_prefixes = (
            raw.get("remote.log.storage.manager.impl.prefix") or "rsm.config.",
            raw.get("remote.log.metadata.manager.impl.prefix") or "rlmm.config.",
        )
        for name, text in raw.items():
            spec = KNOWN_KEYS.get(name)
            if spec is None:
                if warn_unknown and not is_security_key(name) and not name.startswith(plugin_prefixes):
                    _warn_not_read(name, text)
                extra[name] = text
                continue
            try:
                values[name] = spec.parse(text)
            except ValueError as exc:
                raise ConfigError(f"config {name}={text!r} is invalid ({exc}): expected {spec.doc}") from exc
        if "broker.id" in raw and "node.id" not in raw:
            values["node.id"] = values["broker.id"]
        if "log.dir" in raw and "log.dirs" not in raw:
            values["log.dirs"] = [values["log.dir"]]
        if not values["controller.quorum.voters"] and values["quorum.voters"]:
            values["controller.quorum.voters"] = values["quorum.voters"]
        for name in list(values):
            # Kafka 3.x spells the KIP-595 timeouts controller.quorum.*; KIP-595's quorum.* wins if both are given
            if name.startswith("controller.quorum.") and name.endswith(".ms") and values[name] is not None:
                plain = name.removeprefix("controller.")
                if plain not in raw:
                    values[plain] = values[name]
        if not values["advertised.listeners"]:
            values["advertised.listeners"] = list(values["listeners"])
        config = cls(values, extra, dict(raw))
        config.validate()
        return config

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        raw: dict[str, str] = dict(load_properties(path)) if path else {}
        raw.update(overrides or {})
        return cls.from_mapping(raw)

    def validate(self) -> None:
        if self.values["message.max.bytes"] <= 0:
            raise ConfigError("message.max.bytes must be positive")
        if self.values["socket.request.max.bytes"] < 1024:
            raise ConfigError("socket.request.max.bytes must be at least 1024")
        for key in ("quota.window.num", "quota.window.size.seconds", "socket.request.frame.timeout.ms"):
            if self.values[key] < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.values[key]}")
        for key in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
            if self.values[key] < 0:
                raise ConfigError(f"{key} must be >= 0, got {self.values[key]}")
        if self.values["log.format"] not in ("text", "json"):
            raise ConfigError(f"log.format={self.values['log.format']!r}: expected text or json")
        if self.values["log.file.max.bytes"] < 1 or self.values["log.file.backup.count"] < 0:
            raise ConfigError("log.file.max.bytes must be at least 1 and log.file.backup.count at least 0")
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty: give at least one data directory (or --data-dir)")
        for uri in self.values["listeners"] + self.values["advertised.listeners"]:
            parse_listener(uri)
        self._validate_listener_roles()
        from broker.coordinator.consumer_group.config import (
            ConsumerGroupConfig,
            ConsumerGroupConfigError,
        )

        try:
            ConsumerGroupConfig.from_properties(self.get)
        except (ConsumerGroupConfigError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        from broker.log.remote.config import RemoteConfigError, RemoteLogManagerConfig

        try:
            RemoteLogManagerConfig.from_properties(self.get, self.raw)  # KIP-405 keys, Kafka's checks
        except RemoteConfigError as exc:
            raise ConfigError(str(exc)) from None
        refused = refusals(self.raw, self.listener_protocols)
        if refused:
            raise ConfigError("\n".join(refused))
        try:
            validate_quorum_config(self.values, self.raw)
        except RaftConfigError as exc:
            raise ConfigError(str(exc)) from None

    def _validate_listener_roles(self) -> None:
        """Kafka's checks of ``listeners`` against ``advertised.listeners``,
        ``controller.listener.names`` and ``inter.broker.listener.name``."""
        names = self.listener_names
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners {','.join(self.values['listeners'])}: each listener name may appear once")
        for uri in self.values["advertised.listeners"]:
            if parse_listener(uri).name not in names:
                raise ConfigError(f"advertised.listeners {uri!r} names a listener that is not in listeners")
        controllers = self.controller_listeners
        roles = set(self.values["process.roles"]) if self.kraft_enabled else set()
        if controllers and self.kraft_enabled and "controller" not in roles:
            raise ConfigError(
                f"controller.listener.names ({','.join(sorted(controllers))}) must not appear in listeners "
                "on a node without the controller role (process.roles=broker): remove that listener"
            )
        if "controller" in roles and "controller.listener.names" in self.raw and not controllers:
            raise ConfigError(
                "controller.listener.names must name at least one listener of listeners on a controller "
                f"(listeners: {','.join(names)})"
            )
        inter = self.values["inter.broker.listener.name"]
        if "security.inter.broker.protocol" in self.raw:
            if inter is not None:
                raise ConfigError("give only one of inter.broker.listener.name and security.inter.broker.protocol")
            protocol = str(self.values["security.inter.broker.protocol"]).strip().upper()
            if protocol not in names:  # Kafka: the listener named after the protocol
                raise ConfigError(
                    f"security.inter.broker.protocol={protocol} needs a listener named {protocol} in listeners "
                    f"(listeners: {','.join(names)}); or name the listener with inter.broker.listener.name"
                )
        if inter is not None and (inter.upper() not in names or inter.upper() in controllers):
            raise ConfigError(
                f"inter.broker.listener.name={inter} must name a listener of listeners that is not "
                f"a controller listener (listeners: {','.join(names)})"
            )

    @property
    def listener_names(self) -> list[str]:
        return [parse_listener(uri).name for uri in self.values["listeners"]]

    @property
    def controller_listeners(self) -> frozenset[str]:
        """The listeners of ``listeners`` named in ``controller.listener.names`` (empty: pylog's
        single-listener mode, every listener serves the quorum's RPCs too)."""
        wanted = {name.upper() for name in self.values["controller.listener.names"]}
        return frozenset(name for name in self.listener_names if name in wanted)

    @property
    def inter_broker_listener(self) -> str:
        """The listener other brokers (and Metadata answers) use: ``inter.broker.listener.name``,
        else the first listener that is not a controller listener, else the first listener."""
        if self.values["inter.broker.listener.name"] is not None:
            return str(self.values["inter.broker.listener.name"]).upper()
        if "security.inter.broker.protocol" in self.raw:
            return str(self.values["security.inter.broker.protocol"]).strip().upper()
        names = self.listener_names
        return next((name for name in names if name not in self.controller_listeners), names[0])

    @property
    def listener_protocols(self) -> dict[str, str]:
        """Each listener name of ``listeners`` → its security protocol (Kafka's map rule)."""
        try:
            protocol_map = parse_protocol_map(str(self.values["listener.security.protocol.map"]))
            names = [parse_listener(uri).name for uri in self.values["listeners"]]
            return {name: listener_protocol(name, protocol_map) for name in names}
        except ProtocolMapError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def controller_target(self) -> tuple[str, str]:
        """``(listener name, security protocol)`` this node dials the controllers on: the first of
        ``controller.listener.names`` (its protocol from ``listener.security.protocol.map``, which a
        broker-only node must map too, as Kafka requires); in pylog's single-listener mode (no
        protocol for that name) the voters serve the quorum on their first listener, so that one."""
        names = [str(name).upper() for name in self.values["controller.listener.names"]]
        try:
            protocol_map = parse_protocol_map(str(self.values["listener.security.protocol.map"]))
        except ProtocolMapError as exc:
            raise ConfigError(str(exc)) from None
        if names and names[0] in protocol_map and (names[0] in self.controller_listeners or not self._is_controller):
            return names[0], protocol_map[names[0]]
        first = self.listener_names[0]
        return first, self.listener_protocols[first]

    @property
    def _is_controller(self) -> bool:
        return self.kraft_enabled and "controller" in self.values["process.roles"]

    @property
    def kraft_enabled(self) -> bool:
        """KIP-595 mode: ``process.roles`` was given (``broker.raft.bootstrap``)."""
        return "process.roles" in self.raw


def _warn_not_read(name: str, text: str) -> None:
    """One warning for a key pylog does not read: a Kafka 3.7 key it ignores (with why), a
    topic-level key (passed to the logs), or a key Kafka 3.7 does not know either."""
    shown = "[hidden]" if _SECRET_WORDS.intersection(name.split(".")) else repr(text)  # never log a secret
    reason = IGNORED_BROKER_CONFIGS.get(name)
    if reason is not None:
        log.warning("Kafka config %s=%s is accepted and ignored by pylog: %s", name, shown, reason)
    elif name in IGNORED_TOPIC_CONFIGS:
        log.warning("Kafka topic config %s=%s is accepted and ignored by pylog", name, shown)
    else:
        log.warning("unknown config key %r ignored (value %s)", name, shown)


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listener(uri: str) -> Listener:
    """Parse ``NAME://host:port`` (host may be empty, ``0.0.0.0``, or ``[::1]``)."""
    name, sep, rest = uri.partition("://")
    if not sep:
        raise ConfigError(f"listener {uri!r} is not NAME://host:port (e.g. PLAINTEXT://127.0.0.1:9092)")
    host, _, port_text = rest.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError as exc:
        raise ConfigError(f"listener {uri!r} has no valid port") from exc
    if not 0 <= port <= 65535:
        raise ConfigError(f"listener {uri!r} port out of range")
    return Listener(name.upper(), host, port)
