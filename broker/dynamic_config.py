"""Dynamic broker configuration (KIP-226): BROKER config resources changed at run time.

A BROKER resource is one broker (its id, ``"1"``) or the cluster-wide default (``""``). Its
dynamic configs are ``ConfigRecord``s of resource type 4 in the metadata log, so every node sees
them in log order and a restart keeps them. Precedence, as Kafka's ``DynamicBrokerConfig``:
per-broker dynamic > cluster-wide default dynamic > static (``server.properties``, overrides) >
Kafka's default. DescribeConfigs reports the sources with Kafka's numbers
(``DYNAMIC_BROKER_CONFIG`` 2, ``DYNAMIC_DEFAULT_BROKER_CONFIG`` 3).

The pure decisions (which keys may change, at which level; value checks; precedence) are the
functions of this module; ``DynamicBrokerConfig`` is the one stateful piece, applying the
effective values to the broker's ``BrokerConfig`` when the metadata image changes.

Which keys are dynamic is Kafka 4.1.1's answer (every key its DescribeConfigs of a broker shows
``read_only=false``; Kafka docs "Updating Broker Configs"). pylog applies live those that are
broker defaults of topic configs (``LIVE_KEYS``: ``message.max.bytes``, ``log.retention.ms``,
``log.segment.bytes`` ...): every topic's ``LogConfig`` is rebuilt with the new defaults; the
connection limits (``CONNECTION_KEYS``); the log cleaner's per-cleaning settings
(``CLEANER_KEYS``). The other dynamic keys are accepted, stored and reported but have no effect
in pylog (docs/configuration.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import KNOWN_KEYS, BrokerConfig
from broker.log.cleaner.config import CleanerConfig
from broker.log.config import CONFIG_SYNONYMS, LogConfig
from broker.quota.connections import ConnectionConfigError, parse_overrides

log = logging.getLogger(__name__)

BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DEFAULT_RESOURCE = ""  # the cluster-wide default

# Kafka 4.1.1's dynamic broker configs (DescribeConfigs read_only=false on a broker).
DYNAMIC_KEYS = frozenset(
    (
        "background.threads",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "listener.security.protocol.map",
        "listeners",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.local.retention.bytes",
        "log.local.retention.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "metric.reporters",
        "min.insync.replicas",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "principal.builder.class",
        "producer.id.expiration.ms",
        "remote.fetch.max.wait.ms",
        "remote.list.offsets.request.timeout.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.log.reader.threads",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.mechanism.inter.broker.protocol",
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "transaction.partition.verification.enable",
        "unclean.leader.election.enable",
    )
)

# Kafka refuses these at the cluster-wide default ("broker id must be specified"): a listener's
# addresses and security settings belong to one broker (DynamicBrokerConfig.PerBrokerConfigs).
PER_BROKER_ONLY_KEYS = frozenset(
    {"listeners", "listener.security.protocol.map"} | {k for k in DYNAMIC_KEYS if k.startswith(("ssl.", "sasl."))}
)

# Key material Kafka takes only under a listener prefix (``listener.name.<l>.ssl.keystore.location``).
PER_LISTENER_ONLY_KEYS = frozenset(
    k for k in DYNAMIC_KEYS if k.startswith(("ssl.keystore.", "ssl.truststore.")) or k == "ssl.key.password"
)

# Broker defaults of topic configs: pylog rebuilds every topic's LogConfig when one changes.
LIVE_KEYS = frozenset(name for synonyms in CONFIG_SYNONYMS.values() for name, _ in synonyms[1:] if name in DYNAMIC_KEYS)


# Connection limits (KIP-306, KIP-402, KIP-612): the broker's ConnectionQuotas take new values
# at once (``DynamicBrokerConfig.react``, broker/server.py).
CONNECTION_KEYS = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate"}
)


# The log cleaner's settings read per cleaning (``LogCleaner.config``); ``log.cleaner.threads``
# is stored but the number of workers stays the start-up one.
CLEANER_KEYS = frozenset(
    {
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second",
    }
)


# Kafka's broker-level replication throttles (``DynamicConfig.Broker``; KIP-73): dynamic-only keys,
# described read-only with their values; read from the metadata image by replication.
THROTTLE_KEYS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


class DynamicConfigError(ValueError):
    """A refused change; ``str()`` is Kafka's message (error code INVALID_REQUEST)."""


def is_known(name: str) -> bool:
    """Whether Kafka knows broker config ``name`` (DescribeConfigs then shows its value; an
    unknown key's value is hidden and flagged sensitive, as it might be a secret)."""
    return name in DYNAMIC_KEYS or name in KNOWN_KEYS or name in THROTTLE_KEYS


def _scala_set(keys: set[str]) -> str:
    return "Set(" + ", ".join(sorted(keys)) + ")"


