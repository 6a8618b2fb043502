"""Authorization decisions with Kafka's StandardAuthorizer semantics (pure; not wired yet).

Issue #15's last step builds on this: ACLs stored in the metadata, CreateAcls/DescribeAcls/
DeleteAcls, and every API checking what Kafka checks. Until that is wired,
``authorizer.class.name`` stays refused at start-up (``broker.security.unsupported``).

Rules (Kafka's ``StandardAuthorizer`` / ``AclAuthorizer``, ``AclOperation`` implications):

* a super user (``super.users``) may do anything;
* an ACL applies to a resource when its type matches and its pattern does: LITERAL with the same
  name or the name ``*``, PREFIXED with a prefix of the name; to a request when its principal is
  the request's or ``User:*`` and its host is the client's or ``*``;
* DENY wins: any applying DENY ACL for the operation (or ALL) denies;
* ALLOW for the operation or ALL allows; ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE,
  and ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS;
* when no ACL at all applies to the resource (any principal, host or operation),
  ``allow.everyone.if.no.acl.found`` decides (Kafka's default: deny).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):  # Kafka's ResourceType codes
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):  # Kafka's PatternType codes
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):  # Kafka's AclOperation codes
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):  # Kafka's AclPermissionType codes
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name in Kafka

# ALLOW of any of these operations also allows the key (Kafka's implied operations)
_IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


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


@dataclass(frozen=True)
class Authorizer:
    acls: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def with_acls(self, acls: Iterable[AclBinding]) -> Authorizer:
        return Authorizer(tuple(acls), self.super_users, self.allow_everyone_if_no_acl_found)

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        on_resource = [acl for acl in self.acls if acl.matches_resource(resource_type, name)]
        if not on_resource:
            return self.allow_everyone_if_no_acl_found
        applying = [acl for acl in on_resource if acl.applies_to(principal, host)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in applying):
            return False
        allowing = {acl.operation for acl in applying if acl.permission == Permission.ALLOW}
        return bool(allowing & ({operation, Operation.ALL} | _IMPLIED_BY.get(operation, frozenset())))
