"""Options of ``format("pylog")``: parsed once, validated at query start, named like Spark's Kafka source.

The values they become (subscriptions, offset specs, ``SourceOptions``) are defined in ``specs.py``.

``parse_options(raw, mode=...)`` turns the user's string options into a frozen ``SourceOptions``
or raises ``PylogOptionError`` naming the option, the bad value and the fix. Keys are matched
case-insensitively (PySpark hands Python data sources a ``CaseInsensitiveDict`` whose keys are
lower-cased; plain dicts are lower-cased here the same way).

Option -> field (S = streaming, B = batch):

=================================== ========================== =====================================
option                              default                    notes
=================================== ========================== =====================================
bootstrap.servers / kafka.bootstrap required                   both spellings accepted
subscribe | subscribePattern |      required, exactly one      assign is JSON ``{"t":[0,1]}``;
assign                                                         a pattern must match the whole name
startingTimestamp                   –                          wins over the next two
startingOffsetsByTimestamp          –                          wins over startingOffsets
startingOffsets                     latest (S) / earliest (B)  earliest, latest or JSON (-2/-1)
startingOffsetsByTimestampStrategy  error                      error | latest (no record that late)
endingTimestamp / endingOffsetsBy…  –                          B only, same precedence
endingOffsets                       latest                     B only; latest or JSON (-1; no -2)
failOnDataLoss                      true
maxOffsetsPerTrigger                –                          S; ignored (warning) in B
minOffsetsPerTrigger                –                          S; must be <= maxOffsetsPerTrigger
maxTriggerDelay                     15m                        S; "500ms", "30s", "15m", "1h", "2d", ms
minPartitions / maxRecordsPerPart…  –                          positive
includeHeaders                      false
isolationLevel / kafka.isolation…   read_committed             read_committed | read_uncommitted
groupId / kafka.group.id            –                          offsets committed after each batch
fetchOffset.numRetries / …IntervalMs 3 / 1000                  retries when latest < a known offset
kafkaConsumer.pollTimeoutMs         120000                     -> ``fetch.timeout.ms`` of client_access
kafka.max.partition.fetch.bytes     16 MiB                     one Fetch of one partition (Kafka: 1 MiB)
kafka.* / fetch.*                   –                          client settings (``kafka.`` stripped)
readPath                            broker                     broker | files | auto (direct_read.py)
logDirs.<brokerId>                  –                          where executors see that broker's
                                                               log.dirs (comma-separated paths)
=================================== ========================== =====================================
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload

from pyspark_log.spark.access import TopicPartition
from pyspark_log.spark.specs import (
    DEFAULT_MAX_PARTITION_FETCH_BYTES,
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    NoMatchStrategy,
    OffsetSpec,
    PylogOptionError,
    ReadPath,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    Subscription,
)

__all__ = [
    "DEFAULT_MAX_PARTITION_FETCH_BYTES",
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "EARLIEST",
    "LATEST",
    "Assign",
    "EarliestOffsets",
    "GlobalTimestamp",
    "LatestOffsets",
    "OffsetSpec",
    "PylogOptionError",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "parse_options",
]

log = logging.getLogger(__name__)

Mode = Literal["stream", "batch"]

# ---------------------------------------------------------------------------------------------
# Names

_CANONICAL = [
    "bootstrap.servers",
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "isolationLevel",
    "kafka.isolation.level",
    "groupId",
    "kafka.group.id",
    "groupIdPrefix",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "kafkaConsumer.pollTimeoutMs",
    "kafka.max.partition.fetch.bytes",
    "readPath",
]
_NAMES = {name.lower(): name for name in _CANONICAL}
_STRATEGIES = ("assign", "subscribe", "subscribepattern")
_LOG_DIRS_PREFIX = "logdirs."
_UNSUPPORTED_KAFKA = {
    "kafka.auto.offset.reset": "set startingOffsets to earliest or latest instead; the source "
    "keeps its own offsets in the checkpoint",
    "kafka.key.deserializer": "keys are always returned as binary; deserialize them with DataFrame operations",
    "kafka.value.deserializer": "values are always returned as binary; deserialize them with DataFrame operations",
    "kafka.enable.auto.commit": "remove it; set groupId to commit each batch's offsets to a group",
    "kafka.interceptor.classes": "remove it; interceptors are not supported",
}


def _name(key: str) -> str:
    return _NAMES.get(key, key)


def _fail(key: str, value: object, problem: str, fix: str) -> PylogOptionError:
    return PylogOptionError(f"{_name(key)} ({value!r}) {problem}: {fix}")


# ---------------------------------------------------------------------------------------------
# Value parsers


def parse_bool(key: str, value: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise _fail(key, value, "is not a boolean", "use true or false")


def parse_positive_int(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise _fail(key, value, "is not a whole number", "use a positive integer such as 1000") from None
    if number <= 0:
        raise _fail(key, value, "must be positive", "use an integer of 1 or more")
    return number


def parse_non_negative_int(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise _fail(key, value, "is not a whole number", "use an integer of 0 or more") from None
    if number < 0:
        raise _fail(key, value, "is negative", "use an integer of 0 or more")
    return number


_DURATION = re.compile(r"(\d+)\s*(ms|s|sec|secs|m|min|mins|h|hour|hours|d|day|days)?")
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


def parse_duration_ms(key: str, value: str) -> int:
    """``"15m"``, ``"30s"``, ``"1h"``, ``"500ms"``, ``"2d"``; a bare number is milliseconds (as Spark)."""
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None:
        raise _fail(key, value, "is not a duration", 'use a number of ms or a value like "30s", "15m", "1h"')
    return int(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]


def _parse_json(key: str, value: str, example: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise _fail(
            key, value, f"is not valid JSON ({exc.msg} at position {exc.pos})", f"write it like {example}"
        ) from None


def _partition_number(key: str, value: str, topic: str, raw: object) -> int:
    text = str(raw)
    if not text.isdigit():
        raise _fail(key, value, f"names partition {raw!r} of topic {topic!r}", "partitions are integers >= 0")
    return int(text)


def parse_assign(key: str, value: str) -> tuple[TopicPartition, ...]:
    example = '{"topicA":[0,1],"topicB":[0]}'
    data = _parse_json(key, value, example)
    if not isinstance(data, dict) or not data:
        raise _fail(key, value, "names no partitions", f"write it like {example}")
    tps: set[TopicPartition] = set()
    for topic, parts in data.items():
        if not topic or not isinstance(parts, list) or not parts:
            raise _fail(key, value, f"has no partition list for topic {topic!r}", f"write it like {example}")
        for raw in parts:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise _fail(key, value, f"names partition {raw!r} of topic {topic!r}", "partitions are integers >= 0")
            tps.add(TopicPartition(topic, _partition_number(key, value, topic, raw)))
    return tuple(sorted(tps))


def parse_partition_map(key: str, value: str, *, allowed_min: int, what: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": n, ...}, ...}`` with every ``n >= allowed_min``."""
    example = '{"topicA":{"0":23,"1":-2}}' if allowed_min < 0 else '{"topicA":{"0":1700000000000}}'
    data = _parse_json(key, value, example)
    if not isinstance(data, dict) or not data:
        raise _fail(key, value, "names no partitions", f"write it like {example}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not topic or not isinstance(parts, dict) or not parts:
            raise _fail(key, value, f"has no partition object for topic {topic!r}", f"write it like {example}")
        for raw_part, raw_num in parts.items():
            tp = TopicPartition(topic, _partition_number(key, value, topic, raw_part))
            if isinstance(raw_num, bool) or not isinstance(raw_num, int) or raw_num < allowed_min:
                raise _fail(key, value, f"gives {raw_num!r} for {tp}", what)
            out[tp] = raw_num
    return out


# ---------------------------------------------------------------------------------------------
# Whole-option parsing


def lower_keys(raw: Mapping[str, str]) -> dict[str, str]:
    """``raw`` with lower-case keys (Spark's options are case-insensitive, as its
    ``CaseInsensitiveMap``); one option given twice with different values is an error. The
    source's and the sink's options are read through it."""
    out: dict[str, str] = {}
    for key, value in raw.items():
        lowered = key.lower()
        if lowered in out and out[lowered] != value:
            raise PylogOptionError(f"option {key} is given twice with different values: give it once")
        out[lowered] = str(value)
    return out


def _alias(opts: dict[str, str], first: str, second: str) -> str | None:
    a, b = opts.get(first), opts.get(second)
    if a is not None and b is not None and a.strip() != b.strip():
        raise PylogOptionError(
            f"{_name(first)} ({a!r}) and {_name(second)} ({b!r}) disagree: they are the same setting, give only one"
        )
    return a if a is not None else b


def _check_known(opts: Mapping[str, str]) -> None:
    for key in opts:
        if key in _UNSUPPORTED_KAFKA:
            raise _fail(key, opts[key], "is not supported", _UNSUPPORTED_KAFKA[key])
        if key.startswith(_LOG_DIRS_PREFIX):
            continue  # checked by _parse_log_dirs
        if key in _NAMES or key.startswith(("kafka.", "fetch.")):
            if key in ("kafka.", "fetch."):
                raise _fail(key, opts[key], "has no setting name", "name a client setting after the prefix")
            continue
        if key == "path":
            raise _fail(
                key,
                opts[key],
                "is not used by pylog",
                "remove the load() path; name topics with subscribe, subscribePattern or assign",
            )
        close = difflib.get_close_matches(key, list(_NAMES), n=1, cutoff=0.75)
        fix = f"did you mean {_NAMES[close[0]]}?" if close else "remove it (client settings take a kafka. prefix)"
        raise _fail(key, opts[key], "is not an option of the pylog source", fix)


def _parse_read_path(opts: Mapping[str, str]) -> tuple[ReadPath, dict[int, tuple[str, ...]]]:
    """``readPath`` and the ``logDirs.<brokerId>`` options (see ``direct_read.py``)."""
    log_dirs: dict[int, tuple[str, ...]] = {}
    for key, value in sorted(opts.items()):
        if not key.startswith(_LOG_DIRS_PREFIX):
            continue
        broker = key[len(_LOG_DIRS_PREFIX) :]
        name = f"logDirs.{broker}"  # the user's spelling of the prefix is lost to lower-casing
        if not broker.isdigit():
            raise PylogOptionError(
                f"{name} ({value!r}) does not name a broker id: write logDirs.<brokerId>=/path, e.g. "
                "logDirs.1=/mnt/pylog/b1"
            )
        paths = tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))
        if not paths:
            raise PylogOptionError(
                f"{name} ({value!r}) names no directory: give the path(s) where executors see that broker's log.dirs"
            )
        log_dirs[int(broker)] = paths
    raw = opts.get("readpath", "broker").strip().lower()
    if raw not in ("auto", "broker", "files"):
        raise _fail("readpath", opts["readpath"], "is not a read path", "use broker, files or auto")
    read_path: ReadPath = "auto" if raw == "auto" else "files" if raw == "files" else "broker"
    if read_path != "broker" and not log_dirs:
        raise _fail(
            "readpath",
            raw,
            "needs logDirs.<brokerId> options",
            "map each broker's log.dirs to the path executors see, e.g. logDirs.1=/mnt/pylog/b1",
        )
    if read_path == "broker" and log_dirs:
        log.warning("logDirs.* options have no effect with readPath=broker (set readPath=auto or files)")
    return read_path, log_dirs