def check_resource_name(resource_name: str, node_id: int, *, forwarded: bool) -> str | None:
    """Kafka's message (INVALID_REQUEST) when ``resource_name`` is neither ``""`` nor this
    broker's id; a request forwarded to the controller by another broker may name that broker."""
    if resource_name == DEFAULT_RESOURCE:
        return None
    try:
        broker_id = int(resource_name)
    except ValueError:
        return f"Node id must be an integer, but it is: {resource_name}"
    if broker_id != node_id and not forwarded:
        return f"Unexpected broker id, expected {node_id}, but received {resource_name}"
    return None


def check_changes(resource_name: str, changes: Mapping[str, str | None], effective_raw: Mapping[str, str]) -> None:
    """Raise ``DynamicConfigError`` (Kafka's words) unless ``changes`` (value None: delete) may be
    made on ``resource_name``: only dynamic keys (unknown keys are stored, as Kafka does), the
    per-broker-only keys not at the cluster default, values of the key's type that make a valid
    ``LogConfig`` together with ``effective_raw`` (the broker's current effective config)."""
    set_keys = {key for key, value in changes.items() if value is not None}
    static = {key for key in set_keys if key in KNOWN_KEYS and key not in DYNAMIC_KEYS}
    if static:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {_scala_set(static)}")
    per_listener = set_keys & PER_LISTENER_ONLY_KEYS
    if per_listener:
        raise DynamicConfigError(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            f"HashSet({', '.join(sorted(per_listener))})"
        )
    if resource_name == DEFAULT_RESOURCE:
        per_broker = set_keys & PER_BROKER_ONLY_KEYS
        if per_broker:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be specified: "
                + _scala_set(per_broker)
            )
    for key in sorted(set_keys & THROTTLE_KEYS):
        try:
            rate = int(str(changes[key]))
        except ValueError:
            raise DynamicConfigError(
                f"Invalid value {changes[key]} for configuration {key}: Not a number of type LONG"
            ) from None
        if rate < 0:
            raise DynamicConfigError(f"Invalid value {changes[key]} for configuration {key}: Value must be at least 0")
    for key in sorted(set_keys):
        spec = KNOWN_KEYS.get(key)
        value = changes[key]
        if spec is None or value is None:
            continue
        try:
            parsed = spec.parse(value)
        except ValueError:
            kind = "INT" if spec.parse is int else "DOUBLE" if spec.parse is float else "BOOLEAN"
            message = f"Invalid value {value} for configuration {key}: Not a number of type {kind}"
            raise DynamicConfigError(message) from None
        if isinstance(parsed, int) and not isinstance(parsed, bool) and parsed < 0 and key in _AT_LEAST_ZERO:
            raise DynamicConfigError(f"Invalid value {value} for configuration {key}: Value must be at least 0")
        if key in _AT_LEAST_ONE and isinstance(parsed, int) and parsed < 1:
            raise DynamicConfigError(f"Invalid value {value} for configuration {key}: Value must be at least 1")
    overrides = changes.get("max.connections.per.ip.overrides")
    if overrides is not None:
        try:
            parse_overrides(overrides)
        except ConnectionConfigError as exc:
            raise DynamicConfigError(str(exc)) from None
    cleaner_changes = {k: v for k, v in changes.items() if v is not None and k.startswith("log.cleaner.")}
    if cleaner_changes:
        try:
            CleanerConfig.from_properties({**effective_raw, **cleaner_changes})
        except ValueError as exc:
            raise DynamicConfigError(str(exc)) from None
    merged = {**effective_raw, **{k: v for k, v in changes.items() if v is not None and k in LIVE_KEYS}}
    try:
        LogConfig.from_properties(merged)
    except ValueError as exc:
        raise DynamicConfigError(str(exc)) from None


_AT_LEAST_ZERO = frozenset({"message.max.bytes", "log.index.interval.bytes", "log.segment.delete.delay.ms"})
_AT_LEAST_ONE = frozenset(
    {"log.cleaner.threads", "num.replica.fetchers", "num.io.threads", "num.network.threads", "min.insync.replicas"}
)


def apply_operations(current: Mapping[str, str], ops: Any) -> dict[str, str | None]:
    """IncrementalAlterConfigs operations (SET 0, DELETE 1, APPEND 2, SUBTRACT 3) on a resource's
    current dynamic configs → the changes (None: delete). APPEND/SUBTRACT treat the value as a
    comma-separated list, starting from the resource's current dynamic value, else the key's
    Kafka default (not the static value), as Kafka's ``ConfigAdminManager``."""
    changes: dict[str, str | None] = {}
    for op in ops:
        if op.config_operation == 0:
            changes[op.name] = op.value
        elif op.config_operation == 1:
            changes[op.name] = None
        elif op.config_operation in (2, 3):
            base = changes.get(op.name) or current.get(op.name) or _list_default(op.name)
            items = [i for i in base.split(",") if i]
            given = [i for i in (op.value or "").split(",") if i]
            if op.config_operation == 2:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            changes[op.name] = ",".join(items)
        else:
            raise DynamicConfigError(f"Unknown alter configs operation {op.config_operation}")
    return changes


