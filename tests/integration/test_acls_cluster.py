"""Issue #15 ("ACLs stored in the metadata log, applied by every broker"): a 3-node KRaft cluster
(combined roles, a CONTROLLER listener, a PLAINTEXT listener for the cluster's own connections —
``User:ANONYMOUS``, a super user as Kafka documents — and a SASL_PLAINTEXT listener for users).
An ACL created through one broker is forwarded to the active controller, appended to the metadata
log and enforced by every broker: alice may write to every partition, whichever broker leads it,
bob to none, also after a node restarts and replays the metadata log; once the ACL is deleted
(through another broker) alice is refused everywhere. Produce with acks=all shows the followers'
fetches (CLUSTER_ACTION) still flow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)
USERS = {"alice": "alice-pw", "bob": "bob-pw"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
TOPIC = "acl-cluster"
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    c = EmbeddedCluster(Path(tmp_path_factory.mktemp("acl-cluster")), brokers=NODES, combined=True,
                        controller_listener=True, sasl_plain_jaas=JAAS, overrides=overrides)  # fmt: skip
    try:
        c.start()
        yield c
    finally:
        c.close()


def admin_via(cluster: EmbeddedCluster, node: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.address(node)})


def user_config(cluster: EmbeddedCluster, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": ",".join(cluster.sasl_address(n) for n in NODES),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
        "sasl.password": USERS[user], "acks": "all", "enable.idempotence": False, "message.timeout.ms": 10_000,
    }  # fmt: skip


def produce_codes(cluster: EmbeddedCluster, user: str) -> dict[int, int | None]:
    """Per partition, the error code of one record (None: written)."""
    codes: dict[int, int | None] = {}
    producer = Producer(user_config(cluster, user))
    for partition in range(len(NODES)):
        producer.produce(
            TOPIC,
            b"v",
            partition=partition,
            on_delivery=lambda err, msg, p=partition: codes.__setitem__(p, err.code() if err else None),
        )
    producer.flush(TIMEOUT_S)
    return codes


WRITE = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW)  # fmt: skip


def test_an_acl_made_through_one_broker_is_enforced_by_every_broker(cluster: EmbeddedCluster) -> None:
    admin = admin_via(cluster, 1)
    admin.create_topics([NewTopic(TOPIC, len(NODES), len(NODES))])[TOPIC].result(timeout=TIMEOUT_S)
    leaders = wait_until(
        lambda: {p.leader for p in cluster.partitions(TOPIC).values()} if len(cluster.partitions(TOPIC)) == 3 else None,
        "the topic's leaders",
        timeout_s=TIMEOUT_S,
    )
    assert leaders <= set(NODES)

    creator = admin_via(cluster, 2)  # a broker forwards CreateAcls to the active controller
    creator.create_acls([WRITE])[WRITE].result(timeout=TIMEOUT_S)
    every_partition_written = dict.fromkeys(range(len(NODES)))
    wait_until(
        lambda: produce_codes(cluster, "alice") == every_partition_written,
        "alice's writes to every partition",
        timeout_s=TIMEOUT_S,
    )
    refused = dict.fromkeys(range(len(NODES)), KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert produce_codes(cluster, "bob") == refused

    reader = admin_via(cluster, 3)  # referenced until its future is done
    described = reader.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)).result(timeout=TIMEOUT_S)  # fmt: skip
    assert described == [WRITE]

    cluster.restart(3)  # node 3 rebuilds its image (ACLs included) from the metadata log
    wait_until(
        lambda: produce_codes(cluster, "alice") == every_partition_written,
        "alice's writes after node 3's restart",
        timeout_s=TIMEOUT_S,
    )
    assert produce_codes(cluster, "bob") == refused

    remover = admin_via(cluster, 3)
    filters = [AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                                AclPermissionType.ANY)]  # fmt: skip
    assert list(remover.delete_acls(filters)[filters[0]].result(timeout=TIMEOUT_S)) == [WRITE]
    wait_until(
        lambda: produce_codes(cluster, "alice") == refused, "alice refused on every partition", timeout_s=TIMEOUT_S
    )