def _parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in _STRATEGIES if k in opts]
    if len(given) != 1:
        found = ", ".join(_name(k) for k in given) or "none"
        raise PylogOptionError(
            f"exactly one of assign, subscribe, subscribePattern must be set (found: {found}): "
            "set one, e.g. subscribe=my-topic"
        )
    key = given[0]
    value = opts[key]
    if key == "assign":
        return Assign(parse_assign(key, value))
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise _fail(key, value, "names no topics", "give a comma-separated list of topic names")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise _fail(key, value, "is empty", "give a regular expression matching whole topic names")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise _fail(
            key, value, f"is not a valid regular expression ({exc})", "fix the pattern (Python re syntax)"
        ) from None
    return SubscribePattern(pattern)


def _strategy(opts: Mapping[str, str]) -> NoMatchStrategy:
    key = "startingoffsetsbytimestampstrategy"
    value = opts.get(key, "error").strip().lower()
    if value == "error":
        return "error"
    if value == "latest":
        return "latest"
    raise _fail(key, opts[key], "is not a strategy", "use error or latest")


def _parse_offset_spec(
    opts: Mapping[str, str], prefix: Literal["starting", "ending"], default: OffsetSpec
) -> OffsetSpec:
    """The three ways to give offsets, in the connector's precedence: timestamp, by-timestamp, offsets."""
    ts_key, by_ts_key, off_key = f"{prefix}timestamp", f"{prefix}offsetsbytimestamp", f"{prefix}offsets"
    present = [k for k in (ts_key, by_ts_key, off_key) if k in opts]
    for ignored in present[1:]:
        log.warning("%s is ignored because %s is set (it takes precedence)", _name(ignored), _name(present[0]))
    strategy = _strategy(opts)
    if ts_key in opts:
        return GlobalTimestamp(parse_non_negative_int(ts_key, opts[ts_key]), strategy, _name(ts_key))
    if by_ts_key in opts:
        stamps = parse_partition_map(
            by_ts_key, opts[by_ts_key], allowed_min=0, what="timestamps are ms since the epoch, >= 0"
        )
        return SpecificTimestamps(stamps, strategy, _name(by_ts_key))
    if off_key not in opts:
        return default
    value = opts[off_key].strip()
    if value.lower() == "earliest":
        return EarliestOffsets(_name(off_key))
    if value.lower() == "latest":
        return LatestOffsets(_name(off_key))
    if not value.startswith("{"):
        raise _fail(
            off_key,
            value,
            "is not earliest, latest or JSON",
            'use earliest, latest or JSON like {"topicA":{"0":23,"1":-2}}',
        )
    offsets = parse_partition_map(
        off_key, value, allowed_min=EARLIEST, what="offsets are >= 0, or -2 for earliest, -1 for latest"
    )
    return SpecificOffsets(offsets, _name(off_key))


