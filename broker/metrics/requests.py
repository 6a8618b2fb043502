"""What one request adds to the metrics, read from its decoded request and response bodies.

Called by the dispatcher (``broker.api.dispatch``) once per request with the response body it
encodes, and by the connection once the response is written (``finish``). Costs: a walk over
the response's error-code paths (precomputed per API from its schema: only the arrays and structs
that hold an ``error_code`` are entered), a pass over the partitions of Produce and Fetch and,
for Produce, over the record batches (one header read per batch, never a record).

RequestMetrics (Kafka's ``kafka.network:type=RequestMetrics,name=*,request=*``): the request
label is Kafka's API name (``Produce``, ``ApiVersions`` …); Fetch is also counted as
``FetchConsumer`` or ``FetchFollower`` as Kafka does. ``errors_total`` counts every error code in
the response other than NONE, as Kafka's ``ErrorsPerSec`` (``AbstractResponse.errorCounts``).

The request log: one line per request to the logger ``kafka.request.logger`` at DEBUG (Kafka's
``kafka.request.logger``), with ``extra={"fields": {...}}`` (api, version, correlation id, client
id, principal, listener, the latency split in ms, response bytes); formatting is the logging
setup's business. Names and meanings: docs/operations.md, "Metrics".
"""

from __future__ import annotations

import functools
import logging
import struct
import time
from collections.abc import Mapping
from typing import Any

from broker.metrics.instruments import (
    BYTES_IN,
    BYTES_OUT,
    BYTES_REJECTED,
    FAILED_FETCH,
    FAILED_PRODUCE,
    MESSAGES_IN,
    TOTAL_FETCH,
    TOTAL_PRODUCE,
    BrokerStats,
    RequestTiming,
)
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.registry import get_api
from pyspark_log.wire.schema import Field

request_log = logging.getLogger("kafka.request.logger")

_INT32 = struct.Struct(">i")
_BATCH_LENGTH_AT = 8  # RecordBatch: baseOffset int64, batchLength int32 (bytes after this field)
_MAGIC_AT = 16
_RECORDS_COUNT_AT = 57  # v2: ... producerId, producerEpoch, baseSequence, then the record count
_METADATA_TOPIC = "__cluster_metadata"
# a produce partition answered one of these had its bytes refused (Kafka's BytesRejectedPerSec)
REJECTED = frozenset({
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
})  # fmt: skip


@functools.cache
def api_name(api_key: int) -> str:
    """Kafka's name of an API (``ApiKeys.name``): ``API_VERSIONS`` -> ``ApiVersions``."""
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Api{api_key}"


@functools.cache
def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


Plan = tuple[tuple[str, bool, "Plan"], ...]  # (field, is array, sub-plan); "error_code" has no sub-plan


@functools.cache
def _error_plan(api_key: int) -> Plan:
    """The paths to every ``error_code`` of ``api_key``'s response (all versions)."""

    def plan(fields: tuple[Field, ...]) -> Plan:
        out: list[tuple[str, bool, Plan]] = []
        for f in fields:
            if f.name == "error_code" and not f.fields:
                out.append((f.name, False, ()))
            elif f.fields:
                sub = plan(f.fields)
                if sub:
                    out.append((f.name, f.array, sub))
        return tuple(out)

    try:
        return plan(get_api(api_key).response.fields)
    except (KeyError, ValueError):
        return ()


def _count_errors(stats: BrokerStats, api: str, body: Mapping[str, Any], plan: Plan) -> None:
    for name, array, sub in plan:
        value = body.get(name)
        if not sub:
            if value:
                stats.error(api, error_name(value))
        elif value is None:
            continue
        elif array:
            for item in value:
                _count_errors(stats, api, item, sub)
        else:
            _count_errors(stats, api, value, sub)


def record_count(records: Any) -> int:
    """Records in a produce request's record set: the count field of each v2 batch header (one
    read per batch); an older message set counts its entries."""
    total = 0
    pos = 0
    end = len(records)
    while end - pos >= 12:
        (length,) = _INT32.unpack_from(records, pos + _BATCH_LENGTH_AT)
        if length <= 0:
            break
        if end - pos >= _RECORDS_COUNT_AT + 4 and records[pos + _MAGIC_AT] >= 2:
            (count,) = _INT32.unpack_from(records, pos + _RECORDS_COUNT_AT)
            total += max(count, 0)
        else:
            total += 1
        pos += 12 + length
    return total


