"""Issue #15 (DescribeAcls / DeleteAcls / CreateAcls): Kafka's ``AclBindingFilter`` matching (ANY and
MATCH pattern types, ANY resource types, null names), CreateAcls validation, and
``authorizeByResourceType`` (KIP-679) and authorized-operations bit fields."""

from __future__ import annotations

import pytest

from broker.security.acl.authorizer import SUPPORTED_OPERATIONS, Authorizer
from broker.security.acl.binding import (
    AclBinding,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    new_binding,
)
from broker.security.acl.filters import AclFilter

pytestmark = pytest.mark.unit

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rt: ResourceType, name: str, pattern: PatternType = LIT, op: Operation = Operation.READ,
        perm: Permission = ALLOW, principal: str = "User:alice", host: str = "*") -> AclBinding:  # fmt: skip
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def flt(rt: int = ResourceType.ANY, name: str | None = None, pattern: int = ANY, principal: str | None = None,
        host: str | None = None, op: int = Operation.ANY, perm: int = Permission.ANY) -> AclFilter:  # fmt: skip
    return AclFilter(rt, name, pattern, principal, host, op, perm)


LITERAL_T = acl(T, "orders")
WILD_T = acl(T, "*")
PREFIX_T = acl(T, "ord", PRE)
GROUP_G = acl(G, "orders")
ALL = (LITERAL_T, WILD_T, PREFIX_T, GROUP_G)


def matched(f: AclFilter) -> set[AclBinding]:
    return {a for a in ALL if f.matches(a)}


def test_any_filter_matches_everything() -> None:
    assert matched(flt()) == set(ALL)


def test_resource_type_any_or_equal() -> None:
    assert matched(flt(G)) == {GROUP_G}
    assert matched(flt(ResourceType.ANY, "orders")) == {LITERAL_T, GROUP_G}


def test_pattern_any_needs_the_exact_name_of_any_pattern() -> None:
    assert matched(flt(T, "ord", ANY)) == {PREFIX_T}
    assert matched(flt(T, "*", ANY)) == {WILD_T}


def test_pattern_match_finds_every_acl_that_applies_to_the_name() -> None:
    """Kafka's MATCH: LITERAL of the name or of ``*``, PREFIXED of a prefix of the name."""
    assert matched(flt(T, "orders", MATCH)) == {LITERAL_T, WILD_T, PREFIX_T}
    assert matched(flt(T, "other", MATCH)) == {WILD_T}


def test_literal_and_prefixed_filters_match_their_own_pattern_type_by_exact_name() -> None:
    assert matched(flt(T, "orders", LIT)) == {LITERAL_T}
    assert matched(flt(T, "orders", PRE)) == set()
    assert matched(flt(T, None, PRE)) == {PREFIX_T}


def test_principal_host_operation_and_permission_filters() -> None:
    bob = acl(T, "orders", principal="User:bob", host="10.0.0.1", op=Operation.WRITE, perm=DENY)
    f = flt(principal="User:bob")
    assert f.matches(bob)
    assert not f.matches(LITERAL_T)
    assert flt(host="10.0.0.1").matches(bob)
    assert not flt(host="10.0.0.2").matches(bob)
    assert flt(op=Operation.WRITE).matches(bob)
    assert not flt(op=Operation.READ).matches(bob)
    assert flt(perm=DENY).matches(bob)
    assert not flt(perm=ALLOW).matches(bob)


@pytest.mark.parametrize(
    "bad",
    [
        flt(rt=ResourceType.UNKNOWN),
        flt(pattern=PatternType.UNKNOWN),
        flt(op=Operation.UNKNOWN),
        flt(perm=0),
        flt(rt=99),
    ],
)
def test_unknown_filter_parts_are_recognised(bad: AclFilter) -> None:
    assert bad.is_unknown()


@pytest.mark.parametrize(
    ("creation", "message"),
    [
        ((ResourceType.ANY, "t", LIT, "User:a", "*", Operation.READ, ALLOW), "Invalid resourceType"),
        ((T, "t", MATCH, "User:a", "*", Operation.READ, ALLOW), "Invalid patternType"),
        ((T, "t", LIT, "User:a", "*", Operation.ANY, ALLOW), "Invalid operation"),
        ((T, "t", LIT, "User:a", "*", Operation.READ, Permission.ANY), "Invalid permissionType"),
        ((T, "", LIT, "User:a", "*", Operation.READ, ALLOW), "Resource name should not be empty"),
        ((C, "other", LIT, "User:a", "*", Operation.ALTER, ALLOW), "only valid name for the CLUSTER resource"),
        ((T, "t", LIT, "alice", "*", Operation.READ, ALLOW), "Could not parse principal"),
    ],
)
def test_create_acls_validation_as_kafka(creation: tuple, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        new_binding(*creation)


def test_a_valid_creation_becomes_a_binding() -> None:
    b = new_binding(T, "orders", PRE, "User:alice", "10.0.0.1", Operation.WRITE, DENY)
    assert b == AclBinding(T, "orders", PRE, "User:alice", "10.0.0.1", Operation.WRITE, DENY)


def test_authorize_by_resource_type_kip679() -> None:
    """An idempotent producer without IDEMPOTENT_WRITE may still init a producer id when it may
    WRITE to some topic, unless a DENY covers that ALLOW."""
    auth = Authorizer((acl(T, "orders", op=Operation.WRITE),))
    assert auth.authorize_by_resource_type("User:alice", "h", Operation.WRITE, T)
    assert not auth.authorize_by_resource_type("User:bob", "h", Operation.WRITE, T)
    denied = auth.with_acls((acl(T, "orders", op=Operation.WRITE), acl(T, "ord", PRE, Operation.WRITE, DENY)))
    assert not denied.authorize_by_resource_type("User:alice", "h", Operation.WRITE, T)
    star = auth.with_acls((acl(T, "orders", op=Operation.WRITE), acl(T, "*", op=Operation.ALL, perm=DENY)))
    assert not star.authorize_by_resource_type("User:alice", "h", Operation.WRITE, T)
    other = auth.with_acls((acl(T, "orders", op=Operation.WRITE), acl(T, "logs", op=Operation.WRITE, perm=DENY)))
    assert other.authorize_by_resource_type("User:alice", "h", Operation.WRITE, T)
    assert Authorizer(super_users=frozenset({"User:root"})).authorize_by_resource_type("User:root", "h",
                                                                                        Operation.WRITE, T)  # fmt: skip


def test_authorized_operations_bit_field() -> None:
    """Kafka's ``authorizedOperations``: bit ``op`` for each supported operation allowed; READ
    implies DESCRIBE."""
    auth = Authorizer((acl(G, "g", op=Operation.READ),))
    bits = auth.authorized_operations("User:alice", "h", G, "g", SUPPORTED_OPERATIONS[G])
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)
    assert auth.authorized_operations("User:bob", "h", G, "g", SUPPORTED_OPERATIONS[G]) == 0


