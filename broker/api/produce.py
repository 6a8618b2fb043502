"""Produce (0): append each partition's batches to its log and answer per partition.

- v0-v2 (message format v0/v1) are advertised, as Kafka does since KAFKA-18659, but every
  partition is answered UNSUPPORTED_VERSION; pylog stores only RecordBatch v2.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). Seed 004: acks=0 appends and sends no
  response; acks=1 answers after the leader's append; acks=all answers once every ISR member has
  the batch (the high watermark passed it; ``ReplicaManager.wait_for_acks``), or REQUEST_TIMED_OUT
  after the request's ``timeout_ms``. acks=all is refused before the append with
  NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``, and answered
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank below it while waiting (the record stays in
  the log, as in Kafka: a retry may duplicate it unless the producer is idempotent).
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

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from broker.api.context import Broker, Request
from broker.api.topics import auto_create, auto_create_enabled
from broker.log.errors import LogError
from broker.log.log import LogAppendInfo
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
    body = request.body
    acks = body["acks"]
    responses = []
    waiting: list[tuple[dict[str, Any], str, LogAppendInfo]] = []
    flushing: list[tuple[dict[str, Any], asyncio.Future[None]]] = []
    for topic in body["topic_data"]:
        name = topic["name"]
        partitions = []
        for part in topic["partition_data"]:
            entry, info = _append_one(broker, name, part["index"], part["records"], acks)
            partitions.append(entry)
            if info is not None and acks != 0 and info.batches:
                durable = _flush_waiter(broker, name, part["index"], info)
                if durable is not None:
                    flushing.append((entry, durable))
            if (
                info is not None
                and acks == -1
                and not broker.replicas.acknowledged(name, part["index"], info.last_offset)
            ):
                waiting.append((entry, name, info))
        responses.append({"name": name, "partition_responses": partitions})
    if acks == 0:
        return None
    response = {"responses": responses, "throttle_time_ms": 0}
    if not waiting and not flushing:
        return response
    return _after_acks(broker, response, waiting, body["timeout_ms"], flushing)


def _flush_waiter(broker: Broker, topic: str, partition: int, info: LogAppendInfo) -> asyncio.Future[None] | None:
    """``flush.messages`` reached by this append: the flush it started, which the answer waits for
    (Kafka's append fsyncs before it returns; here the fsync runs off the event loop)."""
    try:
        target = broker.replicas.leader_log(topic, partition)
    except PartitionError:
        return None
    return target.wait_durable(info.last_offset + 1)


async def _after_acks(
    broker: Broker,
    response: dict[str, Any],
    waiting: list[tuple[dict[str, Any], str, LogAppendInfo]],
    timeout_ms: int,
    flushing: Sequence[tuple[dict[str, Any], asyncio.Future[None]]] = (),
) -> Mapping[str, Any]:
    """``flush.messages``: partitions whose append started a flush wait for it (a failed one
    answers KAFKA_STORAGE_ERROR); acks=all: every appended partition waits for its ISR, all
    within the request's timeout."""
    for entry, durable in flushing:
        try:
            await durable
        except LogError as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
    codes = await asyncio.gather(
        *(
            broker.replicas.wait_for_acks(topic, entry["index"], info.last_offset, timeout_ms)
            for entry, topic, info in waiting
        )
    )
    for (entry, _, _), code in zip(waiting, codes, strict=True):
        if code:
            entry.update(error_code=code, error_message=_ACKS_MESSAGES.get(code, "the ISR did not acknowledge"))
    return response


_ACKS_MESSAGES: dict[int, str] = {
    ErrorCode.REQUEST_TIMED_OUT: "the in-sync replicas did not all acknowledge within the request's timeout",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "written, but the ISR shrank below min.insync.replicas",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "leadership moved before the in-sync replicas acknowledged",
}


def _append_one(
    broker: Broker, topic: str, partition: int, records: Any, acks: int
) -> tuple[dict[str, Any], LogAppendInfo | None]:
    if records is None or len(records) == 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "the request carries no records for this partition"), None
    try:
        info = broker.replicas.append(topic, partition, records, acks=acks)
    except PartitionError as exc:
        return _error(partition, exc.code, str(exc)), None
    except LogError as exc:
        response = _error(partition, exc.code, str(exc))
        if errors := getattr(exc, "record_errors", ()):  # KIP-467: v8+ names the records
            response["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in errors]
        return response, None
    return {
        "index": partition,
        "error_code": 0,
        "base_offset": info.first_offset,
        "log_append_time_ms": info.log_append_time_ms,
        "log_start_offset": info.log_start_offset,
    }, info


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
