"""Consumer-group membership and administration: JoinGroup (11), SyncGroup (14), Heartbeat (12),
LeaveGroup (13), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Each handler turns the request into a call of the ``GroupCoordinator`` (``broker.coordinator.group``)
and its result into the response of the request's version. JoinGroup and SyncGroup may wait (for
the other members, up to the rebalance timeout): their handlers return an awaitable, so other
requests on the connection keep being read while responses stay in request order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.api.find_coordinator import handle_find_coordinator
from broker.api.offset_commit import (
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_txn_offset_commit,
)
from broker.coordinator.group import JoinRequest, JoinResult, SyncResult
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

Body = Mapping[str, Any]
# The group operations a principal may perform, as DescribeGroups v3+ reports them when asked
# (READ=3, DELETE=6, DESCRIBE=8 of Kafka's AclOperation) without an authorizer; with one,
# broker.security.acl.group_rules.describe_groups replaces them with what the ACLs allow.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED_OPERATIONS = -(2**31)


def client_host(request: Request) -> str:
    """Kafka's form of the member's address: ``/`` and the peer's host."""
    host = request.connection.peer.rsplit(":", 1)[0].strip("[]")
    return f"/{host}"


def _answer_later(
    start: Callable[[Callable[[Any], None]], None], render: Callable[[Any], Body]
) -> Body | Awaitable[Body]:
    """Run ``start(callback)``; answer at once if it called back synchronously, else later."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def done(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    start(done)
    if future.done():
        return render(future.result())

    async def wait() -> Body:
        return render(await future)

    return wait()


# -- JoinGroup ---------------------------------------------------------------------------------


def handle_join_group(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = broker.groups
    if coordinator is None:
        return _join_body(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, body.member_id), version)
    join = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id or "",
        group_instance_id=body.group_instance_id,
        require_known_member_id=version >= 4 and body.group_instance_id is None,
        client_id=request.header.client_id or "",
        client_host=client_host(request),
        rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        session_timeout_ms=body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
    )
    return _answer_later(lambda cb: coordinator.join_group(join, cb), lambda r: _join_body(r, version))


def _join_body(result: JoinResult, version: int) -> Body:
    ok = result.error == ErrorCode.NONE
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type if ok else None,
        "protocol_name": (result.protocol_name if ok else None) if version >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id,
        "skip_assignment": False,
        "member_id": result.member_id,
        "members": [
            {"member_id": mid, "group_instance_id": iid, "metadata": meta} for mid, iid, meta in result.members
        ],
    }


# -- SyncGroup ---------------------------------------------------------------------------------


def handle_sync_group(broker: Broker, request: Request) -> Any:
    body = request.body
    coordinator = broker.groups
    if coordinator is None:
        return _sync_body(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    return _answer_later(
        lambda cb: coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.group_instance_id,
            body.protocol_type,
            body.protocol_name,
            assignments,
            cb,
        ),
        _sync_body,
    )


def _sync_body(result: SyncResult) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


# -- Heartbeat and LeaveGroup ------------------------------------------------------------------


def handle_heartbeat(broker: Broker, request: Request) -> Any:
    body = request.body
    coordinator = broker.groups
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    code = coordinator.heartbeat(body.group_id, body.member_id, body.group_instance_id, body.generation_id)
    return {"throttle_time_ms": 0, "error_code": code}


def handle_leave_group(broker: Broker, request: Request) -> Any:
    body, version = request.body, request.version
    coordinator = broker.groups
    leaving: list[tuple[str, str | None]] = [(m.member_id, m.group_instance_id) for m in body.members]
    if version < 3:
        leaving = [(body.member_id, None)]
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "members": []}
    top, results = coordinator.leave_group(body.group_id, leaving)
    if version < 3 and top == ErrorCode.NONE and results:
        top = results[0][2]  # one member: its error is the response's
    return {
        "throttle_time_ms": 0,
        "error_code": top,
        "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in results],
    }


# -- DescribeGroups, ListGroups, DeleteGroups --------------------------------------------------


def handle_describe_groups(broker: Broker, request: Request) -> Any:
    body = request.body
    coordinator = broker.groups
    operations = GROUP_AUTHORIZED_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED_OPERATIONS
    groups = []
    for group_id in body.groups:
        if coordinator is None:
            groups.append(_empty_group(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, operations))
            continue
        if _share(broker) is not None and _share(broker).get(group_id) is not None:
            # a KIP-932 share group: Kafka's DescribeGroups answers it as Dead (ShareGroupDescribe describes it)
            groups.append({**_empty_group(group_id, ErrorCode.NONE, operations), "group_state": "Dead"})
            continue
        code, summary = coordinator.describe_group(group_id)
        if code == ErrorCode.NONE and coordinator.consumer is not None and coordinator.consumer.get(group_id):
            # a KIP-848 group: Kafka's DescribeGroups (v0-v5) answers it as a Dead group without
            # members; ConsumerGroupDescribe describes it
            groups.append({**_empty_group(group_id, ErrorCode.NONE, operations), "group_state": "Dead"})
            continue
        if code != ErrorCode.NONE:
            groups.append(_empty_group(group_id, code, operations))
            continue
        groups.append(
            {
                "error_code": 0,
                "group_id": group_id,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in summary.members
                ],
                "authorized_operations": operations,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}


def _empty_group(group_id: str, code: int, operations: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": operations,
    }


def handle_list_groups(broker: Broker, request: Request) -> Any:
    coordinator = broker.groups
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    states = request.body.states_filter if request.version >= 4 else []
    types = {t.lower() for t in request.body.types_filter} if request.version >= 5 else set()
    code, groups = coordinator.list_groups(states or ())
    consumer = {g.group_id: g for g in coordinator.consumer.listed()} if coordinator.consumer is not None else {}
    listed = [
        {"group_id": g, "protocol_type": t, "group_state": s, "group_type": "classic"}
        for g, t, s in groups
        if g not in consumer  # a consumer group's offsets live in a classic entry of the same id
    ]
    wanted_states = {s.lower() for s in states or ()}
    listed += [
        {"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state.value, "group_type": "consumer"}
        for g in consumer.values()
        if not wanted_states or g.state.value.lower() in wanted_states
    ]
    share = _share(broker)
    if share is not None:  # KIP-932 share groups (broker.api.share_groups)
        listed += [
            {"group_id": g.group_id, "protocol_type": "share", "group_state": g.state.value, "group_type": "share"}
            for g in share.listed()
            if not wanted_states or g.state.value.lower() in wanted_states
        ]
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "groups": [g for g in listed if not types or g["group_type"] in types],
    }


async def handle_delete_groups(broker: Broker, request: Request) -> Any:
    coordinator = broker.groups
    names = list(request.body.groups_names)
    if coordinator is None:
        results = dict.fromkeys(names, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    else:
        consumer = coordinator.consumer
        refused: dict[str, int] = {}
        forgotten: set[str] = set()
        for name in names:
            share = _share(broker)
            if share is not None and coordinator.manager.status(name, allow_empty_id=True) is None:
                code = await share.delete(name)  # KIP-932: None when not a share group (state deleted first)
                if code == ErrorCode.NONE:
                    forgotten.add(name)
                elif code is not None:
                    refused[name] = code
                if code is not None:
                    continue
            if consumer is not None and coordinator.manager.status(name, allow_empty_id=True) is None:
                code = consumer.delete(name)  # None: not a KIP-848 group; NONE: forgotten, offsets below
                if code == ErrorCode.NONE:
                    forgotten.add(name)
                elif code is not None:
                    refused[name] = code
        results = coordinator.delete_groups([n for n in names if n not in refused])
        for name in forgotten:  # a consumer group without committed offsets has no classic entry
            if results.get(name) == ErrorCode.GROUP_ID_NOT_FOUND:
                results[name] = ErrorCode.NONE
        results.update(refused)
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": name, "error_code": results[name]} for name in dict.fromkeys(names)],
    }


def _share(broker: Broker) -> Any:
    """The broker's share groups (KIP-932), None when not served (or a test double has none)."""
    return getattr(broker, "share", None)


def group_handlers() -> dict[int, Handler]:
    """Every group API this package serves, for ``broker.server.HANDLERS``."""
    from broker.api.consumer_groups import (
        handle_consumer_group_describe,
        handle_consumer_group_heartbeat,
    )

    return {
        ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,  # KIP-848
        ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
        ApiKey.FIND_COORDINATOR: handle_find_coordinator,
        ApiKey.JOIN_GROUP: handle_join_group,
        ApiKey.SYNC_GROUP: handle_sync_group,
        ApiKey.HEARTBEAT: handle_heartbeat,
        ApiKey.LEAVE_GROUP: handle_leave_group,
        ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
        ApiKey.LIST_GROUPS: handle_list_groups,
        ApiKey.DELETE_GROUPS: handle_delete_groups,
        ApiKey.OFFSET_COMMIT: handle_offset_commit,
        ApiKey.OFFSET_FETCH: handle_offset_fetch,
        ApiKey.OFFSET_DELETE: handle_offset_delete,
        ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    }
