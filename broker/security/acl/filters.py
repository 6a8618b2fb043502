"""ACL binding filters as DescribeAcls and DeleteAcls match them, with Kafka's rules (pure).

A filter (Kafka's ``AclBindingFilter``) matches a binding when every part does:

* resource type ANY, or equal;
* pattern type ANY (any pattern, the name must be equal), MATCH (every pattern that applies to
  the name: LITERAL of the name or of ``*``, PREFIXED of a prefix of it; KIP-290), or equal
  (name equal); a null name matches every name;
* principal and host null, or equal; operation and permission ANY, or equal.

A filter with an UNKNOWN (or unknown) part is INVALID_REQUEST (``is_unknown``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.acl.binding import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)


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
            (self.resource_type, RESOURCE_TYPES),
            (self.pattern_type, PATTERN_TYPES),
            (self.operation, OPERATIONS),
            (self.permission, PERMISSIONS),
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
