"""Issue #15 (inter-node security, SASL): a 3-node KRaft cluster whose inter-broker listener is
SASL_PLAINTEXT with the brokers logging in by SCRAM-SHA-512 (``sasl.mechanism.inter.broker.protocol``,
``listener.name.<listener>.scram-sha-512.sasl.jaas.config``) and whose controller listener is
SASL_PLAINTEXT with PLAIN. The brokers' SCRAM user is created after start-up through the cluster
(an admin logged in with PLAIN); from then on the followers replicate (acks=all, RF 3) and the
transaction coordinator writes its markers to the other brokers over SCRAM logins, which a
read_committed consumer proves by seeing the committed transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.compat import confluent_consume, confluent_produce, numbered_records
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)
DEADLINE_S = 90.0
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"
ADMIN = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": "admin-secret",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    overrides = {
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} user_admin="admin-secret";',
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
            f'{SCRAM} username="broker" password="broker-secret";'
        ),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": (
            f'{PLAIN} username="controller" password="controller-secret" user_controller="controller-secret";'
        ),
        "default.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
    }
    c = EmbeddedCluster(
        Path(tmp_path_factory.mktemp("internode-sasl")), brokers=NODES, combined=True, controller_listener=True,
        overrides=overrides, client_protocol="SASL_PLAINTEXT", controller_protocol="SASL_PLAINTEXT",
    )  # fmt: skip
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_brokers_replicate_and_write_transaction_markers_over_scram(cluster: EmbeddedCluster) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **ADMIN})
    user = UserScramCredentialUpsertion(
        "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret"
    )
    admin.alter_user_scram_credentials([user])["broker"].result(60)
    futures = admin.create_topics([NewTopic("sasl-rf3", 3, 3, config={"min.insync.replicas": "2"})], request_timeout=60)
    futures["sasl-rf3"].result(90)

    def isr_complete() -> bool:  # Metadata through a logged-in admin (the listener is SASL)
        topic = admin.list_topics("sasl-rf3", timeout=20).topics["sasl-rf3"]
        return len(topic.partitions) == 3 and all(len(p.isrs) == 3 for p in topic.partitions.values())

    wait_until(
        isr_complete, "three in-sync replicas of every partition (followers log in by SCRAM)", timeout_s=DEADLINE_S
    )
    records = numbered_records("scram", 0, 60)
    assert len(confluent_produce(cluster.bootstrap(), "sasl-rf3", records, acks=-1, **ADMIN)) == 60

    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "internode-txn", **ADMIN})
    producer.init_transactions(60)
    producer.begin_transaction()
    committed = [b"txn-%d" % i for i in range(30)]
    for i, value in enumerate(committed):
        producer.produce("sasl-rf3", value=value, partition=i % 3)
    producer.commit_transaction(60)  # markers for partitions led elsewhere go out over SCRAM logins

    got = confluent_consume(
        cluster.bootstrap(), "sasl-rf3", 90, partitions=(0, 1, 2), **ADMIN, **{"isolation.level": "read_committed"}
    )
    values = [g.value for g in got]
    assert sorted(v for v in values if v.startswith(b"txn-")) == sorted(committed)
    assert len(values) == 90
