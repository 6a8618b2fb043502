"""ElectLeaders (43): preferred and unclean leader elections an admin asks for (KIP-460).

Served on every node: the controller (``MetadataController.elect_leaders``) runs the elections
where they belong — on the active controller, forwarded there from other KRaft nodes
(``broker.api.broker_registration.FORWARDABLE``), or answered by a single node's
``LocalController``. v0 has no ``election_type`` (always PREFERRED) and no top-level error code.

Errors: per partition as ``partition_changes.elect_leaders`` decides; an election type other
than 0 or 1 is INVALID_REQUEST for every named partition; a controller failure
(NOT_CONTROLLER, REQUEST_TIMED_OUT when no active controller answered) is the top-level error
from v1, and each partition's error in v0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.controller.errors import MetadataError
from broker.controller.partition_changes import ElectionResult, ElectionType, TopicPartitionKey
from pyspark_log.wire.errors import ErrorCode


def handle_elect_leaders(broker: Broker, request: Request) -> Any:
    return _elect_leaders(broker, request)


async def _elect_leaders(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    named: list[TopicPartitionKey] | None = None
    if body.topic_partitions is not None:
        named = list(dict.fromkeys((t.topic, p) for t in body.topic_partitions for p in t.partitions))
    raw_type = body.election_type if request.version >= 1 else int(ElectionType.PREFERRED)
    if raw_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        failed = ElectionResult(ErrorCode.INVALID_REQUEST, f"unknown election type {raw_type}")
        return _response(ErrorCode.NONE, dict.fromkeys(named or (), failed))
    try:
        results = await broker.controller.elect_leaders(ElectionType(raw_type), named)
    except MetadataError as exc:
        if request.version >= 1:
            return _response(exc.code, {})
        return _response(ErrorCode.NONE, dict.fromkeys(named or (), ElectionResult(exc.code, exc.message)))
    return _response(ErrorCode.NONE, results)


def _response(error_code: int, results: Mapping[TopicPartitionKey, ElectionResult]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), result in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": result.error_code, "error_message": result.error_message}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": error_code,
        "replica_election_results": [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()],
    }
