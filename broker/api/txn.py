"""Producer ids and transactions: InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26). TxnOffsetCommit (28) is served with the committed-offset APIs (``offset_commit``).

Each handler turns the request into a call of the ``TransactionCoordinator``
(``broker.coordinator.txn``) and its result into the response of the request's version, as Kafka
3.7's ``KafkaApis`` does:

* PRODUCER_FENCED (KIP-588) is answered as INVALID_PRODUCER_EPOCH to InitProducerId v0-v3,
  AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v0-v1, which predate it;
* InitProducerId with only one of producer id / epoch set is INVALID_REQUEST; its errors carry
  producer id -1 and epoch -1;
* AddPartitionsToTxn v0-v3 (clients): an unknown topic or partition fails the whole request
  (UNKNOWN_TOPIC_OR_PARTITION for those, OPERATION_NOT_ATTEMPTED for the rest); internal topics
  may not be added directly (TOPIC_AUTHORIZATION_FAILED: Kafka filters them out of the authorized
  set). v4 (KIP-890, broker-to-broker) carries several transactions, each answered on its own,
  ``verify_only`` ones by checking membership;
* AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.coordinator.group import OFFSETS_TOPIC
from broker.coordinator.group import partition_for as offsets_partition_for
from broker.coordinator.txn import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

TopicPartition = tuple[str, int]
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
FENCED_CODE_VERSION = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.END_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2}
ADD_PARTITIONS_FENCED_VERSION = 2
BATCHED_ADD_PARTITIONS_VERSION = 4


def _fenced_for(code: int, version: int, min_version: int) -> int:
    """PRODUCER_FENCED for clients that know it, INVALID_PRODUCER_EPOCH for older ones."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED and version < min_version else code


def _coordinator(broker: Broker) -> TransactionCoordinator | None:
    return broker.txn


# -- InitProducerId ----------------------------------------------------------------------------


async def handle_init_producer_id(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = _coordinator(broker)
    if coordinator is None:
        error, pid, epoch = int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, -1
    else:
        result = await coordinator.init_producer_id(
            body.transactional_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch
        )
        error, pid, epoch = result.error, result.producer_id, result.producer_epoch
    if error:
        pid, epoch = -1, -1
    return {
        "throttle_time_ms": 0,
        "error_code": _fenced_for(error, version, FENCED_CODE_VERSION[ApiKey.INIT_PRODUCER_ID]),
        "producer_id": pid,
        "producer_epoch": epoch,
    }


# -- AddPartitionsToTxn ------------------------------------------------------------------------


def _topic_results(results: dict[TopicPartition, int]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _requested(topics: Iterable[Any]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


async def _add_one(
    broker: Broker,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    *,
    version: int,
    verify_only: bool = False,
) -> dict[TopicPartition, int]:
    coordinator = _coordinator(broker)
    if coordinator is None:
        return dict.fromkeys(partitions, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    image = broker.image()
    failed: dict[TopicPartition, int] = {}
    for topic, partition in partitions:
        found = image.topics.get(topic)
        if version < BATCHED_ADD_PARTITIONS_VERSION and topic in INTERNAL_TOPICS:
            failed[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif found is None or partition not in found.partitions:
            failed[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        return {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    if verify_only:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    code = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
    return dict.fromkeys(partitions, _fenced_for(code, version, ADD_PARTITIONS_FENCED_VERSION))


async def handle_add_partitions_to_txn(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    if version < BATCHED_ADD_PARTITIONS_VERSION:
        partitions = _requested(body.v3_and_below_topics)
        results = await _add_one(
            broker,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            partitions,
            version=version,
        )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(results)}
    each = await asyncio.gather(
        *(
            _add_one(
                broker,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                _requested(txn.topics),
                version=version,
                verify_only=txn.verify_only,
            )
            for txn in body.transactions
        )
    )
    by_txn = [
        {"transactional_id": txn.transactional_id, "topic_results": _topic_results(results)}
        for txn, results in zip(body.transactions, each, strict=True)
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": by_txn}


# -- AddOffsetsToTxn ---------------------------------------------------------------------------


async def handle_add_offsets_to_txn(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = _coordinator(broker)
    if coordinator is None:
        code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        offsets = broker.image().topics.get(OFFSETS_TOPIC)
        count = (
            len(offsets.partitions)
            if offsets is not None
            else int(broker.config.get("offsets.topic.num.partitions", 50))
        )
        partition = (OFFSETS_TOPIC, offsets_partition_for(body.group_id, count))
        code = await coordinator.add_partitions(
            body.transactional_id, body.producer_id, body.producer_epoch, [partition]
        )
    return {
        "throttle_time_ms": 0,
        "error_code": _fenced_for(code, version, FENCED_CODE_VERSION[ApiKey.ADD_OFFSETS_TO_TXN]),
    }


# -- EndTxn ------------------------------------------------------------------------------------


async def handle_end_txn(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = _coordinator(broker)
    if coordinator is None:
        code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code = await coordinator.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, commit=body.committed
        )
    return {"throttle_time_ms": 0, "error_code": _fenced_for(code, version, FENCED_CODE_VERSION[ApiKey.END_TXN])}


def txn_handlers() -> dict[int, Handler]:
    """The transaction APIs this module serves, for ``broker.server.HANDLERS``."""
    return {
        ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
        ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
        ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
        ApiKey.END_TXN: handle_end_txn,
    }
