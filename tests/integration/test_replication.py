"""Replication on a real cluster: 3 controllers + 3 brokers (``process.roles`` split), loopback.

Kafka documentation §4.7 "Replication" and Kafka documentation §3.3 "Producer Configs" (`acks`), as users meet them:
* "followers consume messages from the leader just as a normal Kafka consumer would and apply them
  to their own log": after acks=all produces from confluent-kafka and kafka-python, every
  replica's segment files hold the same bytes;
* "if a follower dies, gets stuck, or falls behind, the leader will remove it from the list of in
  sync replicas ... controlled by the replica.lag.time.max.ms configuration": a SIGSTOPped follower
  leaves the ISR, writes go on, and after SIGCONT it catches up and rejoins;
  ``pylog topics describe --under-replicated-partitions`` lists exactly the affected partitions;
* the `acks` entry of Kafka documentation §3.3 "Producer Configs" and §4.7 "Replication"'s min.insync.replicas
table: RF 3 with min.insync.replicas 2, one broker down → acks=all
  writes go on; two down → acks=all refused with NOT_ENOUGH_REPLICAS (seen by confluent-kafka),
  acks=1 accepted;
* "A message is considered committed when all in sync replicas for that partition have applied
  it": a consumer never gets an offset at or above the high watermark.

The tests share one cluster and run in file order; each waits for the ISR to be whole again
before it ends, so the next starts from a healthy cluster.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.integration.cluster_harness import consume, wait_for

LAG_MS = 4000
OVERRIDES = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "broker.session.timeout.ms": "120000",  # these tests see ISR changes by lag, not by fencing
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("replication"), overrides=OVERRIDES) as c:
        yield c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster: EmbeddedCluster, name: str, **kwargs: object) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(name, **kwargs)], operation_timeout=30)[name].result(timeout=60)
    wait_for(lambda: cluster.partitions(name), f"topic {name} in the metadata")


def wait_isr_whole(cluster: EmbeddedCluster, topic: str) -> None:
    def whole() -> bool:
        parts = cluster.partitions(topic)
        return bool(parts) and all(set(p.isr) == set(p.replicas) and p.leader >= 0 for p in parts.values())

    wait_for(whole, f"every replica of {topic} back in the ISR")


def wait_identical_replicas(cluster: EmbeddedCluster, topic: str) -> None:
    """Every replica's segment files hold the same bytes, and the topic holds some (polled:
    followers fetch on). A partition may stay empty: librdkafka's sticky partitioner may have sent
    every keyless record elsewhere."""

    def identical() -> bool:
        total = 0
        for index, part in cluster.partitions(topic).items():
            logs = {b: cluster.segment_bytes(b, topic, index) for b in part.replicas}
            if len(set(logs.values())) != 1:
                return False
            total += len(next(iter(logs.values())))
        return total > 0

    wait_for(identical, f"identical segment files on every replica of {topic}")


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    return [value for _, value in consume(bootstrap, topic, partitions, expected)]


def produce_confluent(bootstrap: str, topic: str, values: list[bytes], **config: object) -> list[KafkaError]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for value in values:
        producer.produce(topic, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return errors


def test_acks_all_from_confluent_and_kafka_python_leaves_identical_batches_on_every_replica(cluster):
    """§4.7: followers apply the leader's messages to their own log — byte for byte here."""
    topic = unique("rf3")
    create_topic(cluster, topic, num_partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    parts = cluster.partitions(topic)
    assert all(len(p.replicas) == 3 and set(p.isr) == set(p.replicas) for p in parts.values())
    assert sorted(p.leader for p in parts.values()) == [4, 5, 6]  # leadership spread over the brokers

    confluent_values = [f"c-{i}".encode() for i in range(3000)]
    assert produce_confluent(cluster.bootstrap(), topic, confluent_values, **{"enable.idempotence": True}) == []
    kp = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all", linger_ms=5)
    try:
        futures = [kp.send(topic, f"k-{i}".encode()) for i in range(1000)]
        kp.flush(60)
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    finally:
        kp.close()

    wait_identical_replicas(cluster, topic)
    got = consume_all(cluster.bootstrap(), topic, 3, 4000)
    assert sorted(got) == sorted(confluent_values + [f"k-{i}".encode() for i in range(1000)])


def _fetch(address: str, topic: str, partition: int) -> tuple[int, list[int]]:
    """A consumer's raw Fetch (v11) from offset 0: ``(high watermark, offsets returned)``."""
    from pyspark_log.records.batch import decode_batches

    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                     "partition_max_bytes": 1 << 20}]}],
    }  # fmt: skip
    part = request(address, ApiKey.FETCH, 11, body).responses[0].partitions[0]
    assert part.error_code == 0
    records = bytes(part.records or b"")
    offsets = [r.offset for _, batch in decode_batches(records) for r in batch] if records else []
    return part.high_watermark, offsets