def _check_spec_topics(spec: OffsetSpec, subscription: Subscription) -> None:
    """Offsets or timestamps given for topics the query does not read are a mistake."""
    if isinstance(spec, SpecificOffsets):
        tps = set(spec.offsets)
    elif isinstance(spec, SpecificTimestamps):
        tps = set(spec.timestamps)
    else:
        return
    if isinstance(subscription, Assign):
        assigned = set(subscription.partitions)
        if tps != assigned:
            missing = sorted(str(tp) for tp in assigned - tps)
            extra = sorted(str(tp) for tp in tps - assigned)
            raise PylogOptionError(
                f"{spec.option} must name exactly the assigned partitions (missing: {missing}, not assigned: "
                f"{extra}): list every assigned partition (-2 = earliest, -1 = latest) and no others"
            )
        return
    for tp in sorted(tps):
        if isinstance(subscription, Subscribe) and tp.topic not in subscription.topics:
            raise PylogOptionError(
                f"{spec.option} names topic {tp.topic!r}, which is not subscribed ({', '.join(subscription.topics)}): "
                "remove it or add it to subscribe"
            )
        if isinstance(subscription, SubscribePattern) and not subscription.matches(tp.topic):
            raise PylogOptionError(
                f"{spec.option} names topic {tp.topic!r}, which does not match subscribePattern "
                f"{subscription.pattern!r}: remove it or widen the pattern"
            )


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, LatestOffsets):
        raise PylogOptionError(
            f"{starting.option} ('latest') is not allowed in a batch query, which would read nothing: "
            "use earliest or JSON offsets"
        )
    if isinstance(starting, SpecificOffsets):
        for tp, off in sorted(starting.offsets.items()):
            if off == LATEST:
                raise PylogOptionError(
                    f"{starting.option} gives -1 (latest) for {tp} in a batch query: use -2 (earliest) or an offset"
                )
    if isinstance(ending, EarliestOffsets):
        raise PylogOptionError(f"{ending.option} ('earliest') is not allowed: use latest or JSON offsets")
    if isinstance(ending, SpecificOffsets):
        for tp, off in sorted(ending.offsets.items()):
            if off == EARLIEST:
                raise PylogOptionError(f"{ending.option} gives -2 (earliest) for {tp}: use -1 (latest) or an offset")


