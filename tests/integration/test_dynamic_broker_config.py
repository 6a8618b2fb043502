"""KIP-226 dynamic broker configs on a 3-node pylog cluster (combined KRaft nodes), driven by
confluent-kafka's AdminClient: IncrementalAlterConfigs of BROKER resources (one broker, and the
cluster-wide default ``""``), their effect on a running broker without a restart
(``message.max.bytes``: a produce larger than it gets MESSAGE_TOO_LARGE), Kafka's precedence
(per-broker > cluster default > static) in DescribeConfigs, persistence across a restart (the
values are ConfigRecords in the metadata log), and the refusal of a read-only key.
Kafka's own ``kafka-configs`` is exercised in tests/integration/test_kafka_tools_admin.py.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

WAIT_S = 120.0
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG = 2, 3, 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    root = Path(tmp_path_factory.mktemp("dynamic-broker-config"))
    # a static message.max.bytes, so the dynamic levels are seen winning over server.properties
    with EmbeddedCluster(root, combined=True, brokers=(1, 2, 3), overrides={"message.max.bytes": "500000"}) as c:
        yield c


def ask(cluster: EmbeddedCluster, api: ApiKey, body: dict[str, Any]) -> Any:
    """One request (version 1) to the first node that takes the connection."""
    for node in cluster.broker_ids:
        try:
            return request(cluster.address(node), api, 1, body)
        except OSError:
            continue
    raise AssertionError("no node answered")


def admin(cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap()})


def alter(cluster: EmbeddedCluster, broker: str, key: str, value: str | None) -> None:
    """confluent-kafka's incremental_alter_configs; for the cluster default (which its
    ConfigResource cannot name) the same request on the wire, as kafka-configs --entity-default."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    if broker == "":
        body = {
            "resources": [{"resource_type": 4, "resource_name": "",
                           "configs": [{"name": key, "config_operation": int(op.value), "value": value}]}],
            "validate_only": False,
        }  # fmt: skip
        answer = ask(cluster, ApiKey.INCREMENTAL_ALTER_CONFIGS, body).responses[0]
        assert answer.error_code == 0, answer.error_message
        return
    resource = ConfigResource(
        ResourceType.BROKER, broker, incremental_configs=[ConfigEntry(key, value or "", incremental_operation=op)]
    )
    client = admin(cluster)  # kept referenced until the answer (a collected client cancels it)
    client.incremental_alter_configs([resource])[resource].result(60)


def described(cluster: EmbeddedCluster, broker: str, key: str) -> tuple[str | None, int]:
    if broker == "":
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": [key]}]}
        answer = ask(cluster, ApiKey.DESCRIBE_CONFIGS, body).results[0]
        return next(((c.value, int(c.config_source)) for c in answer.configs), (None, -1))
    resource = ConfigResource(ResourceType.BROKER, broker)
    client = admin(cluster)
    entries = client.describe_configs([resource])[resource].result(60)
    entry = entries[key]
    return entry.value, int(entry.source)


def produce_error(cluster: EmbeddedCluster, topic: str, size: int) -> int | None:
    """Produce one record of ``size`` bytes; the broker's error code, None when accepted."""
    outcome: list[KafkaError | None] = []
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 0, "message.max.bytes": 2_000_000}
    )
    producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(60)
    assert outcome, "no delivery report"
    err = outcome[0]
    return None if err is None else int(err.code())


def make_topic(cluster: EmbeddedCluster) -> tuple[str, int]:
    """A one-partition RF 3 topic; its name and its leader's id."""
    topic = f"dynamic-{uuid.uuid4().hex[:8]}"
    client = admin(cluster)
    client.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    view = wait_until(lambda: cluster.partitions(topic).get(0), f"{topic} leader", timeout_s=WAIT_S)
    wait_until(lambda: len(cluster.partitions(topic)[0].isr) == 3, f"{topic} ISR", timeout_s=WAIT_S)
    return topic, int(view.leader)


