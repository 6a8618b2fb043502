"""Issue #15 (authorization core): Kafka's StandardAuthorizer rules — LITERAL, PREFIXED and ``*``
patterns, principals and hosts, DENY over ALLOW, implied DESCRIBE / DESCRIBE_CONFIGS, super users,
``allow.everyone.if.no.acl.found``."""

from __future__ import annotations

import pytest

from broker.security.acl.authorizer import Authorizer
from broker.security.acl.binding import AclBinding, Operation, PatternType, Permission, ResourceType

pytestmark = pytest.mark.unit

T, G, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rt: ResourceType, name: str, op: Operation, perm: Permission = ALLOW, *, pattern: PatternType = LIT,
        principal: str = "User:alice", host: str = "*") -> AclBinding:  # fmt: skip
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    auth = Authorizer((acl(T, "orders", Operation.READ), acl(T, "logs-", Operation.WRITE, pattern=PRE)))
    assert auth.authorize("User:alice", "10.0.0.1", Operation.READ, T, "orders")
    assert not auth.authorize("User:alice", "10.0.0.1", Operation.READ, T, "orders-eu")
    assert auth.authorize("User:alice", "10.0.0.1", Operation.WRITE, T, "logs-app")
    assert not auth.authorize("User:alice", "10.0.0.1", Operation.WRITE, T, "log")
    star = Authorizer((acl(T, "*", Operation.READ, principal="User:*"),))
    assert star.authorize("User:bob", "h", Operation.READ, T, "anything")


def test_deny_wins_over_allow_and_hosts_match() -> None:
    auth = Authorizer((
        acl(T, "t", Operation.ALL, principal="User:*"),
        acl(T, "t", Operation.WRITE, DENY, host="10.0.0.9"),
    ))  # fmt: skip
    assert auth.authorize("User:alice", "10.0.0.1", Operation.WRITE, T, "t")
    assert not auth.authorize("User:alice", "10.0.0.9", Operation.WRITE, T, "t")
    assert auth.authorize("User:alice", "10.0.0.9", Operation.READ, T, "t")
    prefixed_deny = Authorizer((acl(T, "t", Operation.READ), acl(T, "", Operation.ALL, DENY, pattern=PRE)))
    assert not prefixed_deny.authorize("User:alice", "h", Operation.READ, T, "t")


def test_implied_operations() -> None:
    auth = Authorizer((acl(T, "t", Operation.WRITE), acl(T, "c", Operation.ALTER_CONFIGS)))
    assert auth.authorize("User:alice", "h", Operation.DESCRIBE, T, "t")
    assert not auth.authorize("User:alice", "h", Operation.READ, T, "t")
    assert auth.authorize("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "c")
    assert not auth.authorize("User:alice", "h", Operation.DESCRIBE, T, "c")


def test_super_users_and_no_acl_found() -> None:
    auth = Authorizer((acl(G, "g", Operation.READ),), super_users=frozenset({"User:admin"}))
    assert auth.authorize("User:admin", "h", Operation.DELETE, TX, "tx")
    assert not auth.authorize("User:bob", "h", Operation.WRITE, TX, "tx")  # no ACL on it: denied by default
    open_default = Authorizer((acl(G, "g", Operation.READ),), allow_everyone_if_no_acl_found=True)
    assert open_default.authorize("User:bob", "h", Operation.WRITE, TX, "tx")
    assert not open_default.authorize("User:bob", "h", Operation.READ, G, "g")  # an ACL exists: only alice