def _list_default(name: str) -> str:
    spec = KNOWN_KEYS.get(name)
    if spec is None or spec.default is None:
        return ""
    return ",".join(spec.default) if isinstance(spec.default, list) else str(spec.default)


def replace_all(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str | None]:
    """AlterConfigs (33): the given configs replace the resource's dynamic configs."""
    changes: dict[str, str | None] = {key: None for key in current if key not in wanted}
    changes.update(wanted)
    return changes


def effective(
    static_raw: Mapping[str, str], broker_configs: Mapping[str, Mapping[str, str]], node_id: int
) -> dict[str, str]:
    """The broker's effective raw config: static, then the cluster default, then its own
    dynamic configs (Kafka's precedence); only dynamic keys are overlaid."""
    out = dict(static_raw)
    for level in (DEFAULT_RESOURCE, str(node_id)):
        out.update({k: v for k, v in broker_configs.get(level, {}).items() if k in DYNAMIC_KEYS})
    return out


def source_of(
    name: str, static_raw: Mapping[str, str], broker_configs: Mapping[str, Mapping[str, str]], node_id: int
) -> int:
    """DescribeConfigs ``config_source`` of broker config ``name``."""
    if name in DYNAMIC_KEYS and name in broker_configs.get(str(node_id), {}):
        return DYNAMIC_BROKER_CONFIG
    if name in DYNAMIC_KEYS and name in broker_configs.get(DEFAULT_RESOURCE, {}):
        return DYNAMIC_DEFAULT_BROKER_CONFIG
    return STATIC_BROKER_CONFIG if name in static_raw else DEFAULT_CONFIG


def synonyms(
    name: str,
    static_raw: Mapping[str, str],
    broker_configs: Mapping[str, Mapping[str, str]],
    node_id: int,
    default_value: str | None,
) -> list[dict[str, Any]]:
    """Kafka's synonyms of a broker config: one entry per level that gives it, highest first."""
    out: list[dict[str, Any]] = []
    for level, source in ((str(node_id), DYNAMIC_BROKER_CONFIG), (DEFAULT_RESOURCE, DYNAMIC_DEFAULT_BROKER_CONFIG)):
        if name in broker_configs.get(level, {}):
            out.append({"name": name, "value": broker_configs[level][name], "source": source})
    if name in static_raw:
        out.append({"name": name, "value": static_raw[name], "source": STATIC_BROKER_CONFIG})
    if default_value is not None:
        out.append({"name": name, "value": default_value, "source": DEFAULT_CONFIG})
    return out


class DynamicBrokerConfig:
    """Keeps a ``BrokerConfig``'s ``raw`` and ``values`` at the effective (static + dynamic)
    values: ``apply(broker_configs)`` after each metadata image change. ``on_log_defaults`` is
    called when a ``LIVE_KEYS`` value changed (rebuild every topic's LogConfig)."""

    def __init__(self, config: BrokerConfig, on_log_defaults: Callable[[], None] | None = None) -> None:
        self.config = config
        self.static_raw = dict(config.raw)
        self.static_values = dict(config.values)
        self.on_log_defaults = on_log_defaults
        self.broker_configs: dict[str, dict[str, str]] = {}
        self._reactions: list[tuple[frozenset[str], Callable[[], None]]] = []
        _REGISTRY[id(config)] = self

    def react(self, keys: frozenset[str], callback: Callable[[], None]) -> None:
        """Call ``callback`` (after ``config`` holds the new values) whenever one of ``keys``
        changes its effective value."""
        self._reactions.append((keys, callback))

    def apply(self, broker_configs: Mapping[str, Mapping[str, str]]) -> None:
        wanted = {level: dict(configs) for level, configs in broker_configs.items()}
        if wanted == self.broker_configs:
            return
        before = effective(self.static_raw, self.broker_configs, self.config.node_id)
        after = effective(self.static_raw, wanted, self.config.node_id)
        self.broker_configs = wanted
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        for key in changed:
            if key in after:
                self.config.raw[key] = after[key]
            else:
                self.config.raw.pop(key, None)
            spec = KNOWN_KEYS.get(key)
            if spec is not None:
                try:
                    self.config.values[key] = spec.parse(after[key]) if key in after else self.static_values[key]
                except ValueError:  # checked before it was stored; an old log may hold anything
                    log.warning("dynamic broker config %s=%r is not valid; keeping the static value", key, after[key])
                    self.config.values[key] = self.static_values[key]
        if changed:
            log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
        if changed & LIVE_KEYS and self.on_log_defaults is not None:
            self.on_log_defaults()
        for keys, callback in self._reactions:
            if changed & keys:
                callback()


_REGISTRY: dict[int, DynamicBrokerConfig] = {}


def dynamic_of(config: BrokerConfig) -> DynamicBrokerConfig | None:
    """The ``DynamicBrokerConfig`` attached to ``config`` (None on a broker without one)."""
    return _REGISTRY.get(id(config))
