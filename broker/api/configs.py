"""Effective topic and broker configs as DescribeConfigs reports them.

A topic's log settings are the broker's ``LogConfig`` (from ``server.properties``) with the
topic's overrides applied; ``config_source`` says where each value came from, with Kafka's
numbers: 1 topic override, 4 static broker config, 5 default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker
from broker.config import KNOWN_KEYS
from broker.ignored_configs import IGNORED_BROKER_CONFIGS, IGNORED_TOPIC_CONFIGS
from broker.log.config import CONFIG_SYNONYMS, LogConfig

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
    **{name: ignored.config_type for name, ignored in IGNORED_TOPIC_CONFIGS.items()},
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
        elif any(name in raw for name, _ in names[1:]):
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
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


def describe_broker_configs(broker: Broker) -> list[dict[str, Any]]:
    """The broker's static configs (``server.properties`` and overrides), read-only; Kafka 3.7
    keys pylog ignores are listed when they were given (as Kafka lists every key it knows)."""
    out = []
    for name in KNOWN_KEYS:
        value = broker.config.get(name)
        if value is None:
            continue
        source = STATIC_BROKER_CONFIG if name in broker.config.raw else DEFAULT_CONFIG
        out.append({"name": name, "value": _format_broker(value), "config_source": source, "read_only": True})
    for name in IGNORED_BROKER_CONFIGS:
        if name in broker.config.raw:
            value = broker.config.raw[name]
            out.append({"name": name, "value": value, "config_source": STATIC_BROKER_CONFIG, "read_only": True})
    return out


def _format_broker(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return _format(value)
