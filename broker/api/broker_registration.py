"""BrokerRegistration (62), BrokerHeartbeat (63), AlterPartition (56), and the admin handlers of a
quorum node.

Served only when ``process.roles`` is set (``quorum_handlers``), by every node: the active
controller answers them; any other node answers NOT_CONTROLLER, except that a registration
whose cluster id is not this node's is answered INCONSISTENT_CLUSTER_ID by whichever controller
gets it, so a broker of another cluster is refused even before it knows the leader.

``quorum_handlers`` also wraps the admin handlers (CreateTopics, DeleteTopics, CreatePartitions,
AlterConfigs, IncrementalAlterConfigs, ElectLeaders): a request that another node forwarded
(``FORWARD_CLIENT_ID``) runs with ``forwarded_request`` set, so the controller answers
NOT_CONTROLLER instead of forwarding it a second time (see ``broker.controller.forwarding``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Handler, HandlerResult, Request
from broker.controller.forwarding import FORWARD_CLIENT_ID, Registration, forwarded_request
from broker.controller.partition_changes import IsrChange
from broker.controller.quorum import QuorumController
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

FORWARDABLE = (
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.UNREGISTER_BROKER,
)


def _quorum(broker: Broker) -> QuorumController | None:
    controller = broker.controller
    return controller if isinstance(controller, QuorumController) else None


def handle_broker_registration(broker: Broker, request: Request) -> Any:
    return _registration(broker, request)


async def _registration(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    controller = _quorum(broker)
    if controller is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "broker_epoch": -1}
    listener = body.listeners[0] if body.listeners else None  # the inter-broker listener comes first
    if listener is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "broker_epoch": -1}
    endpoints = tuple((str(item.name).upper(), str(item.host), int(item.port)) for item in body.listeners)
    reg = Registration(
        body.broker_id, body.cluster_id, body.incarnation_id, listener.host, listener.port, body.rack, endpoints
    )
    code, epoch = await controller.handle_registration(reg)
    return {"throttle_time_ms": 0, "error_code": code, "broker_epoch": epoch}


def handle_broker_heartbeat(broker: Broker, request: Request) -> Any:
    return _heartbeat(broker, request)


async def _heartbeat(broker: Broker, request: Request) -> Mapping[str, Any]:
    body = request.body
    controller = _quorum(broker)
    if controller is None:
        code, fenced = int(ErrorCode.NOT_CONTROLLER), True
    else:
        code, fenced = await controller.handle_heartbeat(
            body.broker_id, body.broker_epoch, want_shut_down=body.want_shut_down,
            metadata_offset=body.current_metadata_offset,
        )  # fmt: skip
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "is_caught_up": code == ErrorCode.NONE,
        "is_fenced": fenced,
        "should_shut_down": bool(body.want_shut_down) and code == ErrorCode.NONE,
    }


def handle_alter_partition(broker: Broker, request: Request) -> Any:
    return _alter_partition(broker, request)


async def _alter_partition(broker: Broker, request: Request) -> Mapping[str, Any]:
    """AlterPartition on the active controller (KIP-497; ``partition_changes.alter_partition``).
    v0-v1 name topics, v2+ topic ids; v3 carries broker epochs with the ISR (not checked); an unknown
    name is UNKNOWN_TOPIC_OR_PARTITION."""
    body = request.body
    controller = _quorum(broker)
    image = broker.image()
    changes: list[IsrChange] = []
    unknown: list[tuple[Any, Any]] = []
    for topic in body.topics:
        topic_id = topic.topic_id if request.version >= 2 else None
        if topic_id is None:
            found = image.topics.get(topic.topic_name)
            topic_id = found.topic_id if found is not None else None
        for part in topic.partitions:
            if topic_id is None:
                unknown.append((topic, part))
                continue
            isr = [b.broker_id for b in part.new_isr_with_epochs] if request.version >= 3 else part.new_isr
            changes.append(
                IsrChange(topic_id, part.partition_index, part.leader_epoch, tuple(isr), part.partition_epoch)
            )
    if controller is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    code, results = await controller.handle_alter_partition(body.broker_id, body.broker_epoch, changes)
    if code != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": code, "topics": []}
    topics: dict[Any, list[dict[str, Any]]] = {}
    names = {t.topic_id: t.name for t in broker.image().topics.values()}
    current = controller.image()
    for change, part_code in results:
        name = names.get(change.topic_id)
        state = current.topics[name].partitions.get(change.partition) if name in current.topics else None
        entry: dict[str, Any] = {"partition_index": change.partition, "error_code": part_code}
        if state is not None:
            entry.update(
                leader_id=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                partition_epoch=state.partition_epoch,
            )  # fmt: skip
        else:
            entry.update(leader_id=-1, leader_epoch=-1, isr=[], partition_epoch=-1)
        topics.setdefault(change.topic_id, []).append(entry)
    out = [{"topic_id": tid, "topic_name": names.get(tid, ""), "partitions": parts} for tid, parts in topics.items()]
    for topic, part in unknown:
        out.append(
            {
                "topic_name": topic.topic_name,
                "partitions": [
                    {
                        "partition_index": part.partition_index,
                        "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "leader_id": -1,
                        "leader_epoch": -1,
                        "isr": [],
                        "partition_epoch": -1,
                    }
                ],
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": out}


def _forwarding_aware(handler: Handler) -> Handler:
    def wrapped(broker: Broker, request: Request) -> HandlerResult:
        if request.header.client_id != FORWARD_CLIENT_ID:
            return handler(broker, request)
        return _run_forwarded(handler, broker, request)

    return wrapped


async def _run_forwarded(handler: Handler, broker: Broker, request: Request) -> Mapping[str, Any] | None:
    token = forwarded_request.set(True)
    try:
        result = handler(broker, request)
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        forwarded_request.reset(token)


def quorum_handlers(base: Mapping[int, Handler]) -> dict[int, Handler]:
    """``base`` with the forwardable admin handlers wrapped and BrokerRegistration/Heartbeat added."""
    handlers = dict(base)
    for key in FORWARDABLE:
        if key in handlers:
            handlers[key] = _forwarding_aware(handlers[key])
    handlers[ApiKey.BROKER_REGISTRATION] = handle_broker_registration
    handlers[ApiKey.BROKER_HEARTBEAT] = handle_broker_heartbeat
    handlers[ApiKey.ALTER_PARTITION] = handle_alter_partition
    return handlers
