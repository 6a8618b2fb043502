"""Produce (0): append each partition's batches to its log and answer per partition.

- v0-v2 (message format v0/v1) are advertised, as Kafka does since KAFKA-18659, but every
  partition is answered UNSUPPORTED_VERSION; pylog stores only RecordBatch v2.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=0 appends and sends no response.
  With replication factor 1 an append is committed when written, so acks=1 and acks=all answer
  at the same moment (seed 004: acks=all waits for the ISR, which is the leader alone here).
- Unknown topics are auto-created when ``auto.create.topics.enable``.
- Each partition's batch is validated and appended as bytes (``Log.append``): no record is
  decoded on this path. A partition's records must be exactly one batch (Kafka v3+
  ``ProduceRequest.validateRecords``), else INVALID_RECORD; damaged bytes are CORRUPT_MESSAGE.
- A disk error answers KAFKA_STORAGE_ERROR; one that leaves the log inconsistent takes that
  partition's log offline until restart (``broker.log.log``).
- Idempotent and transactional producers (KIP-98; seed 003 "중복 없는 전송"): the partition's
  producer state checks sequence numbers and epochs (``broker.log.producer_state``). A retried
  batch that is already stored is answered with its original base offset and not written again;
  OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH and INVALID_TXN_STATE are answered per
  partition. Transactional batches in a request without ``transactional_id`` are answered
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, as Kafka does. Whether the
  partition was added to the transaction is not verified (Kafka 3.6+ asks the coordinator, KIP-890).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.api.topics import auto_create, auto_create_enabled
from broker.log.errors import LogError
from broker.replication.replica_manager import PartitionError
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
    if body["transactional_id"] is None and _has_transactional_batch(body):
        return _all_partitions(
            body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional records need a transactional_id"
        )
    known = broker.image().topics
    missing = [t["name"] for t in body["topic_data"] if t["name"] not in known]
    if missing and auto_create_enabled(broker):
        return _produce_after_create(broker, request, missing)
    return _produce(broker, request)


def _has_transactional_batch(body: Any) -> bool:
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
    return _produce(broker, request)


def _produce(broker: Broker, request: Request) -> Mapping[str, Any] | None:
    body = request.body
    responses = []
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions = [_append_one(broker, name, part["index"], part["records"]) for part in topic["partition_data"]]
        responses.append({"name": name, "partition_responses": partitions})
    if body["acks"] == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def _append_one(broker: Broker, topic: str, partition: int, records: Any) -> dict[str, Any]:
    if records is None or len(records) == 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "the request carries no records for this partition")
    try:
        info = broker.replicas.append(topic, partition, records)
    except PartitionError as exc:
        return _error(partition, exc.code, str(exc))
    except LogError as exc:
        response = _error(partition, exc.code, str(exc))
        if errors := getattr(exc, "record_errors", ()):  # KIP-467: v8+ names the records
            response["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in errors]
        return response
    return {
        "index": partition,
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
