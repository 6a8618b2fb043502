"""Effective topic and broker configs as DescribeConfigs reports them.

A topic's log settings are the broker's ``LogConfig`` (from ``server.properties``) with the
topic's overrides applied; ``config_source`` says where each value came from, with Kafka's
numbers: 1 topic override, 4 static broker config, 5 default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker
from broker.config import KNOWN_KEYS
from broker.dynamic_config import (
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_KEYS,
    dynamic_of,
    is_known,
    source_of,
)
from broker.dynamic_config import synonyms as dynamic_synonyms
from broker.ignored_configs import IGNORED_BROKER_CONFIGS, IGNORED_TOPIC_CONFIGS
from broker.log.config import CONFIG_SYNONYMS, LogConfig
from broker.logging_setup import (
    LoggerLevelError,
    check_level_change,
    describe_loggers,
    reset_logger_level,
    set_logger_level,
)
from pyspark_log.wire.errors import ErrorCode

TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigs v3+ ``config_type`` (Kafka's ConfigDef types), reported for topic configs.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
TOPIC_CONFIG_TYPES = {
    "cleanup.policy": LIST,
    "compression.type": STRING,
    "delete.retention.ms": LONG,
    "file.delete.delay.ms": LONG,
    "flush.messages": LONG,
    "flush.ms": LONG,
    "index.interval.bytes": INT,
    "max.compaction.lag.ms": LONG,
    "max.message.bytes": INT,
    "message.downconversion.enable": BOOLEAN,
    "message.timestamp.after.max.ms": LONG,
    "message.timestamp.before.max.ms": LONG,
    "message.timestamp.difference.max.ms": LONG,
    "message.timestamp.type": STRING,
    "min.cleanable.dirty.ratio": DOUBLE,
    "min.compaction.lag.ms": LONG,
    "min.insync.replicas": INT,
    "preallocate": BOOLEAN,
    "retention.bytes": LONG,
    "retention.ms": LONG,
    "segment.bytes": INT,
    "segment.index.bytes": INT,
    "segment.jitter.ms": LONG,
    "segment.ms": LONG,
    "unclean.leader.election.enable": BOOLEAN,
    "remote.storage.enable": BOOLEAN,
    "local.retention.ms": LONG,
    "local.retention.bytes": LONG,
    **{name: ignored.config_type for name, ignored in IGNORED_TOPIC_CONFIGS.items()},
}

# ``config_type`` of broker configs: Kafka's ConfigDef type of each key (``KafkaConfig``,
# checked against Kafka 4.1.1's DescribeConfigs by tests/differential); INT unless listed. Keys
# Kafka 4 removed keep Kafka 3.7's type; pylog-only keys are typed by their values.
SHORT, CLASS = 4, 8
BROKER_CONFIG_TYPES = {
    **dict.fromkeys(
        (
            "controller.listener.names",
            "inter.broker.listener.name",
            "log.dirs",
            "log.dir",
            "listeners",
            "advertised.listeners",
            "listener.security.protocol.map",
            "security.inter.broker.protocol",
            "log.message.timestamp.type",
            "compression.type",
            "max.connections.per.ip.overrides",
            "broker.rack",
            "replica.selector.class",
            "metrics.recording.level",
            "remote.log.metadata.manager.class.name",
            "remote.log.storage.manager.class.name",
            "metadata.log.dir",
            "early.start.listeners",
            "cluster.id",
            "log.message.format.version",
            "inter.broker.protocol.version",
        ),
        STRING,
    ),
    **dict.fromkeys(
        (
            "unclean.leader.election.enable",
            "auto.leader.rebalance.enable",
            "auto.create.topics.enable",
            "delete.topic.enable",
            "log.cleaner.enable",
            "log.preallocate",
            "controlled.shutdown.enable",
            "remote.log.storage.system.enable",
            "transaction.partition.verification.enable",
            "gc.freeze.enable",
            "log.message.downconversion.enable",
            "zookeeper.set.acl",
            "zookeeper.metadata.migration.enable",
            "broker.id.generation.enable",
            "auto.include.jmx.reporter",
            "unstable.api.versions.enable",
            "unstable.metadata.versions.enable",
        ),
        BOOLEAN,
    ),
    **dict.fromkeys(
        (
            "leader.imbalance.check.interval.seconds",
            "log.roll.ms",
            "log.retention.ms",
            "log.retention.bytes",
            "log.retention.check.interval.ms",
            "log.flush.interval.messages",
            "log.flush.interval.ms",
            "log.flush.scheduler.interval.ms",
            "log.segment.delete.delay.ms",
            "log.cleaner.dedupe.buffer.size",
            "log.cleaner.backoff.ms",
            "log.cleaner.delete.retention.ms",
            "log.cleaner.min.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            "log.roll.jitter.ms",
            "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
            "log.message.timestamp.difference.max.ms",
            "connections.max.idle.ms",
            "connections.max.reauth.ms",
            "replica.lag.time.max.ms",
            "replica.high.watermark.checkpoint.interval.ms",
            "offsets.retention.check.interval.ms",
            "queued.max.request.bytes",
            "log.dir.failure.timeout.ms",
            "metrics.sample.window.ms",
            "remote.log.manager.task.interval.ms",
            "log.local.retention.ms",
            "log.local.retention.bytes",
            "metadata.log.segment.ms",
            "metadata.max.retention.bytes",
            "metadata.max.retention.ms",
            "metadata.log.max.record.bytes.between.snapshots",
            "metadata.log.max.snapshot.interval.ms",
            "log.dir.failure.probe.interval.ms",
            "log.cleanup.interval.ms",
            "controlled.shutdown.retry.backoff.ms",
            "zookeeper.session.timeout.ms",
            "zookeeper.connection.timeout.ms",
        ),
        LONG,
    ),
    **dict.fromkeys(
        ("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "log.cleaner.min.cleanable.ratio"),
        DOUBLE,
    ),
    **dict.fromkeys(
        (
            "process.roles",
            "controller.quorum.voters",
            "controller.quorum.bootstrap.servers",
            "quorum.voters",
            "log.cleanup.policy",
            "metric.reporters",
            "kafka.metrics.reporters",
            "group.coordinator.rebalance.protocols",
            "group.consumer.assignors",
            "group.share.assignors",
        ),
        LIST,
    ),
    **dict.fromkeys(
        (
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "offsets.commit.required.acks",
            "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr",
        ),
        SHORT,
    ),
    **dict.fromkeys(
        ("create.topic.policy.class.name", "alter.config.policy.class.name", "client.quota.callback.class"), CLASS
    ),
    "zookeeper.connect": STRING,
    "log.format": STRING,
    "kafka.logs.dir": STRING,
    "group.consumer.migration.policy": STRING,
    "log.file.max.bytes": LONG,
    "log.recovery.progress.interval.ms": LONG,
    "remote.log.storage.manager.impl.prefix": STRING,
    "remote.log.metadata.manager.impl.prefix": STRING,
    "remote.log.metadata.manager.listener.name": STRING,
}

# Kafka topic configs that are not ``LogConfig`` fields, with Kafka's defaults (the controller reads
# unclean.leader.election.enable from the topic's overrides).
_STORED_ONLY_DEFAULTS = {
    "unclean.leader.election.enable": "false",
    **{name: ignored.default for name, ignored in IGNORED_TOPIC_CONFIGS.items()},
}


def broker_log_config(broker_raw: Mapping[str, str]) -> LogConfig:
    """The default ``LogConfig`` of every topic: Kafka defaults overridden by broker ``log.*`` keys."""
    return LogConfig.from_properties(broker_raw)


def topic_log_config(broker_raw: Mapping[str, str], overrides: Mapping[str, str]) -> LogConfig:
    return broker_log_config(broker_raw).with_overrides(overrides)


def _broker_level_source(broker: Broker, synonyms: list[str]) -> int:
    """Where a topic config without an override gets its value: the first broker synonym (by
    Kafka's priority) given at some level, its highest level (KIP-226: the broker's dynamic
    config 2, the cluster default 3, server.properties 4), else Kafka's default (5)."""
    dynamic = dynamic_of(broker.config)
    static_raw = dynamic.static_raw if dynamic is not None else broker.config.raw
    levels = dynamic.broker_configs if dynamic is not None else {}
    for name in synonyms:
        source = source_of(name, static_raw, levels, broker.config.node_id)
        if source != DEFAULT_CONFIG:
            return source
    return DEFAULT_CONFIG


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def describe_topic_configs(broker: Broker, topic: str, *, overrides: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every topic config with its effective value and source (``topic`` is for messages only)."""
    del topic
    raw = broker.config.raw
    effective = topic_log_config(raw, overrides)
    out: list[dict[str, Any]] = []
    for fld in dataclasses.fields(effective):
        names = CONFIG_SYNONYMS.get(fld.name)
        if not names:
            continue
        topic_name = names[0][0]
        if topic_name in overrides:
            source = TOPIC_CONFIG
        else:
            source = _broker_level_source(broker, [name for name, _ in names[1:]])
        out.append(
            {
                "name": topic_name,
                "value": _format(getattr(effective, fld.name)),
                "config_source": source,
                "read_only": False,
            }
        )
    for name, default in _STORED_ONLY_DEFAULTS.items():
        value = overrides.get(name, default)
        source = TOPIC_CONFIG if name in overrides else DEFAULT_CONFIG
        out.append({"name": name, "value": value, "config_source": source, "read_only": False})
    for config in out:
        config["config_type"] = TOPIC_CONFIG_TYPES.get(config["name"], 0)
    return sorted(out, key=lambda c: c["name"])


# KIP-595's names of keys Kafka spells ``controller.quorum.*``.
_KAFKA_QUORUM_KEYS = frozenset(
    {
        "quorum.voters",
        "quorum.election.timeout.ms",
        "quorum.fetch.timeout.ms",
        "quorum.election.backoff.max.ms",
        "quorum.request.timeout.ms",
        "quorum.retry.backoff.ms",
    }
)


def describe_broker_configs(broker: Broker, *, default_resource: bool = False) -> list[dict[str, Any]]:
    """The broker's configs with their effective values; Kafka 3.7 keys pylog ignores are listed
    when they were given (as Kafka lists every key it knows).

    KIP-226: a key is read-only unless Kafka 4.1.1 updates it dynamically
    (``broker.dynamic_config.DYNAMIC_KEYS``); the source is DYNAMIC_BROKER_CONFIG (2),
    DYNAMIC_DEFAULT_BROKER_CONFIG (3), STATIC_BROKER_CONFIG (4) or DEFAULT_CONFIG (5) in that
    precedence, with Kafka's synonyms (one per level giving the key). With ``default_resource``
    (the resource ``""``) only the cluster-wide dynamic defaults are listed, as Kafka does.

    The KIP-595 timeouts are listed under Kafka's names (``controller.quorum.election.timeout.ms``
    ...) with their effective values; KIP-595's spellings (``quorum.*``) only when given."""
    dynamic_configs = broker.image().broker_configs
    if default_resource:
        return [
            {
                "name": name, "value": value if is_known(name) else None,
                "config_source": DYNAMIC_DEFAULT_BROKER_CONFIG, "is_sensitive": not is_known(name),
                "read_only": name not in DYNAMIC_KEYS, "config_type": BROKER_CONFIG_TYPES.get(name, INT),
                "synonyms": [
                    {"name": name, "value": value if is_known(name) else None, "source": DYNAMIC_DEFAULT_BROKER_CONFIG}
                ],
            }
            for name, value in sorted(dynamic_configs.get("", {}).items())
        ]  # fmt: skip
    out = []
    dynamic = dynamic_of(broker.config)
    static_raw = dynamic.static_raw if dynamic is not None else broker.config.raw
    raw = broker.config.raw
    for name in KNOWN_KEYS:
        if name in _KAFKA_QUORUM_KEYS and name not in raw:
            continue  # listed as controller.<name>
        plain = name.removeprefix("controller.")
        if plain in _KAFKA_QUORUM_KEYS and plain != "quorum.voters":
            value = broker.config.get(plain)
            given = name in raw or plain in raw
        else:
            value = broker.config.get(name)
            given = name in raw
        if value is None:
            continue
        source = STATIC_BROKER_CONFIG if given else DEFAULT_CONFIG
        if name in DYNAMIC_KEYS:
            source = source_of(name, static_raw, dynamic_configs, broker.config.node_id)
        default = KNOWN_KEYS[name].default
        out.append(
            {
                "name": name, "value": _format_broker(value), "config_source": source,
                "read_only": name not in DYNAMIC_KEYS,
                "synonyms": dynamic_synonyms(
                    name, static_raw, dynamic_configs, broker.config.node_id,
                    None if default is None else _format_broker(default),
                ),
            }
        )  # fmt: skip
    listed = {str(c["name"]) for c in out}
    for name in IGNORED_BROKER_CONFIGS:
        if name in broker.config.raw and name not in listed:
            value = broker.config.raw[name]
            out.append({"name": name, "value": value, "config_source": STATIC_BROKER_CONFIG, "read_only": True})
            listed.add(name)
    # dynamic configs of keys pylog does not otherwise list (Kafka keys it has no use for, unknown keys)
    for level, level_source in (
        (str(broker.config.node_id), DYNAMIC_BROKER_CONFIG),
        ("", DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        for name, value in sorted(dynamic_configs.get(level, {}).items()):
            if name not in listed:
                # Kafka shows no value for a key it does not know (it might be a secret)
                known = is_known(name)
                out.append(
                    {
                        "name": name, "value": value if known else None, "config_source": level_source,
                        "read_only": name not in DYNAMIC_KEYS, "is_sensitive": not known,
                    }
                )  # fmt: skip
                listed.add(name)
    for config in out:
        config["config_type"] = BROKER_CONFIG_TYPES.get(str(config["name"]), INT)
        if not config.get("synonyms"):  # Kafka lists at least the level the value comes from
            config["synonyms"] = [{"name": config["name"], "value": config["value"], "source": config["config_source"]}]
    return out


def _format_broker(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return _format(value)


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it, which is how Kafka's DescribeConfigs
    shows DOUBLE configs: the shortest round-tripping digits, ``1.0E-4``-style scientific notation
    outside [1e-3, 1e7) (``1.7976931348623157E308``), at least one digit after the point."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)  # Python's repr: the shortest round-tripping digits, as Java's
        return text if "." in text else f"{text}.0"
    exponent = int(f"{value:.16e}".partition("e")[2])
    digits = repr(value).split("e")[0].replace("-", "").replace(".", "").lstrip("0") or "0"
    head, tail = digits[0], digits[1:].rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    return f"{sign}{head}.{tail}E{exponent}"


# -- BROKER_LOGGER (8): the broker's log levels at run time (KIP-412) --------------------------------

BROKER_LOGGER_RESOURCE = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6  # DescribeConfigs config_source of every logger
OP_SET, OP_DELETE = 0, 1


def check_broker_logger_name(broker: Broker, resource_name: str) -> tuple[int, str] | None:
    """``(error code, message)`` when ``resource_name`` is not this broker's id, as Kafka's
    ``ConfigHelper`` answers (INVALID_REQUEST); None when it is."""
    if not resource_name:
        return ErrorCode.INVALID_REQUEST, "Broker id must not be empty"
    if resource_name != str(broker.node_id):
        return (
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} but received {resource_name}",
        )
    return None


def describe_broker_loggers() -> list[dict[str, Any]]:
    """Every logger of this broker process with its effective level (log4j names), source
    DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, empty documentation, as Kafka's DescribeConfigs
    answers for BROKER_LOGGER (checked by tests/differential/test_broker_loggers.py)."""
    return [
        {
            "name": name,
            "value": level,
            "config_source": DYNAMIC_BROKER_LOGGER_CONFIG,
            "read_only": False,
            "documentation": "",
        }
        for name, level in describe_loggers().items()
    ]


def alter_broker_loggers(ops: Any, *, validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on BROKER_LOGGER: every op is checked first (SET to one of log4j's
    levels, DELETE = back to the root logger's level; APPEND/SUBTRACT refused), then applied
    unless ``validate_only``. ``(error code, message)``: INVALID_CONFIG for an unknown logger or
    level, INVALID_REQUEST for a refused operation, as Kafka's ``ConfigAdminManager``."""
    try:
        for op in ops:
            if op.config_operation == OP_SET:
                check_level_change(op.name, op.value)
            elif op.config_operation == OP_DELETE:
                check_level_change(op.name, None)
            else:
                kind = {2: "APPEND", 3: "SUBTRACT"}.get(op.config_operation, str(op.config_operation))
                return ErrorCode.INVALID_REQUEST, f"{kind} operation is not allowed for the BROKER_LOGGER resource"
    except LoggerLevelError as exc:
        return (ErrorCode.INVALID_CONFIG if exc.invalid_config else ErrorCode.INVALID_REQUEST), str(exc)
    if not validate_only:
        for op in ops:
            if op.config_operation == OP_SET:
                set_logger_level(op.name, op.value)
            else:
                reset_logger_level(op.name)
    return ErrorCode.NONE, None