def test_a_paused_follower_leaves_the_isr_writes_go_on_and_it_rejoins_after_catching_up(cluster):
    """§4.7: a stuck follower is removed from the ISR after replica.lag.time.max.ms; it rejoins once
    caught up. Broker 6 follows partitions 1 and 2 and leads none."""
    topic = unique("lag")
    create_topic(cluster, topic, num_partitions=3, replica_assignment=[[4, 5], [5, 6], [4, 6]])
    cluster.pause(6)
    try:
        # acks=1 records wait above the high watermark until the ISR drops broker 6; a follower at
        # the leader's end stays in sync however long it sleeps (Kafka's rule), so both get some
        producer = Producer({"bootstrap.servers": cluster.bootstrap((4, 5)), "acks": "1"})
        for i in range(20):
            producer.produce(topic, value=f"early-{i}".encode(), partition=2)
            producer.produce(topic, value=f"early-{i}".encode(), partition=1)
        assert producer.flush(30) == 0
        hw, offsets = _fetch(cluster.address(4), topic, 2)
        assert all(o < hw for o in offsets), "a consumer got a record at or above the high watermark"

        def shrunk() -> bool:
            parts = cluster.partitions(topic, via=4)
            return parts[1].isr == (5,) and parts[2].isr == (4,) and parts[0].isr == (4, 5)

        wait_for(shrunk, "broker 6 out of the ISR of partitions 1 and 2")
        hw, offsets = _fetch(cluster.address(4), topic, 2)
        assert hw == 20  # the ISR is the leader alone: everything is committed
        assert offsets == list(range(20))

        values = [f"v-{i}".encode() for i in range(300)]  # acks=all to all three partitions
        assert produce_confluent(cluster.bootstrap((4, 5)), topic, values) == []

        out = _pylog(cluster, "topics", "describe", topic, "--under-replicated-partitions")
        lines = [line for line in out.splitlines() if line.strip()]
        assert [line.split("Partition: ")[1].split("\t")[0] for line in lines] == ["1", "2"], out
        assert "Isr: 5" in lines[0]
        assert "Isr: 4" in lines[1]
    finally:
        cluster.resume(6)
    wait_isr_whole(cluster, topic)
    wait_identical_replicas(cluster, topic)
    assert _pylog(cluster, "topics", "describe", topic, "--under-replicated-partitions").strip() == ""


