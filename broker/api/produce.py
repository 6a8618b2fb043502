"""Produce (0): append each partition's batches to its log and answer per partition.

- v0-v2 (message format v0/v1) are advertised, as Kafka does since KAFKA-18659, but every
  partition is answered UNSUPPORTED_VERSION; pylog stores only RecordBatch v2.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). The producer's ``acks`` (Kafka producer
  configs): acks=0 appends and sends no response; acks=1 answers after the leader's append;
  acks=all answers once every ISR member has the batch (the high watermark passed it;
  ``ReplicaManager.append_records``, which owns the acks as Kafka's ``appendRecords`` does, with
  its ``DelayedProduce``), or REQUEST_TIMED_OUT after the request's ``timeout_ms``. acks=all is
  refused before the append with NOT_ENOUGH_REPLICAS when the ISR is smaller than
  ``min.insync.replicas``, and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank below it
  while waiting (the record stays in the log, as in Kafka: a retry may duplicate it unless the
  producer is idempotent).
- Unknown topics are auto-created when ``auto.create.topics.enable``.
- Each partition's batch is validated and appended as bytes (``Log.append``): no record is
  decoded on this path. A partition's records must be exactly one batch (Kafka v3+
  ``ProduceRequest.validateRecords``), else INVALID_RECORD; damaged bytes are CORRUPT_MESSAGE.
- A disk error answers KAFKA_STORAGE_ERROR; one that leaves the log inconsistent takes that
  partition's log offline until restart (``broker.log.log``).
- Idempotent and transactional producers (KIP-98, "idempotent delivery"): the partition's
  producer state checks sequence numbers and epochs (``broker.log.producer_state``). A retried
  batch that is already stored is answered with its original base offset and not written again;
  OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH and INVALID_TXN_STATE are answered per
  partition. Transactional batches in a request without ``transactional_id`` are answered
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, as Kafka does. Whether the
  partition was added to the transaction is not verified (Kafka 3.6+ asks the coordinator, KIP-890).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.api.topics import auto_create, auto_create_enabled
from broker.replication.replica_manager import AppendResult
from pyspark_log.records.header import ATTRIBUTES_POS, TRANSACTIONAL_MASK
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.versions import PRODUCE_MIN_ACCEPTED

_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_POS + 1  # attributes is a big-endian int16


def handle_produce(broker: Broker, request: Request) -> Any:
    # Fields are read with [] on this path: Message attribute access costs a failed lookup first.
    body = request.body
    acks = body["acks"]
    if request.version < PRODUCE_MIN_ACCEPTED:
        return _all_partitions(body, ErrorCode.UNSUPPORTED_VERSION, "message format v0/v1 is not supported")
    if acks not in (-1, 0, 1):
        return _all_partitions(body, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
    if body["transactional_id"] is None and has_transactional_batch(body):
        return _all_partitions(
            body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional records need a transactional_id"
        )
    known = broker.image().topics
    missing = [t["name"] for t in body["topic_data"] if t["name"] not in known]
    if missing and auto_create_enabled(broker):
        return _produce_after_create(broker, request, missing)
    return _produce(broker, request)


def has_transactional_batch(body: Any) -> bool:
    """Whether a partition's first batch has the isTransactional attribute (Kafka looks at the
    first batch: a producer sends one batch per partition)."""
    for topic in body["topic_data"]:
        for part in topic["partition_data"]:
            records = part["records"]
            if (
                records is not None
                and len(records) > _ATTRIBUTES_LOW_BYTE
                and records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK
            ):
                return True
    return False


async def _produce_after_create(broker: Broker, request: Request, missing: list[str]) -> Mapping[str, Any] | None:
    for name in missing:
        await auto_create(broker, name)
    result = _produce(broker, request)
    return await result if asyncio.iscoroutine(result) else result


def _produce(broker: Broker, request: Request) -> Any:
    """Hand every partition to ``ReplicaManager.append_records``, which owns the acks (Kafka's
    ``appendRecords``), and build the response from its results (at once, or once it waited)."""
    body = request.body
    acks = body["acks"]
    entries = [
        (topic["name"], part["index"], part["records"])
        for topic in body["topic_data"]
        for part in topic["partition_data"]
    ]
    results = broker.replicas.append_records(entries, acks=acks, timeout_ms=body["timeout_ms"])
    if acks == 0:
        if not isinstance(results, list):  # pragma: no cover - acks=0 never waits
            results.close()
        return None
    if isinstance(results, list):
        return _response(body, results)
    return _response_after(body, results)


async def _response_after(body: Any, pending: Coroutine[Any, Any, list[AppendResult]]) -> Mapping[str, Any]:
    return _response(body, await pending)


def _response(body: Any, results: list[AppendResult]) -> dict[str, Any]:
    responses = []
    at = iter(results)
    for topic in body["topic_data"]:
        partitions = [_entry(next(at)) for _ in topic["partition_data"]]
        responses.append({"name": topic["name"], "partition_responses": partitions})
    return {"responses": responses, "throttle_time_ms": 0}


def _entry(result: AppendResult) -> dict[str, Any]:
    info = result.info
    if info is None or result.error_code:
        entry = _error(result.partition, result.error_code, result.error_message or "")
        if result.record_errors:  # KIP-467: v8+ names the records
            entry["record_errors"] = [
                {"batch_index": i, "batch_index_error_message": m} for i, m in result.record_errors
            ]
        return entry
    return {
        "index": result.partition,
        "error_code": 0,
        "base_offset": info.first_offset,
        "log_append_time_ms": info.log_append_time_ms,
        "log_start_offset": info.log_start_offset,
    }


def _error(partition: int, code: int, message: str) -> dict[str, Any]:
    return {"index": partition, "error_code": code, "base_offset": -1, "error_message": message}


def _all_partitions(body: Any, code: int, message: str) -> Mapping[str, Any] | None:
    if body.acks == 0:
        return None
    return {
        "responses": [
            {"name": t.name, "partition_responses": [_error(p.index, code, message) for p in t.partition_data]}
            for t in body.topic_data
        ],
        "throttle_time_ms": 0,
    }
