"""ACL binding filters as DescribeAcls and DeleteAcls match them (pure), and the validation of
new ACLs, with Kafka's rules.

A filter (Kafka's ``AclBindingFilter``) matches a binding when every part does:

* resource type ANY, or equal;
* pattern type ANY (any pattern, the name must be equal), MATCH (every pattern that applies to
  the name: LITERAL of the name or of ``*``, PREFIXED of a prefix of it), or equal (name equal);
  a null name matches every name;
* principal and host null, or equal; operation and permission ANY, or equal.

A new ACL (CreateAcls) must name a concrete resource type, LITERAL or PREFIXED, a concrete
operation and ALLOW/DENY, a non-empty resource name (``kafka-cluster`` for CLUSTER) and a
principal of the form ``Type:name``; otherwise INVALID_REQUEST with Kafka's message.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.authorizer import (
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from pyspark_log.wire.acl_codes import CLUSTER_NAME


@dataclass(frozen=True)
class AclFilter:
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def is_unknown(self) -> bool:
        """Kafka's ``AclBindingFilter.isUnknown``: a part is UNKNOWN (or not a known code)."""
        parts = (
            (self.resource_type, _RESOURCE_TYPES),
            (self.pattern_type, _PATTERN_TYPES),
            (self.operation, _OPERATIONS),
            (self.permission, _PERMISSIONS),
        )
        return any(value == 0 or value not in known for value, known in parts)

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.name is not None:
            if self.pattern_type in (PatternType.ANY, acl.pattern_type):
                if self.name != acl.name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if acl.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(acl.name):
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (Operation.ANY, acl.operation):
            return False
        return self.permission in (Permission.ANY, acl.permission)


_RESOURCE_TYPES = frozenset(int(t) for t in ResourceType)
_PATTERN_TYPES = frozenset(int(t) for t in PatternType)
_OPERATIONS = frozenset(int(t) for t in Operation)
_PERMISSIONS = frozenset(int(t) for t in Permission)
# Resource types an ACL may name (pylog serves no delegation tokens; USER ACLs are accepted as Kafka does)
_ACL_RESOURCE_TYPES = frozenset(
    {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
     ResourceType.DELEGATION_TOKEN, ResourceType.USER}
)  # fmt: skip


class InvalidAcl(ValueError):
    """A CreateAcls creation Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def new_binding(  # noqa: PLR0917 - the seven parts of a CreateAcls creation, in Kafka's order
    resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int
) -> AclBinding:
    """The binding a CreateAcls creation asks for; raises ``InvalidAcl`` as Kafka's controller."""
    if resource_type not in _ACL_RESOURCE_TYPES:
        raise InvalidAcl(f"Invalid resourceType {resource_type}")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {pattern_type}")
    if operation not in _OPERATIONS or operation in (Operation.ANY, Operation.UNKNOWN):
        raise InvalidAcl(f"Invalid operation {operation}")
    if permission not in (Permission.ALLOW, Permission.DENY):
        raise InvalidAcl(f"Invalid permissionType {permission}")
    if not name:
        raise InvalidAcl("Resource name should not be empty")
    if resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, who = principal.partition(":")
    if not sep or not kind or not who:
        raise InvalidAcl(
            f"Could not parse principal from `{principal}` (no colon is present separating the principal type "
            "from name)"
        )
    if not host:
        raise InvalidAcl("Host should not be empty")
    return AclBinding(
        ResourceType(resource_type), name, PatternType(pattern_type), principal, host,
        Operation(operation), Permission(permission),
    )  # fmt: skip
