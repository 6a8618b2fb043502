"""Issue #15 (Authorization): an ACL matrix against a real broker with Kafka's StandardAuthorizer
semantics. Users log in with SASL/PLAIN; the PLAINTEXT listener is the administrators' (its
principal, ``User:ANONYMOUS``, is a super user — Kafka's documented practice for listeners
without authentication that the cluster's own connections use). Per API the allowed principal
succeeds and another gets Kafka's error code, from confluent-kafka and kafka-python: prefixed
patterns, DENY over ALLOW, super users, ``allow.everyone.if.no.acl.found``, a transactional
producer and a consumer group each needing exactly their ACLs (one removed → its specific error),
and ACLs surviving a restart."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline, wait_until

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-pw", "bob": "bob-pw", "root": "root-pw", "etl": "etl-pw", "reader": "reader-pw"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT_S = 30


def overrides(**extra: str) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS;User:root",
        **extra,
    }


def addresses(broker: EmbeddedBroker) -> dict[str, str]:
    ready = re.findall(r"pylog broker ready: .*listeners=(\S+)", broker.output())
    return dict(uri.split("://") for uri in ready[-1].split(","))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("acls"), overrides=overrides(), python=sys.executable) as b:
        yield b


def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": addresses(broker)["PLAINTEXT"]})


def as_user(broker: EmbeddedBroker, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": addresses(broker)["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra,
    }  # fmt: skip


def kp_user(broker: EmbeddedBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": addresses(broker)["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user],
    }  # fmt: skip


def acl(rt: ResourceType, name: str, principal: str, op: AclOperation, *, prefixed: bool = False,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return AclBinding(rt, name, pattern, principal, "*", op, permission)


def grant(broker: EmbeddedBroker, *bindings: AclBinding) -> None:
    client = admin(broker)  # kept referenced until the futures are done
    for future in client.create_acls(list(bindings)).values():
        future.result(timeout=TIMEOUT_S)


def revoke(broker: EmbeddedBroker, *bindings: AclBinding) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]  # fmt: skip
    client = admin(broker)
    for future in client.delete_acls(filters).values():
        assert len(future.result(timeout=TIMEOUT_S)) == 1


def create_topic(broker: EmbeddedBroker, name: str) -> str:
    client = admin(broker)
    for future in client.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=TIMEOUT_S)
    return name


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_error(config: dict[str, Any], topic: str) -> Any:
    """The delivery error of one record (None: delivered)."""
    errors: list[Any] = []
    producer = Producer({"message.timeout.ms": 10_000, "enable.idempotence": False, **config})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT_S)
    assert len(errors) == 1
    return errors[0]


def code_of(error: Any) -> int | None:
    return None if error is None else error.code()


def consumer_error(config: dict[str, Any], topic: str, *, want: int = 1) -> Any:
    """Subscribe and poll until ``want`` records arrive (None) or the client reports an error."""
    consumer = Consumer({"auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = Deadline(TIMEOUT_S)
        while not deadline.expired():
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() in (KafkaError._PARTITION_EOF,):
                    continue
                return msg.error()
            got += 1
            if got >= want:
                consumer.commit(asynchronous=False)
                return None
        raise AssertionError("neither records nor an error arrived")
    finally:
        consumer.close()


TOPIC, GROUP, TXN, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID, ResourceType.BROKER
A = AclOperation


def test_produce_needs_write_and_others_get_topic_authorization_failed(broker: EmbeddedBroker) -> None:
    topic = create_topic(broker, unique("w"))
    grant(broker, acl(TOPIC, topic, "User:alice", A.WRITE))
    assert produce_error(as_user(broker, "alice"), topic) is None
    assert code_of(produce_error(as_user(broker, "bob"), topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_producer_and_metadata(broker: EmbeddedBroker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    topic = create_topic(broker, unique("kp"))
    grant(broker, acl(TOPIC, topic, "User:alice", A.WRITE))
    ok = KafkaProducer(**kp_user(broker, "alice"), max_block_ms=TIMEOUT_S * 1000)
    try:
        assert ok.send(topic, b"v").get(timeout=TIMEOUT_S).offset == 0
    finally:
        ok.close()
    refused = KafkaProducer(**kp_user(broker, "bob"), max_block_ms=10_000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            refused.send(topic, b"v").get(timeout=TIMEOUT_S)
    finally:
        refused.close()


def test_fetch_needs_read(broker: EmbeddedBroker) -> None:
    """DESCRIBE alone lets a consumer see the topic; its Fetch is TOPIC_AUTHORIZATION_FAILED."""
    topic = create_topic(broker, unique("r"))
    assert produce_error({"bootstrap.servers": addresses(broker)["PLAINTEXT"]}, topic) is None
    grant(broker, acl(TOPIC, topic, "User:reader", A.DESCRIBE))
    consumer = Consumer({**as_user(broker, "reader"), "group.id": unique("unused"), "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def fetch_error() -> int | None:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() and msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                return msg.error().code()
            assert msg is None or msg.error(), "a record was delivered without READ"
            return None

        wait_until(fetch_error, "the Fetch to be refused", timeout_s=TIMEOUT_S)
    finally:
        consumer.close()
    grant(broker, acl(TOPIC, topic, "User:reader", A.READ))
    records = []
    consumer = Consumer({**as_user(broker, "reader"), "group.id": unique("unused"), "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        wait_until(lambda: [m for m in [consumer.poll(0.2)] if m is not None and not m.error() and records.append(m)
                            is None], "a record", timeout_s=TIMEOUT_S)  # fmt: skip
    finally:
        consumer.close()
    assert records[0].value() == b"v"


def test_metadata_lists_only_describable_topics(broker: EmbeddedBroker) -> None:
    mine, theirs = create_topic(broker, unique("mine")), create_topic(broker, unique("theirs"))
    grant(broker, acl(TOPIC, mine, "User:reader", A.DESCRIBE))
    topics = AdminClient(as_user(broker, "reader")).list_topics(timeout=TIMEOUT_S).topics
    assert mine in topics
    assert theirs not in topics
    named = AdminClient(as_user(broker, "reader")).list_topics(topic=theirs, timeout=TIMEOUT_S).topics[theirs]
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_acls_cover_the_names_they_prefix(broker: EmbeddedBroker) -> None:
    prefix = unique("pre") + "-"
    inside, outside = create_topic(broker, prefix + "a"), create_topic(broker, unique("out"))
    grant(broker, acl(TOPIC, prefix, "User:alice", A.WRITE, prefixed=True))
    assert produce_error(as_user(broker, "alice"), inside) is None
    assert code_of(produce_error(as_user(broker, "alice"), outside)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_deny_wins_over_allow(broker: EmbeddedBroker) -> None:
    topic = create_topic(broker, unique("deny"))
    grant(broker, acl(TOPIC, topic, "User:alice", A.ALL), acl(TOPIC, "*", "User:alice", A.WRITE,
                                                            permission=AclPermissionType.DENY))  # fmt: skip
    try:
        assert code_of(produce_error(as_user(broker, "alice"), topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        metadata = AdminClient(as_user(broker, "alice")).list_topics(topic=topic, timeout=TIMEOUT_S)
        assert metadata.topics[topic].error is None  # DESCRIBE (implied by ALL) is not denied
    finally:
        revoke(broker, acl(TOPIC, "*", "User:alice", A.WRITE, permission=AclPermissionType.DENY))


def test_super_users_need_no_acls(broker: EmbeddedBroker) -> None:
    topic = create_topic(broker, unique("su"))
    assert produce_error(as_user(broker, "root"), topic) is None
    assert code_of(produce_error(as_user(broker, "bob"), topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_admin_apis_need_their_cluster_and_topic_operations(broker: EmbeddedBroker) -> None:
    bob = AdminClient(as_user(broker, "bob"))
    name = unique("c")
    with pytest.raises(KafkaException) as caught:
        bob.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=TIMEOUT_S)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(TOPIC, name, "User:bob", A.CREATE))
    bob.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=TIMEOUT_S)
    assert_describe_acls_refused(broker)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as caught:
        bob.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(TOPIC, name, "User:bob", A.DESCRIBE_CONFIGS))
    assert bob.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as caught:
        bob.delete_topics([name])[name].result(timeout=TIMEOUT_S)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def assert_describe_acls_refused(broker: EmbeddedBroker) -> None:
    """DescribeAcls without DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED (kafka-python
    raises it; librdkafka 2.x reports an empty list for a top-level DescribeAcls error)."""
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    client = KafkaAdminClient(**kp_user(broker, "bob"))
    try:
        pattern = ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY)
        acl_filter = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY, resource_pattern=pattern)  # fmt: skip
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_acls(acl_filter)
    finally:
        client.close()


CONSUMER_ACLS: Callable[[str, str, str], list[AclBinding]] = lambda topic, group, who: [  # noqa: E731
    acl(TOPIC, topic, who, A.READ), acl(GROUP, group, who, A.READ),
]  # fmt: skip


def test_a_consumer_group_needs_exactly_read_on_the_topic_and_the_group(broker: EmbeddedBroker) -> None:
    topic, group = create_topic(broker, unique("cg")), unique("group")
    assert produce_error({"bootstrap.servers": addresses(broker)["PLAINTEXT"]}, topic) is None
    topic_read, group_read = CONSUMER_ACLS(topic, group, "User:reader")
    config = as_user(broker, "reader", **{"group.id": group})
    grant(broker, topic_read)  # no group ACL yet
    assert code_of(consumer_error(config, topic)) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(broker, group_read)
    assert consumer_error(config, topic) is None  # subscribes, fetches and commits
    revoke(broker, topic_read)
    assert code_of(consumer_error(config, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


class Refused(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code, message)
        self.code = code


def transactional_round(config: dict[str, Any], topic: str, group: str, source: str) -> None:
    """One read-process-write transaction: a record to ``topic`` and the group's offset of
    ``source`` committed with it; ``Refused(error code)`` when the client reports an error."""
    producer = Producer({"transaction.timeout.ms": 20_000, **config})
    consumer = Consumer({**{k: v for k, v in config.items() if k.startswith(("bootstrap", "security", "sasl"))},
                         "group.id": group})  # fmt: skip
    codes: list[int | None] = []
    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        # a refused write: the delivery report has the broker's error, commit_transaction fails
        producer.produce(topic, b"tx", on_delivery=lambda err, _msg: codes.append(err.code() if err else None))
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 1)], consumer.consumer_group_metadata(),
                                             TIMEOUT_S)  # fmt: skip
        producer.commit_transaction(TIMEOUT_S)
    except KafkaException as exc:
        refused = (
            next((c for c in codes if c is not None), None) if exc.args[0].code() == KafkaError._INCONSISTENT else None
        )
        raise Refused(refused if refused is not None else exc.args[0].code(), str(exc)) from None
    finally:
        consumer.close()


def test_a_transactional_producer_needs_exactly_its_acls(broker: EmbeddedBroker) -> None:
    """WRITE on the transactional id and the output topic, READ on the group and the input topic
    (TxnOffsetCommit): each removed alone fails with its own error code."""
    source, topic = create_topic(broker, unique("in")), create_topic(broker, unique("out"))
    group, txn = unique("txg"), unique("etl-tx")
    needed = {
        "txn": acl(TXN, txn, "User:etl", A.WRITE),
        "output": acl(TOPIC, topic, "User:etl", A.WRITE),
        "group": acl(GROUP, group, "User:etl", A.READ),
        "input": acl(TOPIC, source, "User:etl", A.READ),
    }
    grant(broker, *needed.values())
    config = as_user(broker, "etl", **{"transactional.id": txn})
    transactional_round(config, topic, group, source)
    expected = {
        "txn": KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "output": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "group": KafkaError.GROUP_AUTHORIZATION_FAILED, "input": KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }  # fmt: skip
    for name, binding in needed.items():
        revoke(broker, binding)
        try:
            with pytest.raises(Refused) as caught:
                transactional_round(config, topic, group, source)
            assert caught.value.code == expected[name], (name, caught.value)
        finally:
            grant(broker, binding)


def test_allow_everyone_if_no_acl_found(tmp_path_factory: pytest.TempPathFactory) -> None:
    extra = overrides(**{"allow.everyone.if.no.acl.found": "true"})
    with EmbeddedBroker(tmp_path_factory.mktemp("everyone"), overrides=extra, python=sys.executable) as open_broker:
        free, guarded = create_topic(open_broker, "free"), create_topic(open_broker, "guarded")
        grant(open_broker, acl(TOPIC, guarded, "User:alice", A.WRITE))
        assert produce_error(as_user(open_broker, "bob"), free) is None
        assert code_of(produce_error(as_user(open_broker, "bob"), guarded)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert produce_error(as_user(open_broker, "alice"), guarded) is None


def test_acls_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    with EmbeddedBroker(tmp_path_factory.mktemp("restart"), overrides=overrides(), python=sys.executable) as b:
        topic = create_topic(b, "kept")
        grant(b, acl(TOPIC, topic, "User:alice", A.WRITE))
        b.stop()
        b.start()
        wait_until(lambda: "SASL_PLAINTEXT" in addresses(b), "the restarted broker's listeners")
        assert produce_error(as_user(b, "alice"), topic) is None
        assert code_of(produce_error(as_user(b, "bob"), topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def poll_until_raises(consumer: Any) -> None:
    deadline = Deadline(TIMEOUT_S)
    while not deadline.expired():
        consumer.poll(timeout_ms=200)


def test_kafka_python_consumer_group_needs_read_on_the_group(broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    topic, group = create_topic(broker, unique("kpg")), unique("kp-group")
    assert produce_error({"bootstrap.servers": addresses(broker)["PLAINTEXT"]}, topic) is None
    grant(broker, acl(TOPIC, topic, "User:reader", A.READ))
    refused = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kp_user(broker, "reader"))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            poll_until_raises(refused)
    finally:
        refused.close()
    grant(broker, acl(GROUP, group, "User:reader", A.READ))
    allowed = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kp_user(broker, "reader"))
    try:
        got = wait_until(
            lambda: [r for rs in allowed.poll(timeout_ms=200).values() for r in rs],
            "a record through the group",
            timeout_s=TIMEOUT_S,
        )
        assert got[0].value == b"v"
        allowed.commit()
    finally:
        allowed.close()


def pylog_cli(*args: str, stdin: bytes | None = None) -> Any:
    import subprocess

    argv = [sys.executable, "-m", "pyspark_log.cli", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=120, check=False)


def test_pylog_acls_cli_with_a_sasl_command_config(broker: EmbeddedBroker, tmp_path: Any) -> None:
    """kafka-acls' flags through ``pylog acls``, logged in as the super user ``root`` with
    ``--command-config`` (Kafka's client properties); the ACLs it adds and removes take effect."""
    topic = create_topic(broker, unique("cli"))
    props = tmp_path / "root.properties"
    props.write_text(
        f"bootstrap.servers={addresses(broker)['SASL_PLAINTEXT']}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=PLAIN\nsasl.username=root\nsasl.password={USERS['root']}\n"
    )
    common = ("acls", "--command-config", str(props))
    added = pylog_cli(*common, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    assert added.returncode == 0, added.stderr
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in added.stdout.decode()
    assert produce_error(as_user(broker, "alice"), topic) is None
    listed = pylog_cli(*common, "--list", "--topic", topic)
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout.decode()
    declined = pylog_cli(*common, "--remove", "--topic", topic, stdin=b"n\n")
    assert declined.returncode == 1  # asked, answered no: nothing removed
    assert produce_error(as_user(broker, "alice"), topic) is None
    removed = pylog_cli(*common, "--remove", "--topic", topic, "--force")
    assert removed.returncode == 0, removed.stderr
    assert code_of(produce_error(as_user(broker, "alice"), topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    as_bob = pylog_cli("acls", "--bootstrap-server", addresses(broker)["SASL_PLAINTEXT"], "--list",
                       "--command-config", str(_bob_props(broker, tmp_path)))  # fmt: skip
    assert as_bob.returncode != 0
    assert b"CLUSTER_AUTHORIZATION_FAILED" in as_bob.stderr


def _bob_props(broker: EmbeddedBroker, tmp_path: Any) -> Any:
    props = tmp_path / "bob.properties"
    props.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.password={USERS['bob']}\n"
    )
    return props


def test_kcat_and_aiokafka_producers(broker: EmbeddedBroker) -> None:
    """librdkafka's kcat and aiokafka see the same decisions: alice writes, bob is refused with
    TOPIC_AUTHORIZATION_FAILED."""
    import asyncio
    import subprocess

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    topic = create_topic(broker, unique("kc"))
    grant(broker, acl(TOPIC, topic, "User:alice", A.WRITE))

    def kcat_as(user: str) -> subprocess.CompletedProcess[bytes]:
        settings = as_user(broker, user)
        argv = ["kcat", "-P", "-b", settings["bootstrap.servers"], "-t", topic, "-p", "0",
                "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
                "-X", f"sasl.username={user}", "-X", f"sasl.password={USERS[user]}",
                "-X", "message.timeout.ms=10000"]  # fmt: skip
        return subprocess.run(argv, input=b"from-kcat\n", capture_output=True, timeout=60, check=False)

    assert kcat_as("alice").returncode == 0
    refused = kcat_as("bob")
    assert b"Topic authorization failed" in refused.stderr, refused.stderr

    async def aio_send(user: str) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=addresses(broker)["SASL_PLAINTEXT"], security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=USERS[user],
            request_timeout_ms=10_000,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from-aiokafka", partition=0)
        finally:
            await producer.stop()

    asyncio.run(aio_send("alice"))
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(aio_send("bob"))
