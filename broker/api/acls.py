"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): ACLs in the cluster metadata.

Create and Delete run on the active controller (``MetadataController.create_acls`` /
``delete_acls``; a quorum broker forwards them, so ``quorum_handlers`` wraps these handlers) and
answer one result per creation / filter, in request order. Describe reads this node's image.
Validation and matching are Kafka's (``broker.security.acl.binding``, ``filters``): an invalid creation or an
UNKNOWN filter part is INVALID_REQUEST. DescribeAcls v0 and DeleteAcls v0 cannot carry a pattern
type: they see LITERAL ACLs only, as Kafka's v0 responses.
Without an authorizer (``authorizer.class.name`` unset) the three answer SECURITY_DISABLED, as Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.controller.errors import MetadataError
from broker.security.acl.binding import AclBinding, PatternType
from broker.security.acl.filters import AclFilter
from pyspark_log.wire.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(body: Any, prefix: str = "") -> AclFilter:
    return AclFilter(
        int(body[f"resource_type{prefix}"]), body[f"resource_name{prefix}"], int(body.pattern_type_filter),
        body.principal_filter, body.host_filter, int(body.operation), int(body.permission_type),
    )  # fmt: skip


def _visible(acl: AclBinding, version: int) -> bool:
    return version > 0 or acl.pattern_type == PatternType.LITERAL


def handle_describe_acls(broker: Broker, request: Request) -> Mapping[str, Any]:
    if broker.authorizer is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
                "resources": []}  # fmt: skip
    acl_filter = _filter(request.body, "_filter")
    if acl_filter.is_unknown():
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "The filter contains an unknown element", "resources": []}  # fmt: skip
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in sorted(broker.image().acls.values(), key=_sort_key):
        if acl_filter.matches(acl) and _visible(acl, request.version):
            key = (int(acl.resource_type), acl.name, int(acl.pattern_type))
            by_resource.setdefault(key, []).append(
                {"principal": acl.principal, "host": acl.host, "operation": int(acl.operation),
                 "permission_type": int(acl.permission)}
            )  # fmt: skip
    resources = [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in by_resource.items()
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


def _sort_key(acl: AclBinding) -> tuple[Any, ...]:
    return (int(acl.resource_type), acl.name, int(acl.pattern_type), acl.principal, acl.host, int(acl.operation),
            int(acl.permission))  # fmt: skip


def handle_create_acls(broker: Broker, request: Request) -> Any:
    return _create(broker, request)


async def _create(broker: Broker, request: Request) -> Mapping[str, Any]:
    creations = [
        (int(c.resource_type), str(c.resource_name), int(c.resource_pattern_type), str(c.principal), str(c.host),
         int(c.operation), int(c.permission_type))
        for c in request.body.creations
    ]  # fmt: skip
    results: list[tuple[int, str | None]]
    if broker.authorizer is None:
        results = [(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(creations)
    else:
        try:
            results = list(await broker.controller.create_acls(creations))
        except MetadataError as exc:
            results = [(exc.code, exc.message)] * len(creations)
    return {"throttle_time_ms": 0, "results": [{"error_code": c, "error_message": m} for c, m in results]}


def handle_delete_acls(broker: Broker, request: Request) -> Any:
    return _delete(broker, request)


async def _delete(broker: Broker, request: Request) -> Mapping[str, Any]:
    filters = [_filter(f, "_filter") for f in request.body.filters]  # v0: pattern type LITERAL (the default)
    if broker.authorizer is None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
            for _ in filters
        ]}  # fmt: skip
    try:
        results = await broker.controller.delete_acls(filters)
    except MetadataError as exc:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": exc.code, "error_message": exc.message, "matching_acls": []} for _ in filters
        ]}  # fmt: skip
    out = []
    for code, message, matched in results:
        acls = [
            {"error_code": 0, "error_message": None, "resource_type": int(a.resource_type), "resource_name": a.name,
             "pattern_type": int(a.pattern_type), "principal": a.principal, "host": a.host,
             "operation": int(a.operation), "permission_type": int(a.permission)}
            for _, a in matched
        ]  # fmt: skip
        out.append({"error_code": code, "error_message": message, "matching_acls": acls})
    return {"throttle_time_ms": 0, "filter_results": out}
