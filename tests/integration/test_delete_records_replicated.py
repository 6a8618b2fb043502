"""DeleteRecords on a replicated topic (3 combined KRaft nodes, replication factor 3).

Kafka's semantics (``DelayedDeleteRecords``, ``Partition.lowWatermarkIfLeader``): the leader moves
its log start offset at once; followers learn it from their fetch responses and move theirs; the
request is answered once every live replica's log start offset reached the offset, with that low
watermark, else REQUEST_TIMED_OUT at the request's timeout (the leader has moved anyway, the
followers follow when they fetch again). So when confluent-kafka hears success, every replica has
deleted the records: a new leader elected right after starts at the same offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from pyspark_log.embedded_cluster import EmbeddedCluster
from tests.integration.cluster_harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

OVERRIDES = {
    # a killed leader is fenced (and replaced) after this; a follower paused for the 2 s of a
    # DeleteRecords timeout is still alive, so the leader waits for it
    "broker.session.timeout.ms": "15000",
    "replica.lag.time.max.ms": "60000",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path_factory.mktemp("delete-records-rf3"), combined=True, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


def make_topic(cluster: EmbeddedCluster, count: int) -> str:
    name = f"drr-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=30)[name].result(60)
    wait_for(lambda: set(cluster.partitions(name)[0].isr) == {4, 5, 6}, f"{name} with its whole ISR")
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 0})
    for i in range(count):
        producer.produce(name, value=f"v{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    return name


def earliest(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return (
        admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})[TopicPartition(topic, 0)]
        .result(30)
        .offset
    )


def test_success_means_every_replica_moved_its_start(cluster: EmbeddedCluster) -> None:
    topic = make_topic(cluster, 30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    futures = admin.delete_records([TopicPartition(topic, 0, 12)], operation_timeout=30)
    assert next(iter(futures.values())).result(60).low_watermark == 12

    leader = cluster.partitions(topic)[0].leader
    cluster.kill(leader)
    try:
        survivors = tuple(n for n in cluster.broker_ids if n != leader)
        new_leader = wait_for(
            lambda: (p := cluster.partitions(topic, via=survivors[0])[0]).leader in survivors and p.leader,
            "a new leader among the survivors",
        )
        assert earliest(cluster.address(new_leader), topic) == 12
    finally:
        cluster.restart(leader)
    wait_for(lambda: set(cluster.partitions(topic)[0].isr) == {4, 5, 6}, "the old leader back in the ISR")


def test_a_stuck_follower_times_the_request_out_and_catches_up_later(cluster: EmbeddedCluster) -> None:
    topic = make_topic(cluster, 20)
    part = cluster.partitions(topic)[0]
    follower = next(n for n in part.replicas if n != part.leader)
    cluster.pause(follower)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.address(part.leader)})
        futures = admin.delete_records([TopicPartition(topic, 0, 8)], operation_timeout=2, request_timeout=30)
        with pytest.raises(KafkaException) as info:
            next(iter(futures.values())).result(60)
        assert info.value.args[0].code() == 7  # REQUEST_TIMED_OUT
        assert earliest(cluster.address(part.leader), topic) == 8  # the leader moved regardless
    finally:
        cluster.resume(follower)
    # Once the follower fetches again it follows; a retry is then answered with the low watermark.
    admin = AdminClient({"bootstrap.servers": cluster.address(part.leader)})

    def answered() -> int | None:
        futures = admin.delete_records([TopicPartition(topic, 0, 8)], operation_timeout=5)
        try:
            return int(next(iter(futures.values())).result(30).low_watermark)
        except KafkaException:
            return None

    assert wait_for(answered, "the follower to follow the leader's log start") == 8