def test_min_insync_replicas_table_of_kafka_doc_4_7(cluster):
    """Kafka documentation §3.3 "Producer Configs" (`acks`): RF 3, min.insync.replicas 2 — one broker down:
    acks=all goes on; two down:
    acks=all is refused with NOT_ENOUGH_REPLICAS, acks=1 is accepted."""
    topic = unique("minisr")
    create_topic(cluster, topic, num_partitions=1, replica_assignment=[[4, 5, 6]], config={"min.insync.replicas": "2"})
    leader_only = cluster.bootstrap((4,))
    strict = {"retries": 0, "enable.idempotence": False, "message.timeout.ms": 20000}
    try:
        cluster.kill(5)
        # the acks=all write waits while broker 5 is still in the ISR, then completes once the leader
        # has dropped it (replica.lag.time.max.ms): with one broker down, writes go on
        assert produce_confluent(leader_only, topic, [b"one-down"], **strict) == []
        wait_for(lambda: cluster.partitions(topic, via=4)[0].isr == (4, 6), "broker 5 out of the ISR")

        out = _pylog(cluster, "topics", "describe", topic, "--at-min-isr-partitions", via=4)
        assert "Partition: 0" in out

        cluster.kill(6)
        # a follower at the leader's end is in sync however long it is gone (Kafka's rule): the
        # acks=1 write leaves broker 6 behind, and replica.lag.time.max.ms later it is out
        assert produce_confluent(leader_only, topic, [b"acks-1"], acks="1") == []
        wait_for(lambda: cluster.partitions(topic, via=4)[0].isr == (4,), "only the leader in the ISR")
        errors = produce_confluent(leader_only, topic, [b"two-down"], **strict)
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
        assert "Partition: 0" in _pylog(cluster, "topics", "describe", topic, "--under-min-isr-partitions", via=4)
    finally:
        for broker in (5, 6):
            if not cluster.nodes[broker].running:
                cluster.restart(broker)
    wait_isr_whole(cluster, topic)
    assert produce_confluent(cluster.bootstrap(), topic, [b"all-back"], **strict) == []
    wait_identical_replicas(cluster, topic)
    got = consume_all(cluster.bootstrap(), topic, 1, 3)
    assert got == [b"one-down", b"acks-1", b"all-back"]  # the refused record was never written


def _pylog(cluster: EmbeddedCluster, *args: str, via: int | None = None) -> str:
    bootstrap = cluster.address(via) if via is not None else cluster.bootstrap()
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(argv, capture_output=True, timeout=60, check=False, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_an_offset_commit_is_answered_once_every_isr_member_of_its_offsets_partition_has_it(cluster):
    """Kafka's offsets.commit.required.acks=-1: the commit is on every replica when the consumer
    hears back — read straight from the replicas' files, no wait."""
    from broker.coordinator.group.records import OFFSETS_TOPIC, partition_for

    topic = unique("commits")
    create_topic(cluster, topic, num_partitions=1, replication_factor=3)
    group = unique("group")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group, "enable.auto.commit": False})
    try:
        partition = partition_for(group, int(OVERRIDES["offsets.topic.num.partitions"]))
        for offset in (5, 9, 42):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            isr = cluster.partitions(OFFSETS_TOPIC)[partition].isr
            copies = {b: cluster.segment_bytes(b, OFFSETS_TOPIC, partition) for b in isr}
            assert len(set(copies.values())) == 1, f"commit {offset} answered before every ISR member had it"
        assert consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 42
    finally:
        consumer.close()


def test_a_txn_offset_commit_is_answered_once_every_isr_member_of_its_offsets_partition_has_it(cluster):
    """TxnOffsetCommit is written with acks=-1 too (Kafka's GroupMetadataManager): answered earlier,
    a failover could truncate it and its transaction commit without its offsets (the chaos
    transactions workload saw a committed transaction whose consumed offset was lost)."""
    from broker.coordinator.group.records import OFFSETS_TOPIC, partition_for

    topic = unique("txn-commits")
    create_topic(cluster, topic, num_partitions=1, replication_factor=3)
    group = unique("txn-group")
    partition = partition_for(group, int(OVERRIDES["offsets.topic.num.partitions"]))
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": unique("txn"), "log_level": 2})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group, "enable.auto.commit": False})
    try:
        producer.init_transactions(60)
        for offset in (5, 9, 42):
            producer.begin_transaction()
            producer.produce(topic, b"v", partition=0)
            offsets = [TopicPartition(topic, 0, offset)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
            isr = cluster.partitions(OFFSETS_TOPIC)[partition].isr
            copies = {b: cluster.segment_bytes(b, OFFSETS_TOPIC, partition) for b in isr}
            assert len(set(copies.values())) == 1, f"TxnOffsetCommit {offset} answered before every ISR member had it"
            producer.commit_transaction(60)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 42
    finally:
        consumer.close()
