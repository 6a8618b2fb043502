"""``pylog acls`` turns kafka-acls' flags into ACL bindings as kafka-acls does (issue #15):
operations by Kafka's names, principals × hosts × operations × resources, the --producer and
--consumer sets, and usage errors naming the flag."""

from __future__ import annotations

import argparse

import pytest

from pyspark_log.cli import acls
from pyspark_log.cli.errors import UsageError
from pyspark_log.client.acl_admin import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

pytestmark = pytest.mark.unit

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    acls.register(commands, argparse.ArgumentParser(add_help=False))
    return parser.parse_args(["acls", *argv])


def test_operation_names_as_kafka_acls_spells_them() -> None:
    assert acls.operation("Read") is AclOperation.READ
    assert acls.operation("ClusterAction") is AclOperation.CLUSTER_ACTION
    assert acls.operation("IdempotentWrite") is AclOperation.IDEMPOTENT_WRITE
    assert acls.operation("describe_configs") is AclOperation.DESCRIBE_CONFIGS
    with pytest.raises(UsageError, match="--operation"):
        acls.operation("Fly")


def test_principals_hosts_operations_and_resources_multiply() -> None:
    args = parse("--add", "--allow-principal", "User:alice", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1",
                 "--operation", "Read", "--topic", "t", "--group", "g")  # fmt: skip
    got = set(acls.bindings(args, PatternType.LITERAL))
    assert got == {
        AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, ALLOW),
        AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "10.0.0.1", AclOperation.READ, DENY),
        AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:bob", "10.0.0.1", AclOperation.READ, DENY),
    }


def test_producer_and_consumer_sets() -> None:
    producer = parse("--add", "--allow-principal", "User:p", "--producer", "--topic", "t", "--transactional-id", "tx",
                     "--idempotent")  # fmt: skip
    ops = {(b.resource_type, b.operation) for b in acls.bindings(producer, PatternType.PREFIXED)}
    assert ops == {
        (ResourceType.TOPIC, AclOperation.WRITE), (ResourceType.TOPIC, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, AclOperation.CREATE), (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE), (ResourceType.CLUSTER, AclOperation.IDEMPOTENT_WRITE),
    }  # fmt: skip
    cluster = [b for b in acls.bindings(producer, PatternType.PREFIXED) if b.resource_type == ResourceType.CLUSTER]
    assert cluster[0].pattern_type == PatternType.LITERAL  # the cluster resource is always literal
    consumer = parse("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    ops = {(b.resource_type, b.operation) for b in acls.bindings(consumer, PatternType.LITERAL)}
    assert ops == {(ResourceType.TOPIC, AclOperation.READ), (ResourceType.TOPIC, AclOperation.DESCRIBE),
                   (ResourceType.GROUP, AclOperation.READ)}  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--add", "--topic", "t"), "--allow-principal"),
        (("--add", "--allow-principal", "alice", "--topic", "t"), "Type:name"),
        (("--add", "--allow-principal", "User:a"), "resource"),
        (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"), "--group"),
    ],
)
def test_usage_errors_name_the_flag(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        acls.bindings(parse(*argv), PatternType.LITERAL)
