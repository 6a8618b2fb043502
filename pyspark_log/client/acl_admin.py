"""ACLs through the admin client: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

Types mirror Kafka's admin API (``AclBinding``, ``AclBindingFilter``) with Kafka's enum codes:

    await admin.create_acls([AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL,
                                        "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)])
    await admin.describe_acls(AclBindingFilter.any())
    await admin.delete_acls([AclBindingFilter(resource_type=ResourceType.TOPIC, name="orders")])

The functions take the admin's ``send`` (request to some broker; a broker forwards changes to the
active controller) and raise the first error a result carries (``create_acls``, ``delete_acls``)
or the response's error (``describe_acls``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark_log.client.errors import error_for
from pyspark_log.wire import ApiKey, Message
from pyspark_log.wire.acl_codes import (  # noqa: F401  (re-exported: the admin API's names)
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

Send = Callable[[int, dict[str, Any], float], Awaitable[Message]]


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBindingFilter:
    """None matches any name / principal / host; ANY any type, pattern, operation, permission."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls()

    def body(self) -> dict[str, Any]:
        return {
            "resource_type_filter": int(self.resource_type), "resource_name_filter": self.name,
            "pattern_type_filter": int(self.pattern_type), "principal_filter": self.principal,
            "host_filter": self.host, "operation": int(self.operation), "permission_type": int(self.permission_type),
        }  # fmt: skip


def _binding(t: Any, n: Any, p: Any, acl: Any) -> AclBinding:
    return AclBinding(
        ResourceType(int(t)), str(n), PatternType(int(p)), str(acl.principal), str(acl.host),
        AclOperation(int(acl.operation)), AclPermissionType(int(acl.permission_type)),
    )  # fmt: skip


async def create_acls(send: Send, bindings: Iterable[AclBinding], *, timeout_ms: float) -> None:
    items = list(bindings)
    body = {
        "creations": [
            {"resource_type": int(b.resource_type), "resource_name": b.name,
             "resource_pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
             "operation": int(b.operation), "permission_type": int(b.permission_type)}
            for b in items
        ]
    }  # fmt: skip
    resp = await send(ApiKey.CREATE_ACLS, body, timeout_ms)
    for binding, result in zip(items, resp.results, strict=False):
        if result.error_code:
            raise error_for(result.error_code, result.error_message, context=f"CreateAcls {binding}")


async def describe_acls(send: Send, acl_filter: AclBindingFilter, *, timeout_ms: float) -> list[AclBinding]:
    resp = await send(ApiKey.DESCRIBE_ACLS, acl_filter.body(), timeout_ms)
    if resp.error_code:
        raise error_for(resp.error_code, resp.error_message, context="DescribeAcls")
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, acl) for r in resp.resources for acl in r.acls]


async def delete_acls(send: Send, filters: Iterable[AclBindingFilter], *, timeout_ms: float) -> list[AclBinding]:
    """The ACLs deleted (all filters together)."""
    items = list(filters)
    resp = await send(ApiKey.DELETE_ACLS, {"filters": [f.body() for f in items]}, timeout_ms)
    deleted = []
    for result in resp.filter_results:
        if result.error_code:
            raise error_for(result.error_code, result.error_message, context="DeleteAcls")
        for m in result.matching_acls:
            deleted.append(_binding(m.resource_type, m.resource_name, m.pattern_type, m))
    return deleted
