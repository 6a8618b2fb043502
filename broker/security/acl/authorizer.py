"""Authorization decisions with Kafka's StandardAuthorizer semantics (pure).

The ACLs come from the metadata image (``AccessControlEntryRecord``s, ``MetadataImage.acls``,
kept current by ``broker.security.acl.authority``); ``broker.security.acl.checks`` declares what
each API checks and ``broker.security.acl.rules`` applies it.

Rules (Kafka documentation §7.5 "Authorization and ACLs"; Kafka's ``StandardAuthorizer`` /
``AclAuthorizer``, ``AclOperation`` implications):

* a super user (``super.users``) may do anything;
* an ACL applies to a resource and a request as ``AclBinding`` says (LITERAL, ``*``, PREFIXED;
  the principal or ``User:*``, the host or ``*``);
* DENY wins: any applying DENY ACL for the operation (or ALL) denies;
* ALLOW for the operation or ALL allows; ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE,
  and ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS;
* when no ACL at all applies to the resource (any principal, host or operation),
  ``allow.everyone.if.no.acl.found`` decides (Kafka's default: deny).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.security.acl.binding import WILDCARD, AclBinding, Operation, PatternType, Permission, ResourceType

# ALLOW of any of these operations also allows the key (Kafka's implied operations)
_IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True)
class Authorizer:
    """The decisions over one set of ACLs. The ACLs are indexed at construction (LITERAL by
    type and name, PREFIXED by type and prefix): a check costs a few dictionary lookups whatever
    the number of ACLs, so it stays far below a millisecond on the event loop; ``updated``
    changes the index by the ACLs added and removed."""

    acls: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _literal: dict[tuple[ResourceType, str], list[AclBinding]] = field(init=False, repr=False, compare=False)
    _prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = field(init=False, repr=False, compare=False)
    _prefix_lengths: dict[ResourceType, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _by_type: dict[ResourceType, list[AclBinding]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for acl in self.acls:
            if acl.pattern_type == PatternType.LITERAL:
                literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            else:
                prefixed.setdefault((acl.resource_type, acl.name), []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.name))
        self._set_index(literal, prefixed, lengths)

    def _set_index(
        self,
        literal: dict[tuple[ResourceType, str], list[AclBinding]],
        prefixed: dict[tuple[ResourceType, str], list[AclBinding]],
        lengths: dict[ResourceType, set[int]],
    ) -> None:
        """``lengths``: the PREFIXED names' lengths per type (a length no ACL has any more only
        costs a lookup)."""
        object.__setattr__(self, "_literal", literal)
        object.__setattr__(self, "_prefixed", prefixed)
        object.__setattr__(self, "_prefix_lengths", {t: tuple(sorted(v)) for t, v in lengths.items()})
        object.__setattr__(self, "_by_type", {})  # filled on first use (authorize_by_resource_type only)

    def with_acls(self, acls: Iterable[AclBinding]) -> Authorizer:
        return Authorizer(tuple(acls), self.super_users, self.allow_everyone_if_no_acl_found)

    def updated(
        self, acls: tuple[AclBinding, ...], added: Iterable[AclBinding], removed: Iterable[AclBinding]
    ) -> Authorizer:
        """This authorizer over ``acls``, which are this one's minus ``removed`` plus ``added``:
        the index is copied and only the touched entries change (Kafka's StandardAuthorizer also
        updates per ACL), so a small change to many ACLs does not re-index them all."""
        literal, prefixed = dict(self._literal), dict(self._prefixed)
        lengths = {t: set(v) for t, v in self._prefix_lengths.items()}
        for acl in removed:
            target = literal if acl.pattern_type == PatternType.LITERAL else prefixed
            key = (acl.resource_type, acl.name)
            remaining = [a for a in target.get(key, ()) if a != acl]
            if remaining:
                target[key] = remaining
            else:
                target.pop(key, None)
        for acl in added:
            target = literal if acl.pattern_type == PatternType.LITERAL else prefixed
            key = (acl.resource_type, acl.name)
            target[key] = [*target.get(key, ()), acl]
            if acl.pattern_type != PatternType.LITERAL:
                lengths.setdefault(acl.resource_type, set()).add(len(acl.name))
        out = object.__new__(Authorizer)
        object.__setattr__(out, "acls", acls)
        object.__setattr__(out, "super_users", self.super_users)
        object.__setattr__(out, "allow_everyone_if_no_acl_found", self.allow_everyone_if_no_acl_found)
        out._set_index(literal, prefixed, lengths)
        return out

    def _of_type(self, resource_type: ResourceType) -> list[AclBinding]:
        if not self._by_type and self.acls:
            by_type: dict[ResourceType, list[AclBinding]] = {}
            for acl in self.acls:
                by_type.setdefault(acl.resource_type, []).append(acl)
            self._by_type.update(by_type)
        return self._by_type.get(resource_type, [])

    def _on_resource(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches the resource (``AclBinding.matches_resource``)."""
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            out += self._prefixed.get((resource_type, name[:length]), ())
        return out

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        on_resource = self._on_resource(resource_type, name)
        if not on_resource:
            return self.allow_everyone_if_no_acl_found
        applying = [acl for acl in on_resource if acl.applies_to(principal, host)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in applying):
            return False
        allowing = {acl.operation for acl in applying if acl.permission == Permission.ALLOW}
        return bool(allowing & ({operation, Operation.ALL} | _IMPLIED_BY.get(operation, frozenset())))

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType`` (KIP-679): whether some resource of the type allows
        ``operation`` — an applying ALLOW (of the operation, ALL or an implying one) that no
        applying DENY covers (a DENY of the name ``*``, the same literal name, or a prefix of it)."""
        if principal in self.super_users:
            return True
        of_type = [acl for acl in self._of_type(resource_type) if acl.applies_to(principal, host)]
        wanted = {operation, Operation.ALL} | _IMPLIED_BY.get(operation, frozenset())
        denies = [a for a in of_type if a.permission == Permission.DENY and a.operation in (operation, Operation.ALL)]
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD for d in denies):
            return False
        for allow in of_type:
            if allow.permission != Permission.ALLOW or allow.operation not in wanted:
                continue
            if not any(_covers(d, allow) for d in denies):
                return True
        if not self._of_type(resource_type):
            return self.allow_everyone_if_no_acl_found
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str, operations: Iterable[Operation]
    ) -> int:
        """Kafka's ``authorizedOperations`` bit field: bit ``op`` set for each of ``operations``
        (the resource type's supported ones) that is authorized."""
        bits = 0
        for op in operations:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether ``deny`` denies every resource ``allow`` allows."""
    if deny.pattern_type == PatternType.LITERAL:
        return deny.name == WILDCARD or (allow.pattern_type == PatternType.LITERAL and deny.name == allow.name)
    return allow.name.startswith(deny.name)


# The operations Kafka reports in authorized-operations fields, per resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
        Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}  # fmt: skip
