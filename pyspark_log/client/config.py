"""Client configuration under Kafka's key names (``{"bootstrap.servers": "host:9092", ...}``).

Values may be given as Python values or as strings (as confluent-kafka and Spark options pass
them): ``"5"``, ``"true"``, ``"all"``. Unknown keys raise ``ConfigError`` (a typo must not be
silently ignored); a key of another client type (``linger.ms`` given to a consumer) is ignored,
so one dict can configure all three; serializer class names are ignored (see ``_IGNORED``).

Each client type reads its own ``ConfigDef`` table; ``parse(table, user)`` returns a plain dict
keyed by Kafka name with every default filled in.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark_log.client.errors import ConfigError
from pyspark_log.records.compression import CODEC_BY_NAME

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One key: its type (``int``, ``bool``, ``str``, ``list``, ``acks``), default and bounds."""

    name: str
    kind: str
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] | None = None


def _i(name: str, default: int | None, low: int | None = 0, high: int | None = None) -> ConfigDef:
    return ConfigDef(name, "int", default, low, high)


def _b(name: str, default: bool | None) -> ConfigDef:
    return ConfigDef(name, "bool", default)


def _s(name: str, default: str | None, choices: tuple[str, ...] | None = None) -> ConfigDef:
    return ConfigDef(name, "str", default, choices=choices)


