"""Issue #15 ("Every served API checks what Kafka checks"): the declarative check table covers
every API the broker serves, and the wrapper applies it — denied topics taken out of the request
and answered TOPIC_AUTHORIZATION_FAILED per partition, whole requests refused with the API's
error fields set, authorized-operations bit fields computed, forwarded requests needing
CLUSTER_ACTION. Handlers here are recording stand-ins: the wrapper is what is under test."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from broker.api.authz import authorized_handlers
from broker.api.context import Request
from broker.api.raft import raft_handlers
from broker.controller.forwarding import FORWARD_CLIENT_ID
from broker.metadata.image import MetadataImage, TopicImage
from broker.network.connection import ConnectionContext
from broker.security.acl.authority import AclAuthority
from broker.security.acl.binding import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.acl.checks import CHECKS, Rule
from broker.security.acl.config import AuthorizerSettings
from broker.security.acl.rules import RULES
from broker.security.listeners import ListenerPolicy
from broker.server import HANDLERS
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message

pytestmark = pytest.mark.unit

UNCHECKED = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}  # Kafka checks none either


def test_every_served_api_has_its_checks_declared() -> None:
    served = set(HANDLERS) | set(raft_handlers()) | {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
                                                      ApiKey.ALTER_PARTITION}  # fmt: skip
    assert served - UNCHECKED - set(CHECKS) == set()
    assert not UNCHECKED & set(CHECKS)


def test_every_named_rule_exists() -> None:
    names = {c.name for checks in CHECKS.values() for c in checks if isinstance(c, Rule)}
    assert names <= set(RULES)


@dataclass
class FakeBroker:
    """What the wrapper reads of a broker: the image and the listener policy."""

    current: MetadataImage
    listener_policy: ListenerPolicy = field(default_factory=lambda: ListenerPolicy(frozenset({"CONTROLLER"})))

    def image(self) -> MetadataImage:
        return self.current


EXISTING = ("ok", "no", "t", "mine", "theirs")


def image_with(*acls: AclBinding) -> MetadataImage:
    image = MetadataImage.empty("c", 1)
    for i, name in enumerate(EXISTING):
        image = image.with_topic(TopicImage(name, uuid.UUID(int=100 + i), {}, {}))
    return replace(image, acls={uuid.UUID(int=i): a for i, a in enumerate(acls)})


def allow(rt: ResourceType, name: str, op: Operation, principal: str = "User:alice") -> AclBinding:
    return AclBinding(rt, name, PatternType.LITERAL, principal, "*", op, Permission.ALLOW)


def call(api_key: int, version: int, body: dict[str, Any], acls: tuple[AclBinding, ...], *,
         principal: str = "User:alice", client_id: str = "c", listener: str = "CLIENT",
         super_users: frozenset[str] = frozenset()) -> tuple[Any, list[Any]]:  # fmt: skip
    seen: list[Any] = []

    def handler(broker: Any, request: Request) -> dict[str, Any]:
        seen.append(request.body)
        return {"topics": [], "responses": [], "results": []}

    handlers = authorized_handlers({api_key: handler}, AclAuthority(AuthorizerSettings(super_users, False)))
    ctx = ConnectionContext("10.0.0.9:5555", listener, 1, {"principal": principal})
    request = Request(RequestHeader(api_key, version, 1, client_id), Message(body), ctx)
    out = handlers[api_key](FakeBroker(image_with(*acls)), request)  # type: ignore[arg-type]
    return out, seen


def produce_body(*topics: str) -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 100,
            "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": None}]} for t in topics]}  # fmt: skip


def test_produce_runs_on_the_allowed_topics_and_answers_the_others_29_per_partition() -> None:
    out, seen = call(ApiKey.PRODUCE, 9, produce_body("ok", "no"), (allow(ResourceType.TOPIC, "ok", Operation.WRITE),))
    assert [t["name"] for t in seen[0]["topic_data"]] == ["ok"]
    assert out["responses"] == [
        {
            "name": "no",
            "partition_responses": [
                {"index": 0, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "base_offset": -1}
            ],
        }
    ]


def test_produce_auto_creates_a_missing_topic_only_with_create() -> None:
    write = allow(ResourceType.TOPIC, "new", Operation.WRITE)
    out, seen = call(ApiKey.PRODUCE, 9, produce_body("new"), (write,))
    assert seen[0]["topic_data"] == []
    assert out["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    _, seen = call(ApiKey.PRODUCE, 9, produce_body("new"), (write, allow(ResourceType.TOPIC, "new", Operation.CREATE)))
    assert [t["name"] for t in seen[0]["topic_data"]] == ["new"]


def test_super_users_and_deny_over_allow() -> None:
    _, seen = call(
        ApiKey.PRODUCE, 9, produce_body("t"), (), principal="User:root", super_users=frozenset({"User:root"})
    )
    assert [t["name"] for t in seen[0]["topic_data"]] == ["t"]
    deny = AclBinding(ResourceType.TOPIC, "t", PatternType.PREFIXED, "User:*", "10.0.0.9", Operation.WRITE,
                      Permission.DENY)  # fmt: skip
    out, seen = call(ApiKey.PRODUCE, 9, produce_body("t"), (allow(ResourceType.TOPIC, "t", Operation.ALL), deny))
    assert seen[0]["topic_data"] == []
    assert out["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_group_api_without_read_on_the_group_is_refused_before_the_handler() -> None:
    body = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    out, seen = call(ApiKey.HEARTBEAT, 4, body, ())
    assert seen == []
    assert out == {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    _, seen = call(ApiKey.HEARTBEAT, 4, body, (allow(ResourceType.GROUP, "g", Operation.READ),))
    assert len(seen) == 1


def test_offset_commit_needs_read_on_the_group_then_on_each_topic() -> None:
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 3}]}]}
    out, _ = call(ApiKey.OFFSET_COMMIT, 8, body, ())
    assert out["topics"][0]["partitions"] == [
        {"partition_index": 3, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    ]
    out, seen = call(ApiKey.OFFSET_COMMIT, 8, body, (allow(ResourceType.GROUP, "g", Operation.READ),))
    assert seen[0]["topics"] == []
    assert out["topics"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_cluster_apis_refuse_with_cluster_authorization_failed_per_item() -> None:
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x",
                "host": "*", "operation": 3, "permission_type": 3}  # fmt: skip
    out, seen = call(ApiKey.CREATE_ACLS, 3, {"creations": [creation, creation]}, ())
    assert seen == []
    assert out["results"] == [{"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}] * 2
    _, seen = call(ApiKey.CREATE_ACLS, 3, {"creations": [creation]}, (allow(ResourceType.CLUSTER, "kafka-cluster",
                                                                            Operation.ALTER),))  # fmt: skip
    assert len(seen) == 1


def test_transactional_apis_need_write_on_the_transactional_id() -> None:
    body = {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "committed": True}
    out, _ = call(ApiKey.END_TXN, 3, body, ())
    assert out == {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    init = {"transactional_id": None, "transaction_timeout_ms": 1000}
    out, _ = call(ApiKey.INIT_PRODUCER_ID, 4, init, ())
    assert out["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    _, seen = call(ApiKey.INIT_PRODUCER_ID, 4, init, (allow(ResourceType.TOPIC, "any", Operation.WRITE),))
    assert len(seen) == 1  # KIP-679: WRITE on some topic is enough for an idempotent producer


def test_metadata_hides_undescribable_topics_and_computes_authorized_operations() -> None:
    body = {"topics": [{"name": "mine", "topic_id": None}, {"name": "theirs", "topic_id": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": True}  # fmt: skip
    out, seen = call(ApiKey.METADATA, 12, body, (allow(ResourceType.TOPIC, "mine", Operation.READ),))
    assert [t["name"] for t in seen[0]["topics"]] == ["mine"]
    assert out["topics"] == [{"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": "theirs",
                              "is_internal": False, "partitions": []}]  # fmt: skip


def test_a_forwarded_admin_request_needs_cluster_action_on_the_controller_listener() -> None:
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x",
                "host": "*", "operation": 3, "permission_type": 3}  # fmt: skip
    admin = (allow(ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER),)
    out, seen = call(ApiKey.CREATE_ACLS, 3, {"creations": [creation]}, admin, client_id=FORWARD_CLIENT_ID,
                     listener="CONTROLLER")  # fmt: skip
    assert seen == []
    assert out["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    action = (allow(ResourceType.CLUSTER, "kafka-cluster", Operation.CLUSTER_ACTION),)
    _, seen = call(ApiKey.CREATE_ACLS, 3, {"creations": [creation]}, action, client_id=FORWARD_CLIENT_ID,
                   listener="CONTROLLER")  # fmt: skip
    assert len(seen) == 1


def test_describe_groups_answers_denied_groups_and_computes_authorized_operations() -> None:
    """Kafka's DescribeGroups v3+: GROUP_AUTHORIZATION_FAILED for a group one may not DESCRIBE;
    ``authorized_operations`` the bit field of READ/DESCRIBE/DELETE allowed when asked."""
    seen: list[Any] = []

    def handler(broker: Any, request: Request) -> dict[str, Any]:
        seen.append(request.body)
        return {"groups": [{"group_id": g, "error_code": 0, "authorized_operations": -(2**31)}
                           for g in request.body["groups"]]}  # fmt: skip

    handlers = authorized_handlers(
        {ApiKey.DESCRIBE_GROUPS: handler}, AclAuthority(AuthorizerSettings(frozenset(), False))
    )
    ctx = ConnectionContext("10.0.0.9:5555", "CLIENT", 1, {"principal": "User:alice"})
    body = Message({"groups": ["mine", "theirs"], "include_authorized_operations": True})
    request = Request(RequestHeader(ApiKey.DESCRIBE_GROUPS, 5, 1, "c"), body, ctx)
    broker = FakeBroker(image_with(allow(ResourceType.GROUP, "mine", Operation.READ)))
    out = handlers[ApiKey.DESCRIBE_GROUPS](broker, request)  # type: ignore[arg-type]
    assert seen[0]["groups"] == ["mine"]
    by_id = {g["group_id"]: g for g in out["groups"]}
    assert by_id["mine"]["authorized_operations"] == (1 << Operation.READ) | (1 << Operation.DESCRIBE)
    assert by_id["theirs"]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_describe_cluster_computes_cluster_authorized_operations() -> None:
    def handler(broker: Any, request: Request) -> dict[str, Any]:
        return {"error_code": 0, "cluster_authorized_operations": -(2**31)}

    handlers = authorized_handlers(
        {ApiKey.DESCRIBE_CLUSTER: handler}, AclAuthority(AuthorizerSettings(frozenset(), False))
    )
    ctx = ConnectionContext("10.0.0.9:5555", "CLIENT", 1, {"principal": "User:alice"})
    request = Request(RequestHeader(ApiKey.DESCRIBE_CLUSTER, 1, 1, "c"),
                      Message({"include_cluster_authorized_operations": True}), ctx)  # fmt: skip
    acls = (allow(ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER),)
    out = handlers[ApiKey.DESCRIBE_CLUSTER](FakeBroker(image_with(*acls)), request)  # type: ignore[arg-type]
    assert out["cluster_authorized_operations"] == (1 << Operation.ALTER) | (1 << Operation.DESCRIBE)