def _observe_produce(stats: BrokerStats, request: Mapping[str, Any], response: Mapping[str, Any] | None) -> None:
    failed: dict[tuple[str, int], int] = {}
    if response is not None:
        for t in response.get("responses", ()):
            for p in t["partition_responses"]:
                if p["error_code"]:
                    failed[(t["name"], p["index"])] = p["error_code"]
    every = stats.all_topics
    for t in request.get("topic_data", ()):
        name = t["name"]
        counts = stats.topic(name)
        for p in t["partition_data"]:
            records = p["records"]
            size = len(records) if records is not None else 0
            counts[TOTAL_PRODUCE] += 1
            every[TOTAL_PRODUCE] += 1
            error = failed.get((name, p["index"]), 0) if failed else 0
            if error:
                counts[FAILED_PRODUCE] += 1
                every[FAILED_PRODUCE] += 1
                if error in REJECTED:
                    counts[BYTES_REJECTED] += size
                    every[BYTES_REJECTED] += size
            elif size:
                n = record_count(records)
                counts[BYTES_IN] += size
                every[BYTES_IN] += size
                counts[MESSAGES_IN] += n
                every[MESSAGES_IN] += n


def _observe_fetch(stats: BrokerStats, response: Mapping[str, Any]) -> None:
    """A consumer's fetch (a follower's goes to ReplicationBytesOut in Kafka, not counted here)."""
    every = stats.all_topics
    for t in response.get("responses", ()):
        name = t.get("topic") or ""
        if name == _METADATA_TOPIC:
            return
        counts = stats.topic(name)
        for p in t["partitions"]:
            counts[TOTAL_FETCH] += 1
            every[TOTAL_FETCH] += 1
            if p["error_code"]:
                counts[FAILED_FETCH] += 1
                every[FAILED_FETCH] += 1
                continue
            records = p.get("records")
            if records is not None:
                size = records.size if hasattr(records, "size") else len(records)
                counts[BYTES_OUT] += size
                every[BYTES_OUT] += size


def is_follower_fetch(request: Mapping[str, Any]) -> bool:
    state = request.get("replica_state")
    replica = state.get("replica_id", -1) if state else -1
    return max(replica, request.get("replica_id", -1)) >= 0


def observe_response(
    stats: BrokerStats, timing: RequestTiming, api_key: int, request: Mapping[str, Any], response: Mapping[str, Any]
) -> None:
    """Count what ``response`` (the body about to be encoded) says about the request."""
    _count_errors(stats, timing.api, response, _error_plan(api_key))
    throttle = response.get("throttle_time_ms")
    if throttle:
        timing.throttle_ms = float(throttle)
    if api_key == ApiKey.PRODUCE:
        _observe_produce(stats, request, response)
    elif api_key == ApiKey.FETCH:
        if not is_follower_fetch(request):
            _observe_fetch(stats, response)
    elif api_key in (ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT):
        for t in response.get("topics", ()):
            stats.offset_commits += sum(1 for p in t.get("partitions", ()) if not p.get("error_code"))
    elif api_key == ApiKey.JOIN_GROUP:
        if (
            not response.get("error_code")
            and response.get("leader")
            and response["leader"] == response.get("member_id")
        ):
            stats.rebalances += 1
    elif api_key == ApiKey.END_TXN and not response.get("error_code"):
        if request.get("committed", True):
            stats.txn_commits_requested += 1
        else:
            stats.txn_aborts_requested += 1


def observe_no_response(stats: BrokerStats, api_key: int, request: Mapping[str, Any]) -> None:
    """A request answered with nothing (acks=0 produce): its bytes count as appended."""
    if api_key == ApiKey.PRODUCE:
        _observe_produce(stats, request, None)


def finish(stats: BrokerStats, timing: RequestTiming, sent: float | None, response_bytes: int) -> None:
    """The request is over (its response written at ``sent``, or None: no response): record its
    timers and counters, and write its request-log line."""
    stats.request_done(timing, sent)
    if request_log.isEnabledFor(logging.DEBUG):
        end = sent if sent is not None else time.perf_counter()
        ready = timing.ready or end
        request_log.debug(
            "Completed request %s v%d correlation id %d from client %s (principal %s, listener %s): "
            "total %.3f ms, local %.3f, remote %.3f, throttle %.0f, send %.3f; %d response bytes",
            timing.api, timing.version, timing.correlation_id, timing.client_id, timing.principal,
            timing.listener, (end - timing.received) * 1000, timing.local_s * 1000, timing.remote_s * 1000,
            timing.throttle_ms, (end - ready) * 1000, response_bytes,
            extra={"fields": {
                "api": timing.api, "version": timing.version, "correlation_id": timing.correlation_id,
                "client_id": timing.client_id, "principal": timing.principal, "listener": timing.listener,
                "total_ms": round((end - timing.received) * 1000, 3),
                "request_queue_ms": round(max(0.0, timing.started - timing.received) * 1000, 3),
                "local_ms": round(timing.local_s * 1000, 3), "remote_ms": round(timing.remote_s * 1000, 3),
                "throttle_ms": timing.throttle_ms, "response_send_ms": round((end - ready) * 1000, 3),
                "response_bytes": response_bytes,
            }},
        )  # fmt: skip