def parse_options(raw: Mapping[str, str], mode: Mode | None = None) -> SourceOptions:
    """Validate ``raw`` for a streaming or batch query (``mode=None``: only mode-independent checks)."""
    opts = lower_keys(raw)
    _check_known(opts)
    servers = _alias(opts, "bootstrap.servers", "kafka.bootstrap.servers")
    if servers is None or not servers.strip():
        raise PylogOptionError(
            "bootstrap.servers is not set: set it to the broker's host:port, e.g. "
            '.option("bootstrap.servers", "localhost:9092")'
        )
    subscription = _parse_subscription(opts)

    isolation = (_alias(opts, "isolationlevel", "kafka.isolation.level") or "read_committed").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise _fail("isolationlevel", isolation, "is not an isolation level", "use read_committed or read_uncommitted")
    group_id = _alias(opts, "groupid", "kafka.group.id")
    if group_id is not None and not group_id.strip():
        raise _fail("groupid", group_id, "is empty", "give a consumer group name or remove the option")

    max_per_trigger = _opt_int(opts, "maxoffsetspertrigger", parse_positive_int)
    min_per_trigger = _opt_int(opts, "minoffsetspertrigger", parse_positive_int)
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise PylogOptionError(
            f"minOffsetsPerTrigger ({min_per_trigger}) is larger than maxOffsetsPerTrigger ({max_per_trigger}): "
            "lower minOffsetsPerTrigger or raise maxOffsetsPerTrigger"
        )
    delay_ms = DEFAULT_MAX_TRIGGER_DELAY_MS
    if "maxtriggerdelay" in opts:
        delay_ms = parse_duration_ms("maxtriggerdelay", opts["maxtriggerdelay"])
        if min_per_trigger is None:
            log.warning("maxTriggerDelay has no effect without minOffsetsPerTrigger")
    if "startingoffsetsbytimestampstrategy" in opts and not any(
        k in opts for k in ("startingtimestamp", "startingoffsetsbytimestamp")
    ):
        log.warning(
            "startingOffsetsByTimestampStrategy has no effect without startingTimestamp or startingOffsetsByTimestamp"
        )

    ending_keys = [k for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp") if k in opts]
    if mode == "stream":
        if ending_keys:
            raise _fail(
                ending_keys[0],
                opts[ending_keys[0]],
                "is only for batch queries",
                "remove it from the stream; a stream reads until it is stopped",
            )
        starting = _parse_offset_spec(opts, "starting", LatestOffsets())
        ending: OffsetSpec | None = None
    else:
        starting = _parse_offset_spec(opts, "starting", EarliestOffsets())
        ending = _parse_offset_spec(opts, "ending", LatestOffsets("endingOffsets"))
        if mode == "batch":
            _check_batch_bounds(starting, ending)
            for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
                if key in opts:
                    log.warning("%s is ignored in batch queries", _name(key))
        else:
            ending = None
    _check_spec_topics(starting, subscription)
    if ending is not None:
        _check_spec_topics(ending, subscription)

    client_config = {k.removeprefix("kafka."): v for k, v in opts.items() if k.startswith(("kafka.", "fetch."))}
    for alias in ("bootstrap.servers", "isolation.level", "group.id"):
        client_config.pop(alias, None)
    if "kafkaconsumer.polltimeoutms" in opts:
        poll_ms = parse_positive_int("kafkaconsumer.polltimeoutms", opts["kafkaconsumer.polltimeoutms"])
        client_config.setdefault("fetch.timeout.ms", str(poll_ms))
    if "groupidprefix" in opts:
        log.warning("groupIdPrefix is ignored: pylog reads without a consumer group (set groupId to commit offsets)")

    read_path, log_dirs = _parse_read_path(opts)

    return SourceOptions(
        bootstrap_servers=servers.strip(),
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=parse_bool("failondataloss", opts.get("failondataloss", "true")),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay_ms,
        min_partitions=_opt_int(opts, "minpartitions", parse_positive_int),
        max_records_per_partition=_opt_int(opts, "maxrecordsperpartition", parse_positive_int),
        include_headers=parse_bool("includeheaders", opts.get("includeheaders", "false")),
        isolation_level="read_committed" if isolation == "read_committed" else "read_uncommitted",
        group_id=group_id.strip() if group_id is not None else None,
        fetch_offset_retries=_opt_int(opts, "fetchoffset.numretries", parse_positive_int, 3),
        fetch_offset_retry_interval_ms=_opt_int(opts, "fetchoffset.retryintervalms", parse_non_negative_int, 1000),
        max_partition_fetch_bytes=_opt_int(
            opts, "kafka.max.partition.fetch.bytes", parse_positive_int, DEFAULT_MAX_PARTITION_FETCH_BYTES
        ),
        client_config=client_config,
        read_path=read_path,
        log_dirs=log_dirs,
    )


@overload
def _opt_int(opts: Mapping[str, str], key: str, parser: Callable[[str, str], int]) -> int | None: ...
@overload
def _opt_int(opts: Mapping[str, str], key: str, parser: Callable[[str, str], int], default: int) -> int: ...
def _opt_int(
    opts: Mapping[str, str], key: str, parser: Callable[[str, str], int], default: int | None = None
) -> int | None:
    return parser(key, opts[key]) if key in opts else default
