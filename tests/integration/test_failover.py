"""Failover on a real cluster of three ``broker,controller`` nodes, SIGKILLed for real.

Seed 000 §4.7: "the guarantee that Kafka offers is that a committed message will not be lost, as
long as there is at least one in sync replica alive, at all times", and "Replica Management": the
controller "detects broker-level failures and is responsible for changing the leader of all
affected partitions in a failed broker". A partition leader is SIGKILLed while an idempotent
confluent-kafka producer writes sequence-numbered records with acks=all: the controller fences it
after ``broker.session.timeout.ms``, moves leadership to an ISR member, the producer carries on,
and in the end every acknowledged record is there exactly once, in order, on every replica.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for

NODES = (1, 2, 3)
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


@pytest.fixture
def cluster(tmp_path) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path / "failover", brokers=NODES, combined=True, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_leader_sigkill_moves_leadership_to_the_isr_and_loses_no_acknowledged_record(cluster: EmbeddedCluster):
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    first = wait_for(lambda: cluster.partitions(topic).get(0), "the topic in the metadata")
    victim = first.leader
    survivors = tuple(n for n in NODES if n != victim)

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    acked: list[int] = []
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]

    sent = 0
    killed_at: float | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(acked) < 3000:
        if sent < 4000 and len(producer) < 200:
            producer.produce(topic, value=str(sent).encode(), partition=0, on_delivery=delivered)
            sent += 1
        producer.poll(0.001)
        if killed_at is None and len(acked) >= 1000:
            cluster.kill(victim)
            killed_at = time.monotonic()
    assert producer.flush(120) == 0
    assert killed_at is not None
    assert failed == []

    moved = cluster.partitions(topic, via=survivors[0])[0]
    assert moved.leader in survivors
    assert victim not in moved.isr
    assert moved.leader_epoch > first.leader_epoch

    cluster.restart(victim)
    wait_for(lambda: set(cluster.partitions(topic)[0].isr) == set(NODES), "the restarted broker back in the ISR")

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: list[int] = []
    try:

        def drained() -> bool:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    seen.append(int(msg.value()))
            return len(seen) >= len(acked)

        wait_for(drained, "every acknowledged record")
    finally:
        consumer.close()
    assert len(seen) == len(set(seen)), "a record was stored twice"
    assert seen == sorted(seen), "records out of order"
    assert set(acked) <= set(seen), f"{len(set(acked) - set(seen))} acknowledged records lost"

    def identical() -> bool:
        logs = {n: cluster.segment_bytes(n, topic, 0) for n in NODES}
        return len(set(logs.values())) == 1

    wait_for(identical, "identical segment files on the three replicas")
