"""Options of the ``pylog`` sink (``df.write`` / ``df.writeStream`` with ``format("pylog")``).

``parse_sink_options(raw, mode)`` turns the user's string options into a frozen, picklable
``SinkOptions`` or raises ``PylogOptionError`` naming the option, the bad value and the fix, when
Spark asks the data source for a writer (``save()`` / ``start()``), before any row is written.
Keys are matched case-insensitively, as in ``options.py``.

=============================== ============================ ======================================
option                          default                      notes
=============================== ============================ ======================================
bootstrap.servers / kafka.boot… required                     both spellings accepted
topic                           –                            overrides the ``topic`` column (Spark)
includeHeaders                  –                            accepted (true/false) as Spark's sink
                                                             does; a ``headers`` column is written
                                                             whenever the DataFrame has one
transactionalIdPrefix           stream: ``pylog-<query id>`` task p of a query uses transactional
                                batch: ``pylog-batch-<uuid>`` id ``<prefix>-<p>``; a stream's must
                                                             be stable across restarts and unique
                                                             per query (its checkpoint)
kafka.transaction.timeout.ms    900000 (15 min)              must exceed the longest micro-batch
                                                             and be <= the broker's
                                                             transaction.max.timeout.ms
kafka.batch.size                1048576 (1 MiB)              the producer's own default is 16384;
                                                             a task writes many rows at once, and
                                                             big batches cost the broker far less
kafka.*                         –                            producer settings (``kafka.`` stripped)
=============================== ============================ ======================================

The producer is always transactional and idempotent with acks=all; settings that contradict that
(``kafka.transactional.id``, ``kafka.enable.idempotence=false``, ``kafka.acks`` other than all) are
rejected with the option to use instead, as are serializers (values are written as given) and
options of the source.
"""

from __future__ import annotations

import difflib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark_log.client.config import PRODUCER, parse
from pyspark_log.client.errors import ConfigError
from pyspark_log.spark.options import lower_keys, parse_bool, parse_positive_int
from pyspark_log.spark.specs import PylogOptionError

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "SinkMode",
    "SinkOptions",
    "parse_sink_options",
]

SinkMode = Literal["stream", "batch"]

DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's default transaction.max.timeout.ms
# A task hands its rows to the producer in bulk: 1 MiB batches take the broker a fraction of the
# per-batch work of the producer's 16 KiB default (bench/spark_write.py).
DEFAULT_SINK_BATCH_SIZE = "1048576"
# what the names the sink derives start with, unless groupIdPrefix says otherwise
DEFAULT_DERIVED_PREFIX = "pylog"
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")

