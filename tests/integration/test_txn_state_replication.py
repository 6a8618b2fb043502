"""A commit is acknowledged only once the coordinator's ``__transaction_state`` record is replicated.

Three combined nodes; ``__transaction_state`` has one partition, replication factor 3 and
``min.insync.replicas`` 2. A confluent-kafka transactional producer writes to a partition whose
only replica is the coordinator's node, then both other nodes are paused (SIGSTOP): the
coordinator's PrepareCommit can be appended to its own log but reaches no follower, so
``commit_transaction`` must not succeed (Kafka answers EndTxn after the acks=all append; pylog
once answered after the leader's append alone, which a chaos run showed could lose a commit in a
failover). Once the nodes resume, the retried commit succeeds and read_committed sees the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.waiting import wait_until

from .groups_helpers import unique

NODES = (1, 2, 3)
OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "request.timeout.ms": "2000",  # the coordinator's wait for its ISR
    "replica.lag.time.max.ms": "600000",  # the paused followers stay in the ISR: the wait times out
    "broker.session.timeout.ms": "600000",
}
RECORDS = 5


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path / "txn-state", brokers=NODES, combined=True, overrides=OVERRIDES) as c:
        yield c


def coordinator_of(cluster: EmbeddedCluster, transactional_id: str) -> int | None:
    try:
        found = request(cluster.address(1), ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
    except OSError:
        return None
    return found.node_id if found.error_code == 0 else None


def state_isr(cluster: EmbeddedCluster) -> int:
    part = cluster.partitions("__transaction_state").get(0)
    return 0 if part is None else len(part.isr)


def test_commit_waits_for_the_transaction_state_replicas(cluster: EmbeddedCluster) -> None:
    bootstrap = cluster.bootstrap()
    tid, topic = unique("txn-state"), unique("txn-data")
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 600000, "linger.ms": 0}
    )
    producer.init_transactions(60)
    wait_until(lambda: state_isr(cluster) == 3, what="__transaction_state-0 with all three replicas in its ISR")
    leader = coordinator_of(cluster, tid)
    assert leader in NODES
    followers = [n for n in NODES if n != leader]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader]])])[topic].result(60)
    wait_until(lambda: cluster.partitions(topic).get(0) is not None, what=f"{topic} in the metadata")

    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    paused: list[int] = []
    try:
        for node in followers:
            cluster.pause(node)
            paused.append(node)
        with pytest.raises(KafkaException) as refused:
            producer.commit_transaction(8)  # several EndTxn attempts, each waiting request.timeout.ms
        assert refused.value.args[0].retriable(), refused.value
    finally:
        for node in paused:
            cluster.resume(node)
    producer.commit_transaction(120)  # librdkafka retries the commit; the ISR has it now

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: list[bytes] = []
    try:
        consumer.subscribe([topic])

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
            return len(seen) >= RECORDS

        wait_until(read_all, what="the committed records under read_committed")
    finally:
        consumer.close()
    assert seen == [f"v{i}".encode() for i in range(RECORDS)]
