"""The hanging-transaction APIs of KIP-664 (``kafka-transactions.sh``): DescribeProducers (61),
DescribeTransactions (65) and ListTransactions (66, with KIP-994's duration filter from v1).

* DescribeProducers is answered by any replica of a partition from its log's producer state:
  every producer id it keeps (idempotent and transactional), with its epoch, last sequence, last
  batch timestamp, the coordinator epoch of its last marker and the first offset of its open
  transaction (-1: none). A partition the metadata does not have is UNKNOWN_TOPIC_OR_PARTITION,
  one not hosted here NOT_LEADER_OR_FOLLOWER, one whose log failed KAFKA_STORAGE_ERROR.
* DescribeTransactions and ListTransactions are answered by the transaction coordinator
  (``TransactionCoordinator.describe_transaction`` / ``list_transactions``, filters in
  ``broker.coordinator.txn.listing``); ListTransactions covers only the transactional ids this
  broker coordinates, so a client asks every broker.
"""

from __future__ import annotations

from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.coordinator.txn.listing import TxnFilter, topics_of
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode


def handle_describe_producers(broker: Broker, request: Request) -> Any:
    image = broker.image()
    topics = []
    for topic in request.body.topics:
        found = image.topics.get(topic.name)
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE, "active_producers": []}
            hosted = broker.replicas.get_partition(topic.name, index)
            if found is None or index not in found.partitions:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif hosted is None or hosted.role is None or hosted.log.closed:
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif hosted.log.failure is not None:
                entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                entry["active_producers"] = [
                    {
                        "producer_id": state.producer_id,
                        "producer_epoch": state.producer_epoch,
                        "last_sequence": state.last_seq,
                        "last_timestamp": state.last_timestamp_ms,
                        "coordinator_epoch": state.coordinator_epoch,
                        "current_txn_start_offset": state.current_txn_first_offset,
                    }
                    for _, state in sorted(hosted.log.producer_state.producers.items())
                ]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def handle_describe_transactions(broker: Broker, request: Request) -> Any:
    states = []
    for transactional_id in request.body.transactional_ids:
        entry: dict[str, Any] = {"transactional_id": transactional_id, "error_code": ErrorCode.NONE}
        if broker.txn is None:
            entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code, txn = broker.txn.describe_transaction(transactional_id)
            entry["error_code"] = code
            if txn is not None:
                entry.update(
                    transaction_state=txn.state.kafka_name,
                    transaction_timeout_ms=txn.timeout_ms,
                    transaction_start_time_ms=txn.start_ms,
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    topics=topics_of(txn),
                )
        states.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": states}


def handle_list_transactions(broker: Broker, request: Request) -> Any:
    body = request.body
    wanted = TxnFilter(tuple(body.state_filters), frozenset(body.producer_id_filters), body.duration_filter)
    if broker.txn is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    code, txns = broker.txn.list_transactions(wanted)
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "unknown_state_filters": wanted.unknown_states() if code == ErrorCode.NONE else [],
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state.kafka_name,
            }
            for t in txns
        ],
    }


def txn_admin_handlers() -> dict[int, Handler]:
    """The APIs this module serves, for ``broker.server.HANDLERS``."""
    return {
        ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
        ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
        ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    }