def naive(auth: Authorizer, principal: str, host: str, op: Operation, rt: ResourceType, name: str) -> bool:
    """The rules written out over the plain ACL list (what the index must agree with)."""
    if principal in auth.super_users:
        return True
    on = [a for a in auth.acls if a.matches_resource(rt, name)]
    if not on:
        return auth.allow_everyone_if_no_acl_found
    applying = [a for a in on if a.applies_to(principal, host)]
    if any(a.permission == DENY and a.operation in (op, Operation.ALL) for a in applying):
        return False
    implied = {Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
               Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS}}.get(op, set())  # fmt: skip
    return any(a.permission == ALLOW and a.operation in {op, Operation.ALL, *implied} for a in applying)


@pytest.mark.parametrize("seed", range(20))
def test_the_indexed_authorizer_agrees_with_the_rules_over_random_acls(seed: int) -> None:
    import random

    rng = random.Random(seed)
    names = ["", "o", "or", "orders", "orders-eu", "logs", "*"]
    ops = [Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.ALL, Operation.ALTER_CONFIGS,
           Operation.DESCRIBE_CONFIGS]  # fmt: skip
    acls = tuple(
        AclBinding(rng.choice([T, G]), rng.choice(names[1:]), rng.choice([LIT, PRE]),
                   rng.choice(["User:alice", "User:bob", "User:*"]), rng.choice(["*", "10.0.0.1"]),
                   rng.choice(ops), rng.choice([ALLOW, DENY]))
        for _ in range(rng.randint(0, 12))
    )  # fmt: skip
    auth = Authorizer(acls, allow_everyone_if_no_acl_found=rng.random() < 0.3)
    for _ in range(200):
        args = ("User:" + rng.choice(["alice", "bob"]), rng.choice(["10.0.0.1", "10.0.0.2"]), rng.choice(ops),
                rng.choice([T, G]), rng.choice([*names[1:], "orders-us", "x"]))  # fmt: skip
        assert auth.authorize(*args) == naive(auth, *args), (seed, args)


@pytest.mark.parametrize("seed", range(10))
def test_an_updated_index_decides_as_a_fresh_one(seed: int) -> None:
    """``AclAuthority`` updates the index by the ACLs an image adds and removes; every decision
    must equal the one of an authorizer built from scratch over the new ACLs."""
    import random
    import uuid
    from dataclasses import replace

    from broker.metadata.image import MetadataImage
    from broker.security.acl.authority import AclAuthority
    from broker.security.acl.config import AuthorizerSettings

    rng = random.Random(seed)
    names = ["o", "or", "orders", "logs", "*"]

    def random_acl() -> AclBinding:
        return AclBinding(rng.choice([T, G]), rng.choice(names), rng.choice([LIT, PRE]),
                          rng.choice(["User:alice", "User:*"]), "*", rng.choice([Operation.READ, Operation.WRITE]),
                          rng.choice([ALLOW, DENY]))  # fmt: skip

    authority = AclAuthority(AuthorizerSettings(frozenset(), False))
    current: dict[uuid.UUID, AclBinding] = {}
    image = MetadataImage.empty("c", 1)
    for _ in range(30):
        current = dict(current)
        for key in rng.sample(sorted(current), k=min(len(current), rng.randint(0, 2))):
            del current[key]
        for _ in range(rng.randint(0, 3)):
            binding = random_acl()
            if binding not in current.values():
                current[uuid.uuid4()] = binding
        image = replace(image, acls=current)
        incremental = authority.authorizer(image)
        fresh = Authorizer(tuple(current.values()))
        for _ in range(30):
            args = ("User:alice", "h", rng.choice([Operation.READ, Operation.WRITE, Operation.DESCRIBE]),
                    rng.choice([T, G]), rng.choice([*names, "orders-eu", "x"]))  # fmt: skip
            assert incremental.authorize(*args) == fresh.authorize(*args), args
