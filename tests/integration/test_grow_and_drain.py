"""Issue #29's decommissioning scenario on a real KRaft cluster (one controller, brokers 1-3, loopback).

Under an idempotent acks=all confluent-kafka producer and a read_committed consumer:

1. a 4th broker is added (formatted with the cluster's id, ``EmbeddedCluster.add_broker``);
2. the RF-3 topic is rebalanced onto brokers 1-4 with ``pylog reassign-partitions --generate`` and
   ``--execute`` (Kafka's tool flow), ``--verify`` until every move completed;
3. broker 1 is drained (``--generate --broker-list 2,3,4``, ``--execute``, ``--verify``), stopped, and
   unregistered with ``pylog cluster unregister --id 1`` (UnregisterBroker, API 64): it leaves
   DescribeCluster, and a second unregister is refused with BROKER_ID_NOT_REGISTERED as Kafka does.

Then Kafka 4.1.1's ``kafka-cluster unregister`` works against the same cluster, with Kafka's output.

At the end: 0 acknowledged records lost, 0 duplicates read, and the replicas of every partition
hold identical segment bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.apache_kafka import KafkaUnavailable, kafka_tool
from tests.integration.cluster_harness import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 4
OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(
        tmp_path_factory.mktemp("grow"), controllers=(100,), brokers=(1, 2, 3), overrides=OVERRIDES
    ) as c:
        yield c


def pylog(cluster: EmbeddedCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", *args, "--bootstrap-server", cluster.bootstrap()]
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def registered(cluster: EmbeddedCluster) -> set[int]:
    body = {"include_cluster_authorized_operations": False}
    response = request(cluster.address(cluster.broker_ids[-1]), ApiKey.DESCRIBE_CLUSTER, 0, body)
    return {b.broker_id for b in response.brokers}


def move(cluster: EmbeddedCluster, tmp_path: Path, topic: str, brokers: str) -> dict[int, set[int]]:
    """--generate a placement of ``topic`` on ``brokers``, --execute it, --verify until completed;
    returns the placement."""
    topics_file = tmp_path / f"topics-{brokers}.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    done = pylog(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics_file),
                 "--broker-list", brokers)  # fmt: skip
    assert done.returncode == 0, done.stderr
    proposed = done.stdout.split("Proposed partition reassignment configuration")[1]
    plan = tmp_path / f"plan-{brokers}.json"
    plan.write_text(proposed)
    done = pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    assert done.returncode == 0, done.stderr

    def completed() -> bool:
        out = pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
        return out.returncode == 0 and out.stdout.count("is completed.") == PARTITIONS

    wait_for(completed, f"--verify reporting the moves onto {brokers} completed", timeout_s=120)
    return {p["partition"]: set(p["replicas"]) for p in json.loads(proposed)["partitions"]}


def test_grow_to_four_brokers_then_drain_and_unregister_broker_1(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=30)[topic].result(timeout=60)
    wait_for(lambda: len(cluster.partitions(topic)) == PARTITIONS, f"topic {topic} in the metadata")
    acked: list[bytes] = []
    stop = threading.Event()
    failures: list[str] = []

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )

        def delivered(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]

        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
        if producer.flush(120) != 0:
            failures.append("producer did not flush")

    seen: list[bytes] = []
    consuming = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{topic}", "enable.auto.commit": False,
             "isolation.level": "read_committed"}
        )  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        try:
            while not consuming.is_set():
                seen.extend(m.value() for m in consumer.consume(500, timeout=0.2) if m.error() is None)
        finally:
            consumer.close()

    producer_thread = threading.Thread(target=produce)
    consumer_thread = threading.Thread(target=consume)
    producer_thread.start()
    consumer_thread.start()
    try:
        wait_for(lambda: len(acked) > 300, "records acknowledged on three brokers")
        cluster.add_broker(4)
        wait_for(lambda: registered(cluster) == {1, 2, 3, 4}, "broker 4 registered")
        placement = move(cluster, tmp_path, topic, "1,2,3,4")
        assert any(4 in replicas for replicas in placement.values()), placement
        before = len(acked)
        wait_for(lambda: len(acked) > before + 200, "records acknowledged on four brokers")

        placement = move(cluster, tmp_path, topic, "2,3,4")
        assert all(replicas == {2, 3, 4} for replicas in placement.values()), placement
        view = cluster.partitions(topic, via=2)
        assert all(1 not in p.replicas and p.leader != 1 for p in view.values()), view
        cluster.stop(1)
        done = pylog(cluster, "cluster", "unregister", "--id", "1")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Broker 1 is no longer registered.\n"
        wait_for(lambda: registered(cluster) == {2, 3, 4}, "broker 1 gone from DescribeCluster")
        again = pylog(cluster, "cluster", "unregister", "--id", "1")
        assert again.returncode == 1
        assert "Broker ID 1 is not currently registered (BROKER_ID_NOT_REGISTERED)" in again.stderr
        before = len(acked)
        wait_for(lambda: len(acked) > before + 200, "records acknowledged after broker 1 left")
    finally:
        stop.set()
        producer_thread.join(150)
    assert not failures
    wanted = set(acked)
    try:
        wait_for(lambda: wanted <= set(seen), f"all {len(wanted)} acknowledged records read", timeout_s=120)
    finally:
        consuming.set()
        consumer_thread.join(30)
    assert len(seen) == len(set(seen)), "duplicates read"
    for p in range(PARTITIONS):
        wait_for(
            lambda p=p: len({cluster.segment_bytes(b, topic, p) for b in (2, 3, 4)}) == 1,
            f"identical replicas of {topic}-{p}",
        )


def test_kafka_cluster_unregister_and_a_live_broker_registers_again(cluster: EmbeddedCluster) -> None:
    """Kafka 4.1.1's own ``kafka-cluster unregister`` against pylog prints what it prints against
    Kafka; as in Kafka, a live broker can be unregistered, and it registers again (its next
    heartbeat is refused with STALE_BROKER_EPOCH)."""
    try:
        done = kafka_tool("kafka-cluster", "unregister", "--id", "3", "--bootstrap-server", cluster.bootstrap())
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Broker 3 is no longer registered."
    wait_for(lambda: 3 in registered(cluster), "live broker 3 registered again")
    done = kafka_tool("kafka-cluster", "unregister", "--id", "99", "--bootstrap-server", cluster.bootstrap())
    assert done.returncode == 1
    assert "BrokerIdNotRegisteredException: Broker ID 99 is not currently registered" in done.stderr
