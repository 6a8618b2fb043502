"""Partition reassignment (KIP-455) on the quorum controller: the decisions of
``broker.controller.reassignment`` run on the active controller (or forwarded there as an
AlterPartitionReassignments request under ``FORWARD_CLIENT_ID``), answered once this node's
metadata shows each accepted partition moving (or moved) to its target, or back to its original
replicas for a cancellation.

ListPartitionReassignments is answered from this node's applied metadata: every node applies the
same log, so it shows what the active controller decided up to the entries applied here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.controller.errors import MetadataError
from broker.controller.forwarding import FORWARD_CLIENT_ID, ControllerChannel, NotActive
from broker.controller.reassignment import (
    Ongoing,
    TopicPartitionKey,
    alter_reassignment,
    is_reassigning,
    list_reassignments,
    target_replicas,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

if TYPE_CHECKING:
    from broker.controller.quorum import QuorumController

ALTER_VERSION = 1


@dataclass(frozen=True, slots=True)
class Move:
    """One partition of an AlterPartitionReassignments request: ``replicas`` None cancels."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


Result = tuple[int, str | None]  # (error code, error message)


async def alter_partition_reassignments(
    controller: QuorumController, moves: Sequence[Move], *, allow_replication_factor_change: bool = True
) -> dict[TopicPartitionKey, Result]:
    """Each partition's result; raises MetadataError when no active controller answered."""

    def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[TopicPartitionKey, Result]]:
        records: list[MetadataRecord] = []
        results: dict[TopicPartitionKey, Result] = {}
        for move in moves:
            key = (move.topic, move.partition)
            if key in results:
                results[key] = (ErrorCode.INVALID_REQUEST, "the partition is named twice")
                continue
            try:
                records.extend(
                    alter_reassignment(
                        state, move.topic, move.partition, move.replicas,
                        allow_replication_factor_change=allow_replication_factor_change,
                    )
                )  # fmt: skip
                results[key] = (ErrorCode.NONE, None)
            except MetadataError as exc:
                results[key] = (exc.code, exc.message)
        return records, results

    async def remote(channel: ControllerChannel, timeout_ms: int) -> dict[TopicPartitionKey, Result]:
        body = {
            "timeout_ms": timeout_ms,
            "allow_replication_factor_change": allow_replication_factor_change,
            "topics": _topics(moves),
        }
        response = await channel.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            ALTER_VERSION,
            body,
            client_id=FORWARD_CLIENT_ID,
            timeout_ms=timeout_ms,
        )
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            raise NotActive
        if response.error_code != ErrorCode.NONE:
            raise MetadataError(response.error_code, response.error_message or "the controller refused it")
        return {
            (t.name, p.partition_index): (p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }

    results = await controller._execute(local, remote)
    accepted = [m for m in moves if results.get((m.topic, m.partition), (1, None))[0] == ErrorCode.NONE]
    await controller._await_image(lambda: all(_shown(controller, m) for m in accepted), "the reassignment")
    return results


def _shown(controller: QuorumController, move: Move) -> bool:
    topic = controller.image().topics.get(move.topic)
    part = topic.partitions.get(move.partition) if topic is not None else None
    if part is None:
        return True
    if move.replicas is None:
        return not is_reassigning(part)
    return target_replicas(part) == move.replicas


def _topics(moves: Sequence[Move]) -> list[dict[str, object]]:
    by_topic: dict[str, list[dict[str, object]]] = {}
    for move in moves:
        by_topic.setdefault(move.topic, []).append(
            {"partition_index": move.partition, "replicas": None if move.replicas is None else list(move.replicas)}
        )
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def list_partition_reassignments(
    controller: QuorumController, partitions: Sequence[TopicPartitionKey] | None
) -> dict[TopicPartitionKey, Ongoing]:
    """The reassignments in progress this node's metadata shows (``partitions`` None: all)."""
    return list_reassignments(controller.state(), partitions)