_COMMON = (
    ConfigDef("bootstrap.servers", "list", None),
    _s("client.id", "pylog"),
    _i("request.timeout.ms", 30000),
    _i("retry.backoff.ms", 100),
    _i("retry.backoff.max.ms", 1000),
    _i("metadata.max.age.ms", 300000),
    _i("reconnect.backoff.ms", 50),
    _i("reconnect.backoff.max.ms", 1000),
    _i("socket.connection.setup.timeout.ms", 10000, 1),
    _i("connections.max.idle.ms", 540000, -1),
    _s("security.protocol", "PLAINTEXT", ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    _s("sasl.mechanism", "PLAIN", ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
    _s("sasl.username", ""),
    _s("sasl.password", ""),
    # Java client names, as Spark's Kafka connector passes them (kafka.sasl.jaas.config, ...)
    _s("sasl.jaas.config", ""),
    _s("ssl.truststore.location", ""),
    _s("ssl.truststore.type", "PEM", ("PEM", "JKS", "PKCS12")),
    _s("ssl.truststore.password", ""),
    _s("ssl.keystore.location", ""),
    _s("ssl.keystore.type", "JKS", ("PEM", "JKS", "PKCS12")),
    _s("ssl.keystore.password", ""),
    _s("ssl.ca.location", ""),
    _s("ssl.certificate.location", ""),
    _s("ssl.key.location", ""),
    _s("ssl.key.password", ""),
    # "" is the Java client's way of saying no host name check, "none" librdkafka's
    _s("ssl.endpoint.identification.algorithm", "https", ("https", "none", "")),
    _s("client.rack", ""),
    # client metrics windows (metrics.py; Kafka's SampledStat)
    _i("metrics.sample.window.ms", 30000, 1),
    _i("metrics.num.samples", 2, 1),
    _s("metrics.recording.level", "INFO", ("INFO", "DEBUG", "TRACE")),
)

PRODUCER = {
    d.name: d
    for d in (
        *_COMMON,
        ConfigDef("acks", "acks", -1),
        _i("retries", INT32_MAX),
        _i("batch.size", 16384),
        _i("linger.ms", 5),
        _i("buffer.memory", 32 * 1024 * 1024, 1),
        _i("max.block.ms", 60000),
        _s("compression.type", "none", tuple(CODEC_BY_NAME)),
        _i("max.in.flight.requests.per.connection", 5, 1),
        _i("delivery.timeout.ms", 120000, 1),
        _i("max.request.size", 1048576, 1),
        _b("enable.idempotence", None),
        _s("transactional.id", None),
        _i("transaction.timeout.ms", 60000, 1),
        _b("partitioner.ignore.keys", False),
    )
}

CONSUMER = {
    d.name: d
    for d in (
        *_COMMON,
        _s("group.id", None),
        _s("auto.offset.reset", "latest", ("earliest", "latest", "none")),
        _s("isolation.level", "read_uncommitted", ("read_uncommitted", "read_committed")),
        _i("fetch.min.bytes", 1),
        _i("fetch.max.wait.ms", 500),
        _i("fetch.max.bytes", 52428800, 1),
        _i("max.partition.fetch.bytes", 1048576, 1),
        _i("max.poll.records", 500, 1),
        _i("default.api.timeout.ms", 60000),
        _b("check.crcs", True),
        _b("enable.auto.commit", True),
        _i("auto.commit.interval.ms", 5000),
        _b("allow.auto.create.topics", False),
        _s("group.instance.id", None),
        _i("session.timeout.ms", 45000, 1),
        _i("heartbeat.interval.ms", 3000, 1),
        _i("max.poll.interval.ms", 300000, 1),
        _s("partition.assignment.strategy", "range,cooperative-sticky"),
        # KIP-848: "consumer" makes the broker assign (ConsumerGroupHeartbeat; group/consumer_member.py)
        _s("group.protocol", "classic", ("classic", "consumer")),
        _s("group.remote.assignor", None),
        _b("exclude.internal.topics", True),
    )
}

ADMIN = {d.name: d for d in (*_COMMON, _i("default.api.timeout.ms", 60000), _i("retries", INT32_MAX))}

_ALL_KEYS = frozenset(PRODUCER) | frozenset(CONSUMER) | frozenset(ADMIN)

# Kafka keys accepted and ignored: serializers are the caller's business (values are bytes/str).
_IGNORED = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"})

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _to_int(d: ConfigDef, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{d.name} must be an integer, not {value!r}")
    try:
        n = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{d.name} must be an integer, not {value!r}") from None
    if d.low is not None and n < d.low:
        raise ConfigError(f"{d.name} must be >= {d.low}, not {n}")
    if d.high is not None and n > d.high:
        raise ConfigError(f"{d.name} must be <= {d.high}, not {n}")
    return n


def _to_bool(d: ConfigDef, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{d.name} must be true or false, not {value!r}")


def _to_acks(d: ConfigDef, value: Any) -> int:
    text = str(value).strip().lower()
    if text == "all":
        return -1
    if text in {"0", "1", "-1"}:
        return int(text)
    raise ConfigError(f"acks must be 0, 1, all or -1, not {value!r}")


def _to_list(d: ConfigDef, value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [str(item).strip() for item in items if str(item).strip()]
    if not out:
        raise ConfigError(f"{d.name} must name at least one host:port")
    return out


def _to_str(d: ConfigDef, value: Any) -> str:
    text = str(value).strip()
    if d.choices is not None:
        low = text.lower()
        if low not in {c.lower() for c in d.choices}:
            raise ConfigError(f"{d.name} must be one of {', '.join(d.choices)}, not {value!r}")
        return next(c for c in d.choices if c.lower() == low)
    return text


_CONVERT: dict[str, Callable[[ConfigDef, Any], Any]] = {
    "int": _to_int,
    "bool": _to_bool,
    "acks": _to_acks,
    "list": _to_list,
    "str": _to_str,
}


def parse(table: Mapping[str, ConfigDef], user: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """Validate ``user`` against ``table``; return every key of the table with its value."""
    out = {name: d.default for name, d in table.items()}
    for key, value in (user or {}).items():
        if key in _IGNORED:
            continue
        d = table.get(key)
        if d is None:
            if key in _ALL_KEYS:  # another client type's key: ignored, as confluent-kafka does
                log.debug("%s config key %r is not used by a %s", key, key, what)
                continue
            raise ConfigError(f"unknown {what} config key {key!r}")
        out[key] = None if value is None else _CONVERT[d.kind](d, value)
    if not out.get("bootstrap.servers"):
        raise ConfigError(f"{what} config needs bootstrap.servers (e.g. 'localhost:9092')")
    return out


MAX_IN_FLIGHT_IDEMPOTENT = 5


def resolve_idempotence(c: Mapping[str, Any]) -> bool:
    """Whether a parsed producer config is idempotent, as Kafka 3.x's ``ProducerConfig`` decides.

    ``enable.idempotence`` defaults to true. Left unset, a setting idempotence cannot honour
    (``acks`` other than all, ``retries=0``, more than 5 requests in flight) turns it off quietly;
    set to true explicitly, the same setting is a ``ConfigError`` naming the option and the fix.
    ``transactional.id`` needs idempotence."""
    explicit = c["enable.idempotence"]
    txn = c["transactional.id"]
    conflicts = []
    if c["acks"] != -1:
        conflicts.append(f"acks must be all (-1) for an idempotent producer, not {c['acks']}: set acks=all")
    if c["retries"] == 0:
        conflicts.append("retries must be > 0 for an idempotent producer: leave retries unset or set it above 0")
    if c["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_IDEMPOTENT:
        conflicts.append(
            "max.in.flight.requests.per.connection must be <= 5 for an idempotent producer, not "
            f"{c['max.in.flight.requests.per.connection']}: set it to 5 or less"
        )
    if explicit is False:
        if txn:
            raise ConfigError(
                "transactional.id needs enable.idempotence=true: remove enable.idempotence=false "
                "or remove transactional.id"
            )
        return False
    if conflicts:
        if explicit or txn:
            what = "transactional.id" if txn and not explicit else "enable.idempotence=true"
            raise ConfigError(f"{what}: {conflicts[0]} (or set enable.idempotence=false without transactional.id)")
        log.info("idempotence turned off by the producer config: %s", conflicts[0])
        return False
    return True


def parse_host_port(server: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port``, ``[v6]:port``, ``PLAINTEXT://host:port`` or ``host`` (port 9092)."""
    text = server.split("://", 1)[-1].strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.lstrip(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ConfigError(f"bootstrap server {server!r} has no host")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ConfigError(f"bootstrap server {server!r} has a bad port") from None
    if not 0 < port < 65536:
        raise ConfigError(f"bootstrap server {server!r} has a bad port")
    return host, port


def client_software() -> tuple[str, str]:
    """(name, version) sent in ApiVersions v3+ (KIP-511)."""
    try:
        from importlib.metadata import version

        ver = version("pyspark-pylog")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        ver = "0.0.0"
    return "pylog-python", f"{ver}-py{sys.version_info.major}.{sys.version_info.minor}"
