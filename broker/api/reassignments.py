"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): KIP-455 partition moves.

Served on every node of a KRaft cluster (``process.roles``): the controller runs the decisions of
``broker.controller.reassignment`` on the active controller — forwarded there from other nodes
(``broker.api.broker_registration.FORWARDABLE``) — and answers once this node's metadata shows
them (``ReplicationControlManager.alter_partition_reassignments``). A single node without the quorum answers every
partition INVALID_REQUEST (there is no other broker to move to); see docs/compatibility.md.

Errors: per partition as ``reassignment.alter_reassignment`` decides; a controller failure
(NOT_CONTROLLER, REQUEST_TIMED_OUT when no active controller answered) is the top-level error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.controller.errors import MetadataError
from broker.controller.quorum import QuorumController
from broker.controller.reassignment import Move, Ongoing, TopicPartitionKey
from broker.controller.reassignment import MoveResult as Result
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

NO_QUORUM = "partition reassignment needs a KRaft cluster (process.roles)"


def handle_alter_partition_reassignments(broker: Broker, request: Request) -> Any:
    return _alter(broker, request)


async def _alter(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    moves = [
        Move(t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
        for t in body.topics
        for p in t.partitions
    ]
    allow = bool(body.allow_replication_factor_change) if request.version >= 1 else True
    controller = broker.controller
    if not isinstance(controller, QuorumController):
        refused: Result = (ErrorCode.INVALID_REQUEST, NO_QUORUM)
        return _alter_response(allow, ErrorCode.NONE, None, {(m.topic, m.partition): refused for m in moves})
    try:
        results = await controller.alter_partition_reassignments(moves, allow_replication_factor_change=allow)
    except MetadataError as exc:
        return _alter_response(allow, exc.code, exc.message, {})
    return _alter_response(allow, ErrorCode.NONE, None, results)


def _alter_response(
    allow: bool, code: int, message: str | None, results: Mapping[TopicPartitionKey, Result]
) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (error, text) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": error, "error_message": text}
        )
    return {
        "throttle_time_ms": 0,
        "allow_replication_factor_change": allow,
        "error_code": code,
        "error_message": message,
        "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }


def handle_list_partition_reassignments(broker: Broker, request: Request) -> Any:
    body = request.body
    named: list[TopicPartitionKey] | None = None
    if body.topics is not None:
        named = [(t.name, p) for t in body.topics for p in t.partition_indexes]
    controller = broker.controller
    ongoing = controller.list_partition_reassignments(named) if isinstance(controller, QuorumController) else {}
    return _list_response(ongoing)


def _list_response(ongoing: Mapping[TopicPartitionKey, Ongoing]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), move in ongoing.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "replicas": list(move.replicas),
                "adding_replicas": list(move.adding_replicas),
                "removing_replicas": list(move.removing_replicas),
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }


HANDLERS: dict[int, Handler] = {
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
}