def test_default_then_per_broker_message_max_bytes_live_and_after_restart(cluster: EmbeddedCluster) -> None:
    topic, leader = make_topic(cluster)
    other = next(n for n in (1, 2, 3) if n != leader)
    assert produce_error(cluster, topic, 20_000) is None
    assert described(cluster, str(leader), "message.max.bytes") == ("500000", STATIC_BROKER_CONFIG)

    # the cluster-wide default, lower than the record: every broker refuses it, no restart
    alter(cluster, "", "message.max.bytes", "10000")
    wait_until(
        lambda: produce_error(cluster, topic, 20_000) == KafkaError.MSG_SIZE_TOO_LARGE,
        "MESSAGE_TOO_LARGE",
        timeout_s=WAIT_S,
    )
    assert described(cluster, str(other), "message.max.bytes") == ("10000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert described(cluster, "", "message.max.bytes") == ("10000", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # the leader's own value wins over the default
    alter(cluster, str(leader), "message.max.bytes", "50000")
    wait_until(
        lambda: produce_error(cluster, topic, 20_000) is None,
        "the per-broker value accepting 20000 bytes",
        timeout_s=WAIT_S,
    )
    assert described(cluster, str(leader), "message.max.bytes") == ("50000", DYNAMIC_BROKER_CONFIG)
    assert described(cluster, str(other), "message.max.bytes") == ("10000", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # both levels are in the metadata log: a restarted leader still has them
    cluster.restart(leader)
    wait_until(
        lambda: described(cluster, str(leader), "message.max.bytes") == ("50000", DYNAMIC_BROKER_CONFIG),
        "the per-broker value after the restart",
        timeout_s=WAIT_S,
    )
    wait_until(lambda: len(cluster.partitions(topic)[0].isr) == 3, f"{topic} ISR after the restart", timeout_s=WAIT_S)
    wait_until(
        lambda: produce_error(cluster, topic, 60_000) == KafkaError.MSG_SIZE_TOO_LARGE,
        "60000 refused",
        timeout_s=WAIT_S,
    )

    # deleting both: back to the static value
    alter(cluster, str(leader), "message.max.bytes", None)
    alter(cluster, "", "message.max.bytes", None)
    wait_until(
        lambda: described(cluster, str(leader), "message.max.bytes") == ("500000", STATIC_BROKER_CONFIG),
        "the static value back",
        timeout_s=WAIT_S,
    )
    wait_until(lambda: produce_error(cluster, topic, 60_000) is None, "60000 accepted again", timeout_s=WAIT_S)


def test_read_only_key_refused_and_other_broker_id(cluster: EmbeddedCluster) -> None:
    resource = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    client = admin(cluster)
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([resource])[resource].result(60)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(num.partitions)" in error.str()
    assert described(cluster, "1", "num.partitions")[1] != DYNAMIC_BROKER_CONFIG


def pylog(cluster: EmbeddedCluster, *args: str) -> str:
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", cluster.bootstrap(), "configs", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pylog_configs_brokers(cluster: EmbeddedCluster) -> None:
    """``pylog configs --entity-type brokers``: per broker (sent to that broker) and the default."""
    out = pylog(
        cluster, "--alter", "--entity-type", "brokers", "--entity-name", "3", "--add-config", "log.cleaner.threads=2"
    )
    assert "Completed updating config for broker 3." in out
    out = pylog(
        cluster, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=5000000"
    )
    assert "Completed updating default config for brokers in the cluster." in out
    wait_until(
        lambda: described(cluster, "3", "log.cleaner.threads") == ("2", DYNAMIC_BROKER_CONFIG),
        "broker 3's value",
        timeout_s=WAIT_S,
    )
    out = pylog(cluster, "--describe", "--entity-type", "brokers", "--entity-name", "3")
    assert out.splitlines()[0] == "Dynamic configs for broker 3 are:"
    assert "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in out
    out = pylog(cluster, "--describe", "--entity-type", "brokers", "--entity-default")
    assert out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=5000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000000}",
    ]
    pylog(
        cluster, "--alter", "--entity-type", "brokers", "--entity-name", "3", "--delete-config", "log.cleaner.threads"
    )
    pylog(cluster, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms")
    wait_until(
        lambda: described(cluster, "3", "log.cleaner.threads")[1] != DYNAMIC_BROKER_CONFIG, "deleted", timeout_s=WAIT_S
    )


def answered_from(address: str, source_ip: str) -> bool:
    """Whether an ApiVersions v0 from ``source_ip`` is answered (False: the broker closed it)."""
    host, port = address.rsplit(":", 1)
    client_id = b"dynamic-test"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, int(port)), timeout=10, source_address=(source_ip, 0)) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            return len(sock.recv(4)) == 4
    except OSError:
        return False


def test_connection_limit_changes_live(cluster: EmbeddedCluster) -> None:
    """max.connections.per.ip.overrides at the cluster default: 127.0.0.2 may open no connection
    (the other clients and the brokers use 127.0.0.1), then the override is deleted."""
    address = cluster.address(2)
    assert answered_from(address, "127.0.0.2")
    alter(cluster, "", "max.connections.per.ip.overrides", "127.0.0.2:0")
    wait_until(lambda: not answered_from(address, "127.0.0.2"), "127.0.0.2 refused", timeout_s=WAIT_S)
    assert answered_from(address, "127.0.0.1")
    alter(cluster, "", "max.connections.per.ip.overrides", None)
    wait_until(lambda: answered_from(address, "127.0.0.2"), "127.0.0.2 answered again", timeout_s=WAIT_S)