# includeHeaders: accepted as Spark's Kafka sink accepts it (the headers column is written when the
# DataFrame has one), so a reader's option chain can be reused for the writer
_CANONICAL = [
    "bootstrap.servers",
    "kafka.bootstrap.servers",
    "topic",
    "transactionalIdPrefix",
    "groupIdPrefix",
    "includeHeaders",
]
_NAMES = {name.lower(): name for name in _CANONICAL}
# Options a DataStreamWriter / DataFrameWriter hands every sink; they are Spark's, not ours.
_SPARK_OWN = frozenset({"checkpointlocation"})
_SOURCE_ONLY = frozenset(
    {
        "subscribe",
        "subscribepattern",
        "assign",
        "startingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingoffsets",
        "endingtimestamp",
        "endingoffsetsbytimestamp",
        "failondataloss",
        "maxoffsetspertrigger",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "minpartitions",
        "maxrecordsperpartition",
        "isolationlevel",
        "groupid",
        "kafkaconsumer.polltimeoutms",
        "fetchoffset.numretries",
        "fetchoffset.retryintervalms",
    }
)
_REJECTED_KAFKA = {
    "kafka.transactional.id": "set transactionalIdPrefix instead; the sink derives one transactional id per task",
    "kafka.key.serializer": "keys are written as given (binary or UTF-8 string); serialize them with DataFrame "
    "operations",
    "kafka.value.serializer": "values are written as given (binary or UTF-8 string); serialize them with DataFrame "
    "operations",
    "kafka.interceptor.classes": "remove it; interceptors are not supported",
}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Every option of one write, validated. Picklable: it travels to executors.

    ``transactional_id_prefix`` is None for a stream that did not set one: each task then uses
    ``<derived_prefix>-<query id>`` (Spark's query id, kept in the checkpoint), see
    ``sink.resolve_prefix``. ``derived_prefix`` is the ``groupIdPrefix`` option (default ``pylog``):
    it starts every transactional id and "batch done" consumer group name the sink derives, so that
    prefixed ACLs (Group and TransactionalId resources) can cover them, as Spark's Kafka source
    derives its group ids from ``groupIdPrefix``.
    """

    bootstrap_servers: str
    topic: str | None
    transactional_id_prefix: str | None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    client_config: Mapping[str, str] = field(default_factory=dict)
    derived_prefix: str = DEFAULT_DERIVED_PREFIX

    def producer_config(self, transactional_id: str) -> dict[str, str]:
        """The transactional producer's settings for ``transactional_id``."""
        return {
            "batch.size": DEFAULT_SINK_BATCH_SIZE,
            **self.client_config,
            "bootstrap.servers": self.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": str(self.transaction_timeout_ms),
            "enable.idempotence": "true",
            "acks": "all",
        }

    def admin_config(self) -> dict[str, str]:
        """Settings for the admin client and ``complete_transaction`` (no transactional id)."""
        return {**self.client_config, "bootstrap.servers": self.bootstrap_servers}


def _fail(key: str, value: object, problem: str, fix: str) -> PylogOptionError:
    return PylogOptionError(f"{_NAMES.get(key, key)} ({value!r}) {problem}: {fix}")


def _check_known(opts: Mapping[str, str]) -> None:
    for key, value in opts.items():
        if key in _NAMES or key in _SPARK_OWN:
            continue
        if key in _REJECTED_KAFKA:
            raise _fail(key, value, "is not supported by the pylog sink", _REJECTED_KAFKA[key])
        if key.startswith("kafka."):
            if key == "kafka.":
                raise _fail(key, value, "has no setting name", "name a producer setting after the prefix")
            continue
        if key in _SOURCE_ONLY:
            raise _fail(
                key,
                value,
                "is an option of the pylog source, not of the sink",
                "remove it from the writer; name the output topic with the topic option or a topic column",
            )
        if key == "path":
            raise _fail(key, value, "is not used by the pylog sink", "remove the save()/start() path; set topic")
        close = difflib.get_close_matches(key, list(_NAMES), n=1, cutoff=0.75)
        fix = f"did you mean {_NAMES[close[0]]}?" if close else "remove it (producer settings take a kafka. prefix)"
        raise _fail(key, value, "is not an option of the pylog sink", fix)


def _servers(opts: Mapping[str, str]) -> str:
    a, b = opts.get("bootstrap.servers"), opts.get("kafka.bootstrap.servers")
    if a is not None and b is not None and a.strip() != b.strip():
        raise PylogOptionError(
            f"bootstrap.servers ({a!r}) and kafka.bootstrap.servers ({b!r}) disagree: "
            "they are the same setting, give only one"
        )
    servers = a if a is not None else b
    if servers is None or not servers.strip():
        raise PylogOptionError(
            "bootstrap.servers is not set: set it to the broker's host:port, e.g. "
            '.option("bootstrap.servers", "localhost:9092")'
        )
    return servers.strip()


def _topic(opts: Mapping[str, str]) -> str | None:
    if "topic" not in opts:
        return None
    topic = opts["topic"].strip()
    if topic in {".", ".."} or not LEGAL_TOPIC.fullmatch(topic):
        raise _fail(
            "topic",
            opts["topic"],
            "is not a legal topic name",
            "use 1 to 249 characters from a-z, A-Z, 0-9, '.', '_', '-' (not '.' or '..')",
        )
    return topic


def _name_option(opts: Mapping[str, str], key: str, fix: str) -> str | None:
    value = opts.get(key)
    if value is None:
        return None
    name = value.strip()
    if not name or any(c.isspace() for c in name):
        raise _fail(key, value, "is empty or contains whitespace", fix)
    return name


def _derived_prefix(opts: Mapping[str, str]) -> str:
    fix = "give the prefix your ACLs allow for consumer groups and transactional ids, e.g. team-a"
    return _name_option(opts, "groupidprefix", fix) or DEFAULT_DERIVED_PREFIX


def _prefix(opts: Mapping[str, str], mode: SinkMode) -> str | None:
    fix = "give a name that is stable across restarts of this query and unique to it, e.g. orders-to-audit"
    prefix = _name_option(opts, "transactionalidprefix", fix)
    if prefix is None and mode == "batch":
        return f"{_derived_prefix(opts)}-batch-{uuid.uuid4().hex}"
    return prefix


def _client_config(opts: Mapping[str, str]) -> tuple[dict[str, str], int]:
    """The ``kafka.*`` settings (prefix stripped) checked against the producer's keys, and the
    transaction timeout taken out of them."""
    config = {k.removeprefix("kafka."): v for k, v in opts.items() if k.startswith("kafka.")}
    config.pop("bootstrap.servers", None)
    timeout_ms = DEFAULT_TRANSACTION_TIMEOUT_MS
    if "transaction.timeout.ms" in config:
        timeout_ms = parse_positive_int("kafka.transaction.timeout.ms", config.pop("transaction.timeout.ms"))
    idempotence = config.get("enable.idempotence")
    if idempotence is not None and idempotence.strip().lower() != "true":
        raise _fail(
            "kafka.enable.idempotence",
            idempotence,
            "cannot be turned off",
            "remove it; the sink's transactional producer is always idempotent",
        )
    acks = config.get("acks")
    if acks is not None and acks.strip().lower() not in {"all", "-1"}:
        raise _fail("kafka.acks", acks, "must be all", "remove it; transactions need acks=all")
    try:
        parse(PRODUCER, {**config, "bootstrap.servers": "localhost:9092"}, "producer")
    except ConfigError as exc:
        bad = next((k for k in config if k in str(exc)), None)
        option = f"kafka.{bad}" if bad else "a kafka.* option"
        raise PylogOptionError(f"{option} is not a valid producer setting ({exc}): fix or remove it") from None
    return config, timeout_ms


def parse_sink_options(raw: Mapping[str, str], mode: SinkMode) -> SinkOptions:
    """Validate the options of a batch (``mode="batch"``) or streaming (``"stream"``) write."""
    opts = lower_keys(raw)
    _check_known(opts)
    if "includeheaders" in opts:
        parse_bool("includeheaders", opts["includeheaders"])  # a bad value still fails, by name
    config, timeout_ms = _client_config(opts)
    return SinkOptions(
        bootstrap_servers=_servers(opts),
        topic=_topic(opts),
        transactional_id_prefix=_prefix(opts, mode),
        transaction_timeout_ms=timeout_ms,
        client_config=config,
        derived_prefix=_derived_prefix(opts),
    )
