"""An ACL binding (Kafka's ``AclBinding``: a resource pattern and an access control entry), how it
matches a resource and a request, and the validation of a new one (CreateAcls) (pure).

A binding applies to a resource when its type matches and its pattern does: LITERAL with the same
name or the name ``*``, PREFIXED with a prefix of the name (KIP-290); to a request when its
principal is the request's or ``User:*`` and its host is the client's or ``*`` (Kafka
documentation §7.5 "Authorization and ACLs").

A new ACL (CreateAcls) must name a concrete resource type, LITERAL or PREFIXED, a concrete
operation and ALLOW/DENY, a non-empty resource name (``kafka-cluster`` for CLUSTER) and a
principal of the form ``Type:name``; otherwise ``new_binding`` raises ``InvalidAcl`` with the
message Kafka's controller (``AclControlManager``) answers with INVALID_REQUEST.

The codes are Kafka's (``pyspark_log.wire.acl_codes``); ``Operation`` and ``Permission`` name
``AclOperation`` and ``AclPermissionType`` here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark_log.wire.acl_codes import CLUSTER_NAME, PatternType, ResourceType
from pyspark_log.wire.acl_codes import AclOperation as Operation
from pyspark_log.wire.acl_codes import AclPermissionType as Permission

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str  # "User:alice" or "User:*"
    host: str  # an IP address or "*"
    operation: Operation
    permission: Permission

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name in (name, WILDCARD)
        return name.startswith(self.name)

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)


RESOURCE_TYPES = frozenset(int(t) for t in ResourceType)
PATTERN_TYPES = frozenset(int(t) for t in PatternType)
OPERATIONS = frozenset(int(t) for t in Operation)
PERMISSIONS = frozenset(int(t) for t in Permission)
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
    if operation not in OPERATIONS or operation in (Operation.ANY, Operation.UNKNOWN):
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
