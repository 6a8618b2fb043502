"""Issue #26, "Kafka's own tools against pylog": Apache Kafka 4.1's administration and client tools,
unchanged, against a 3-node pylog cluster with the authorizer on (the tools connect as
``User:ANONYMOUS`` over PLAINTEXT, a super user as Kafka's documentation sets up a cluster's own
principal); their output is parsed and checked against what the cluster serves.

This module: ``kafka-configs`` (topic configs, dynamic broker configs of one broker and the cluster
default — KIP-226 —, client quotas, SCRAM credentials), ``kafka-acls`` (add, list,
remove), ``kafka-transactions`` (list, describe, describe-producers, find-hanging, abort),
``kafka-producer-perf-test``/``kafka-consumer-perf-test`` and
``kafka-verifiable-producer``/``kafka-verifiable-consumer`` (the clients Kafka's system tests use).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.kafka_tools_helpers import (
    NODES,
    json_lines,
    parse_tabbed,
    run,
    tools_cluster,
    wait_until,
    write_outside_transaction,
)
from tests.killed_producer import TXN_TIMEOUT_MS, leave_open_transaction

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    # the SASL_PLAINTEXT listener: SCRAM users made by kafka-configs log in there
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
}
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_nobody="unused-pw";'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """PLAINTEXT (the tools, ``User:ANONYMOUS``), CONTROLLER and SASL_PLAINTEXT listeners."""
    root = Path(tmp_path_factory.mktemp("kafka-tools-admin"))
    with tools_cluster(root, AUTHORIZER, controller_listener=True, sasl_plain_jaas=PLAIN_JAAS) as c:
        yield c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster: EmbeddedCluster, topic: str, partitions: int) -> None:
    run("kafka-topics", "--bootstrap-server", cluster.bootstrap(), "--create", "--topic", topic,
        "--partitions", str(partitions), "--replication-factor", "3")  # fmt: skip

    def ready() -> bool:
        views = cluster.partitions(topic)
        return len(views) == partitions and all(len(v.isr) == len(NODES) for v in views.values())

    wait_until(ready, f"{topic} with full ISRs")


def configs(cluster: EmbeddedCluster, *entity: str) -> dict[str, str]:
    """``kafka-configs --describe``'s ``  key=value sensitive=... synonyms={...}`` lines."""
    done = run("kafka-configs", "--bootstrap-server", cluster.bootstrap(), "--describe", *entity)
    found = {}
    for line in done.stdout.splitlines():
        match = re.fullmatch(r"\s+([^=\s]+)=(.*) sensitive=(?:true|false) synonyms=\{.*\}", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def alter(cluster: EmbeddedCluster, *args: str, ok: bool = True) -> str:
    done = run("kafka-configs", "--bootstrap-server", cluster.bootstrap(), "--alter", *args, ok=ok)
    return done.stdout + done.stderr


def test_configs_topic_broker(cluster: EmbeddedCluster) -> None:
    topic = unique("tools-configs")
    create_topic(cluster, topic, 1)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    out = alter(
        cluster, *entity, "--add-config", "retention.ms=7200000,max.message.bytes=300000,cleanup.policy=compact"
    )
    assert f"Completed updating config for topic {topic}." in out
    assert configs(cluster, *entity) == {
        "retention.ms": "7200000", "max.message.bytes": "300000", "cleanup.policy": "compact",
    }  # fmt: skip
    # the cluster serves the same (DescribeConfigs through another client)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["retention.ms"].value == "7200000"
    assert entries["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG

    bad = alter(cluster, *entity, "--add-config", "retention.ms=abc", ok=False)
    assert "InvalidConfigurationException" in bad
    unknown = alter(cluster, *entity, "--add-config", "no.such.config=1", ok=False)
    assert "InvalidConfigurationException" in unknown
    alter(cluster, *entity, "--delete-config", "max.message.bytes,cleanup.policy")
    assert configs(cluster, *entity) == {"retention.ms": "7200000"}

    # broker configs (KIP-226): none dynamic at first; --all lists the static ones
    broker = ("--entity-type", "brokers", "--entity-name", "2")
    assert configs(cluster, *broker) == {}
    every = configs(cluster, *broker, "--all")
    assert every["node.id"] == "2"
    assert every["controller.quorum.voters"] == cluster.voters
    assert every["process.roles"] == "broker,controller"
    assert f"PLAINTEXT://{cluster.address(2)}" in every["advertised.listeners"].split(",")
    assert every["group.initial.rebalance.delay.ms"] == "0"  # the cluster's override, not Kafka's 3000
    # a dynamic key on broker 2 and as the cluster-wide default (stored by the controller)
    out = alter(cluster, *broker, "--add-config", "log.cleaner.threads=2")
    assert "Completed updating config for broker 2." in out
    assert configs(cluster, *broker) == {"log.cleaner.threads": "2"}
    default = ("--entity-type", "brokers", "--entity-default")
    out = alter(cluster, *default, "--add-config", "log.retention.ms=86400000")
    assert "Completed updating default config for brokers in the cluster." in out
    assert configs(cluster, *default) == {"log.retention.ms": "86400000"}
    assert configs(cluster, *broker, "--all")["log.retention.ms"] == "86400000"
    # a read-only key: Kafka's refusal
    refused = alter(cluster, *broker, "--add-config", "num.partitions=3", ok=False)
    assert "InvalidRequestException: Cannot update these configs dynamically: Set(num.partitions)" in refused
    alter(cluster, *broker, "--delete-config", "log.cleaner.threads")
    alter(cluster, *default, "--delete-config", "log.retention.ms")
    assert configs(cluster, *broker) == {}
    assert configs(cluster, *default) == {}


def quota_line(cluster: EmbeddedCluster, *entity: str) -> dict[str, str]:
    """``Quota configs for ... are k=v, k=v``: the key/value pairs."""
    done = run("kafka-configs", "--bootstrap-server", cluster.bootstrap(), "--describe", *entity)
    pairs: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if " are " in line:
            for item in line.split(" are ", 1)[1].split(", "):
                key, _, value = item.partition("=")
                pairs[key.strip()] = value.strip()
    return pairs


def test_configs_client_quotas_and_scram_users(cluster: EmbeddedCluster) -> None:
    user, client, scram_user = unique("quota-user"), unique("quota-client"), unique("scram-user")
    users = ("--entity-type", "users", "--entity-name", user)
    clients = ("--entity-type", "clients", "--entity-name", client)
    assert f"Completed updating config for user {user}." in alter(
        cluster, *users, "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"
    )
    assert f"Completed updating config for client {client}." in alter(
        cluster, *clients, "--add-config", "producer_byte_rate=1024"
    )
    alter(cluster, *users, *clients, "--add-config", "request_percentage=50")
    assert quota_line(cluster, *users) == {"consumer_byte_rate": "2097152.0", "producer_byte_rate": "1048576.0"}
    assert quota_line(cluster, *clients) == {"producer_byte_rate": "1024.0"}
    assert quota_line(cluster, *users, *clients) == {"request_percentage": "50.0"}
    alter(cluster, *users, "--delete-config", "producer_byte_rate")
    assert quota_line(cluster, *users) == {"consumer_byte_rate": "2097152.0"}

    # SCRAM credentials (KIP-554): the tool hashes nothing, the broker salts and stores them
    scram = ("--entity-type", "users", "--entity-name", scram_user)
    alter(
        cluster,
        *scram,
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=pw-256],SCRAM-SHA-512=[password=pw-512]",
    )
    described = run("kafka-configs", "--bootstrap-server", cluster.bootstrap(), "--describe", *scram).stdout
    assert f"SCRAM credential configs for user-principal '{scram_user}' are " in described
    assert "SCRAM-SHA-256=iterations=8192" in described
    assert "SCRAM-SHA-512=iterations=4096" in described  # Kafka's default iteration count
    alter(cluster, *scram, "--delete-config", "SCRAM-SHA-512")
    described = run("kafka-configs", "--bootstrap-server", cluster.bootstrap(), "--describe", *scram).stdout
    assert "SCRAM-SHA-256=iterations=8192" in described
    assert "SCRAM-SHA-512" not in described
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    credentials = admin.describe_user_scram_credentials([scram_user])[scram_user].result(30)
    assert [(str(c.mechanism), c.iterations) for c in credentials.scram_credential_infos] == [
        ("ScramMechanism.SCRAM_SHA_256", 8192)
    ]


def acl_listing(stdout: str) -> dict[str, set[tuple[str, str, str]]]:
    """``kafka-acls --list``: resource pattern -> {(principal, operation, permission)}."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    resource = ""
    for line in stdout.splitlines():
        head = re.search(r"ResourcePattern\((.*)\)`", line)
        if head:
            resource = head.group(1)
            out.setdefault(resource, set())
            continue
        entry = re.search(r"\(principal=(.*?), host=\*, operation=(\w+), permissionType=(\w+)\)", line)
        if entry and resource:
            out[resource].add((entry.group(1), entry.group(2), entry.group(3)))
    return out


def test_acls_add_list_remove(cluster: EmbeddedCluster) -> None:
    topic, prefix = unique("tools-acl"), unique("app")
    acls = ("kafka-acls", "--bootstrap-server", cluster.bootstrap())
    added = run(*acls, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
                "--topic", topic)  # fmt: skip
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" in (
        added.stdout
    )
    run(*acls, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", prefix,
        "--resource-pattern-type", "prefixed")  # fmt: skip
    run(*acls, "--add", "--producer", "--topic", topic, "--allow-principal", "User:carol")
    topic_pattern = f"resourceType=TOPIC, name={topic}, patternType=LITERAL"
    group_pattern = f"resourceType=GROUP, name={prefix}, patternType=PREFIXED"
    listed = acl_listing(run(*acls, "--list").stdout)
    assert listed[topic_pattern] == {
        ("User:alice", "READ", "ALLOW"), ("User:alice", "WRITE", "ALLOW"),
        ("User:carol", "WRITE", "ALLOW"), ("User:carol", "DESCRIBE", "ALLOW"), ("User:carol", "CREATE", "ALLOW"),
    }  # fmt: skip
    assert listed[group_pattern] == {("User:bob", "READ", "ALLOW")}
    assert set(acl_listing(run(*acls, "--list", "--topic", topic).stdout)) == {topic_pattern}

    run(*acls, "--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic, "--force")
    run(*acls, "--remove", "--group", prefix, "--resource-pattern-type", "prefixed", "--force")
    listed = acl_listing(run(*acls, "--list", "--principal", "User:alice").stdout)
    assert listed == {topic_pattern: {("User:alice", "READ", "ALLOW")}}
    assert group_pattern not in acl_listing(run(*acls, "--list").stdout)


def transactions(cluster: EmbeddedCluster, *args: str) -> list[dict[str, str]]:
    return parse_tabbed(run("kafka-transactions", "--bootstrap-server", cluster.bootstrap(), *args).stdout)


def test_transactions_list_describe_find_hanging_abort(cluster: EmbeddedCluster) -> None:
    """A transaction left open by a SIGKILLed producer is listed and described; find-hanging
    (Kafka's definition: an open transaction its coordinator does not know of) lists it only when
    it is hanging: not this one, whose coordinator has it Ongoing, but one written without
    AddPartitionsToTxn, which pylog's produce path accepts (it does not verify, KIP-890); the
    tool's abort writes the ABORT marker for either."""
    topic, txn_id, raw_id = unique("tools-txn"), unique("killed"), unique("raw")
    create_topic(cluster, topic, 2)
    leave_open_transaction(cluster.bootstrap(), topic, txn_id, 3)

    listed = [row for row in transactions(cluster, "list") if row["TransactionalId"] == txn_id]
    assert len(listed) == 1
    assert listed[0]["TransactionState"] == "Ongoing"
    producer_id = listed[0]["ProducerId"]
    (described,) = transactions(cluster, "describe", "--transactional-id", txn_id)
    assert (described["ProducerId"], described["TransactionState"]) == (producer_id, "Ongoing")
    assert described["TopicPartitions"] == f"{topic}-0"
    assert described["TransactionTimeoutMs"] == str(TXN_TIMEOUT_MS)
    assert int(described["CoordinatorId"]) in NODES
    producers = transactions(cluster, "describe-producers", "--topic", topic, "--partition", "0")
    assert [(p["ProducerId"], p["CurrentTransactionStartOffset"]) for p in producers] == [(producer_id, "0")]
    # the coordinator knows it (Ongoing, with this partition): not hanging
    assert transactions(cluster, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []

    # transactional records the coordinator never heard of: a hanging transaction (KIP-664)
    raw_producer = write_outside_transaction(cluster, topic, 1, raw_id)
    hanging = wait_until(
        lambda: transactions(cluster, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"),
        "find-hanging to list the transaction its coordinator does not know",
    )
    assert [(h["Topic"], h["Partition"], h["ProducerId"], h["StartOffset"]) for h in hanging] == [
        (topic, "1", str(raw_producer), "0")
    ]
    leader = cluster.partitions(topic)[1].leader
    by_broker = transactions(cluster, "find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "0")
    assert [h["ProducerId"] for h in by_broker if h["Topic"] == topic] == [str(raw_producer)]

    for partition in ("0", "1"):
        run("kafka-transactions", "--bootstrap-server", cluster.bootstrap(), "abort", "--topic", topic,
            "--partition", partition, "--start-offset", "0")  # fmt: skip
        producers = transactions(cluster, "describe-producers", "--topic", topic, "--partition", partition)
        assert {p["CurrentTransactionStartOffset"] for p in producers} == {"None"}
    assert transactions(cluster, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    # read_committed readers move past both: the last stable offset is the log end again
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    for partition in (0, 1):
        tp = TopicPartition(topic, partition)
        committed = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
        latest = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED)
        assert committed[tp].result(30).offset == latest[tp].result(30).offset > 0


def test_perf_and_verifiable_clients(cluster: EmbeddedCluster) -> None:
    topic, verified = unique("tools-perf"), unique("tools-verifiable")
    bootstrap = cluster.bootstrap()
    create_topic(cluster, topic, 3)
    done = run("kafka-producer-perf-test", "--topic", topic, "--num-records", "20000", "--throughput", "-1",
               "--record-size", "100", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all")  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1]
    assert re.match(r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", summary)
    done = run("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "20000",
               "--timeout", "60000")  # fmt: skip
    header, values = done.stdout.strip().splitlines()[-2:]
    stats = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=True))
    assert stats["data.consumed.in.nMsg"] == "20000"
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(20000 * 100 / 1024 / 1024, rel=1e-3)

    create_topic(cluster, verified, 3)
    done = run("kafka-verifiable-producer", "--bootstrap-server", bootstrap, "--topic", verified,
               "--max-messages", "300", "--acks", "-1")  # fmt: skip
    events = json_lines(done.stdout)
    sent = [e for e in events if e["name"] == "producer_send_success"]
    assert not [e for e in events if e["name"] == "producer_send_error"]
    (tool_data,) = [e for e in events if e["name"] == "tool_data"]
    assert (tool_data["sent"], tool_data["acked"]) == (300, 300)
    assert sorted(int(e["value"]) for e in sent) == list(range(300))
    acked = {(e["partition"], e["offset"]) for e in sent}
    assert len(acked) == 300  # every record at its own offset

    done = run("kafka-verifiable-consumer", "--bootstrap-server", bootstrap, "--topic", verified,
               "--group-id", unique("verifiable"), "--max-messages", "300", "--reset-policy", "earliest")  # fmt: skip
    events = json_lines(done.stdout)
    consumed = [e for e in events if e["name"] == "records_consumed"]
    read = {(p["partition"], offset) for e in consumed for p in e["partitions"]
            for offset in range(p["minOffset"], p["maxOffset"] + 1)}  # fmt: skip
    assert sum(e["count"] for e in consumed) == 300
    assert read == acked  # the consumer read exactly what the producer had acknowledged
    committed = [e for e in events if e["name"] == "offsets_committed"]
    assert committed
    assert all(e["success"] for e in committed)
    last = {o["partition"]: o["offset"] for e in committed for o in e["offsets"]}
    ends: dict[int, int] = {}
    for partition, offset in acked:
        ends[partition] = max(ends.get(partition, -1), offset + 1)
    assert last == ends
    assert events[-1]["name"] == "shutdown_complete"


def test_scram_user_and_acls_made_by_the_tools_are_enforced(cluster: EmbeddedCluster) -> None:
    """kafka-configs' SCRAM credentials (salted and hashed by the tool) let the user log in over
    SASL_PLAINTEXT, and kafka-acls' ``--producer`` ACL lets them write, to that topic only."""
    user, allowed, denied = unique("writer"), unique("tools-allowed"), unique("tools-denied")
    create_topic(cluster, allowed, 1)
    create_topic(cluster, denied, 1)
    alter(cluster, "--entity-type", "users", "--entity-name", user, "--add-config", "SCRAM-SHA-512=[password=w-pw]")
    run("kafka-acls", "--bootstrap-server", cluster.bootstrap(), "--add", "--producer", "--topic", allowed,
        "--allow-principal", f"User:{user}")  # fmt: skip
    config = {
        "bootstrap.servers": ",".join(cluster.sasl_address(n) for n in NODES), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": "w-pw",
        "enable.idempotence": False, "acks": "all", "message.timeout.ms": 60_000,
    }  # fmt: skip
    outcomes: dict[str, object] = {}
    producer = Producer(config)
    for topic in (allowed, denied):
        producer.produce(topic, b"v", on_delivery=lambda err, msg: outcomes.__setitem__(msg.topic(), err))
    assert producer.flush(90) == 0
    assert outcomes[allowed] is None
    assert outcomes[denied].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
