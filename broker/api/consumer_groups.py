"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The handlers map topic ids to names and back with the broker's metadata image and call the
consumer-group driver (``broker.coordinator.consumer_group.coordinator``); every decision is made
there. A broker without a group coordinator, or whose ``group.coordinator.rebalance.protocols``
leaves out ``consumer``, answers COORDINATOR_NOT_AVAILABLE / UNSUPPORTED_VERSION (the server
does not advertise the API then either). Responses follow Kafka 4.1: the heartbeat's
``Assignment`` is sent when the member joins, sends a full request, or its assignment changed;
ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for an id that is not a consumer group here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.coordinator.consumer_group.group import HeartbeatRequest, TopicsView
from broker.metadata.image import MetadataImage
from pyspark_log.wire.errors import ErrorCode

# READ, DELETE, DESCRIBE of Kafka's AclOperation, as DescribeGroups reports them (broker.api.groups;
# not imported: that module registers these handlers)
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED_OPERATIONS = -(2**31)
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # KIP-1099 MemberType: 0 classic, 1 consumer


def client_host(request: Request) -> str:
    """Kafka's form of the member's address: ``/`` and the peer's host."""
    return "/" + request.connection.peer.rsplit(":", 1)[0].strip("[]")


def topics_view(image: MetadataImage) -> dict[str, tuple[object, int]]:
    return {name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()}


def _names_by_id(topics: TopicsView) -> dict[Any, str]:
    return {tid: name for name, (tid, _) in topics.items()}


def _owned(body: Any, topics: TopicsView) -> dict[str, frozenset[int]] | None:
    if body.topic_partitions is None:
        return None
    names = _names_by_id(topics)
    owned: dict[str, frozenset[int]] = {}
    for tp in body.topic_partitions:
        name = names.get(tp.topic_id)
        if name is not None and tp.partitions:
            owned[name] = owned.get(name, frozenset()) | frozenset(tp.partitions)
    return owned


def _topic_partitions(parts: Mapping[str, frozenset[int]], topics: TopicsView, *, names: bool) -> list[dict[str, Any]]:
    out = []
    for topic in sorted(parts):
        found = topics.get(topic)
        entry: dict[str, Any] = {
            "topic_id": found[0] if found is not None else uuid.UUID(int=0),
            "partitions": sorted(parts[topic]),
        }
        if names:
            entry["topic_name"] = topic
        out.append(entry)
    return out


def handle_consumer_group_heartbeat(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = broker.groups
    consumer = coordinator.consumer if coordinator is not None else None
    if consumer is None:
        return _heartbeat_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not consumer.config.enabled:
        return _heartbeat_error(ErrorCode.UNSUPPORTED_VERSION, "The consumer rebalance protocol is not enabled.")
    topics = topics_view(broker.image())
    req = HeartbeatRequest(
        member_id=body.member_id or "",
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=tuple(body.subscribed_topic_names) if body.subscribed_topic_names is not None else None,
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor,
        owned=_owned(body, topics),
        client_id=request.header.client_id or "",
        client_host=client_host(request),
    )
    answer = consumer.heartbeat(body.group_id, req, topics, version)
    if answer.error != ErrorCode.NONE:
        return _heartbeat_error(answer.error, answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = {"topic_partitions": _topic_partitions(answer.assignment, topics, names=False)}
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": answer.member_id,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval_ms": answer.heartbeat_interval_ms,
        "assignment": assignment,
    }


def _heartbeat_error(code: int, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": 0,  # as Kafka's error responses (the field's default)
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def handle_consumer_group_describe(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = broker.groups
    operations = GROUP_AUTHORIZED_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED_OPERATIONS
    topics = topics_view(broker.image())
    groups = []
    for group_id in body.group_ids:
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
            "authorized_operations": operations,
        }
        if coordinator is None or coordinator.consumer is None:
            entry["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            groups.append(entry)
            continue
        error = coordinator.manager.status(group_id)
        if error is not None:
            entry["error_code"] = error
            groups.append(entry)
            continue
        group = coordinator.consumer.get(group_id)
        if group is None:
            entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
            entry["error_message"] = f"Group {group_id} not found."
            groups.append(entry)
            continue
        entry.update(
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=[
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" for none
                    "assignment": {"topic_partitions": _topic_partitions(m.assignment.assigned, topics, names=True)},
                    "target_assignment": {
                        "topic_partitions": _topic_partitions(group.describe_target(m.member_id), topics, names=True)
                    },
                    "member_type": (
                        -1 if version < 1 else CLASSIC_MEMBER_TYPE if m.classic is not None else CONSUMER_MEMBER_TYPE
                    ),
                }
                for m in group.members.values()
            ],
        )
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
