"""Issue #15 ("per API: allowed principal succeeds, others get the Kafka error code"): the admin
APIs through pylog's own client over SASL/PLAIN. For each, alice holds exactly the ACL Kafka
requires and the call succeeds; bob holds none and gets the API's error code — cluster APIs
CLUSTER_AUTHORIZATION_FAILED, topic APIs TOPIC_AUTHORIZATION_FAILED, groups
GROUP_AUTHORIZATION_FAILED, transactional ids TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pyspark_log.client import (
    AdminClient,
    AlterConfigOp,
    ClientQuotaAlteration,
    ConfigResource,
    ElectionType,
    KafkaError,
    NewTopic,
    TopicPartition,
)
from pyspark_log.client.acl_admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pyspark_log.client.admin import ResourceType as ConfigType
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ErrorCode
from tests.integration.test_acls import addresses, overrides

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("acl-admin"), overrides=overrides(), python=sys.executable) as b:
        yield b


def client(broker: EmbeddedBroker, user: str | None) -> AdminClient:
    if user is None:
        return AdminClient({"bootstrap.servers": addresses(broker)["PLAINTEXT"]})
    return AdminClient({
        "bootstrap.servers": addresses(broker)["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw",
        "default.api.timeout.ms": 10_000,
    })  # fmt: skip


def first_error(value: Any) -> int | None:
    """The code of the first KafkaError in a result (dicts and lists searched), else None."""
    if isinstance(value, KafkaError):
        return int(value.code)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            code = first_error(item)
            if code is not None:
                return code
    return None


def outcome(call: Callable[[AdminClient], Any], admin: AdminClient) -> int | None:
    try:
        return first_error(call(admin))
    except KafkaError as exc:
        return int(exc.code)


CLUSTER = ("kafka-cluster", ResourceType.CLUSTER)
Case = tuple[str, ResourceType, AclOperation, Callable[[AdminClient, str], Any], ErrorCode]

CASES: list[Case] = [
    ("cluster", ResourceType.CLUSTER, AclOperation.DESCRIBE, lambda a, _n: a.describe_acls(AclBindingFilter()),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("cluster", ResourceType.CLUSTER, AclOperation.DESCRIBE, lambda a, _n: a.describe_user_scram_credentials(),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("cluster", ResourceType.CLUSTER, AclOperation.DESCRIBE_CONFIGS, lambda a, _n: a.describe_client_quotas(),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("cluster", ResourceType.CLUSTER, AclOperation.ALTER_CONFIGS,
     lambda a, n: a.alter_client_quotas([ClientQuotaAlteration({"client-id": n}, {"producer_byte_rate": 1e6})]),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("cluster", ResourceType.CLUSTER, AclOperation.ALTER,
     lambda a, n: a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(n, 0)]),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("topic", ResourceType.TOPIC, AclOperation.ALTER, lambda a, n: a.create_partitions({n: 2}),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("topic", ResourceType.TOPIC, AclOperation.DELETE,
     lambda a, n: a.delete_records({TopicPartition(n, 0): 0}, return_exceptions=True),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("topic", ResourceType.TOPIC, AclOperation.ALTER_CONFIGS,
     lambda a, n: a.incremental_alter_configs({ConfigResource(ConfigType.TOPIC, n): [AlterConfigOp("retention.ms",
                                                                                                    "60000")]}),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("group", ResourceType.GROUP, AclOperation.DELETE, lambda a, n: a.delete_consumer_groups([n]),
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("txn", ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE, lambda a, n: a.describe_transactions([n]),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
]  # fmt: skip
IDS = [f"{rt.name.lower()}-{op.name.lower()}-{i}" for i, (_k, rt, op, _c, _e) in enumerate(CASES)]
ALLOWED_OR_NOT_FOUND = {None, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                        ErrorCode.ELECTION_NOT_NEEDED}  # fmt: skip


@pytest.mark.parametrize(("kind", "resource_type", "operation", "call", "refused"), CASES, ids=IDS)
def test_the_admin_api_needs_its_acl(broker: EmbeddedBroker, kind: str, resource_type: ResourceType,
                                     operation: AclOperation, call: Callable[[AdminClient, str], Any],
                                     refused: ErrorCode) -> None:  # fmt: skip
    name = f"{kind}-{uuid.uuid4().hex[:8]}"
    root = client(broker, None)
    try:
        root.create_topics([NewTopic(name if kind == "topic" or kind == "cluster" else f"t-{name}", 1, 1)])
        resource = "kafka-cluster" if resource_type == ResourceType.CLUSTER else name
        root.create_acls([AclBinding(resource_type, resource, PatternType.LITERAL, "User:alice", "*", operation,
                                     AclPermissionType.ALLOW)])  # fmt: skip
    finally:
        root.close()
    for user, expected in (("bob", {refused}), ("alice", ALLOWED_OR_NOT_FOUND)):
        admin = client(broker, user)
        try:
            got = outcome(lambda a: call(a, name), admin)
        finally:
            admin.close()
        assert got in expected, (user, got)
    if resource_type == ResourceType.CLUSTER:  # the next case starts without it
        root = client(broker, None)
        try:
            root.delete_acls([AclBindingFilter(ResourceType.CLUSTER, principal="User:alice")])
        finally:
            root.close()
