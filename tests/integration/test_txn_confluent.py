"""Transactions with confluent-kafka (librdkafka) against a real broker process (Kafka documentation §4.6
"Message Delivery Semantics":
either all of the messages are written or none is; Kafka documentation §4.6 "Message Delivery Semantics",
transactions; KIP-98): a committed transaction is visible to read_committed consumers, an
aborted one only to read_uncommitted ones, a second producer with the same transactional.id fences
the first, consumed offsets commit inside the transaction, an abandoned transaction is aborted
after its timeout, and the coordinator's state survives a broker restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

OVERRIDES = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}
WAIT_S = 60.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("txn-confluent"), overrides=OVERRIDES) as broker:
        yield broker.bootstrap_servers


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def txn_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, *, settle_s: float = 1.0) -> list[bytes]:
    """Every value of ``topic`` a fresh consumer with ``isolation`` reads: until ``expected`` came
    and nothing more arrives for ``settle_s``, or the wait runs out."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = Deadline(WAIT_S)
    quiet_since = None
    try:
        while not deadline.expired():
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
                quiet_since = None
                continue
            if len(got) >= expected:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle_s:
                    break
    finally:
        consumer.close()
    return got


def test_committed_visible_aborted_not(bootstrap: str) -> None:
    topic = unique("commit-abort")
    create_topic(bootstrap, topic)
    producer = txn_producer(bootstrap, unique("tx"))
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"c%d" % i, partition=i % 2)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"a%d" % i, partition=i % 2)
    producer.flush(WAIT_S)  # the aborted records are in the log, not only in the client's queue
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"after", partition=0)
    producer.commit_transaction(WAIT_S)

    committed = {b"c%d" % i for i in range(10)} | {b"after"}
    aborted = {b"a%d" % i for i in range(5)}
    read_committed = read_all(bootstrap, topic, "read_committed", 11)
    assert sorted(read_committed) == sorted(committed)
    read_uncommitted = read_all(bootstrap, topic, "read_uncommitted", 16)
    assert sorted(read_uncommitted) == sorted(committed | aborted)


def test_open_transaction_is_invisible_until_commit(bootstrap: str) -> None:
    topic = unique("open")
    create_topic(bootstrap, topic, 1)
    producer = txn_producer(bootstrap, unique("tx"))
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"pending")
    producer.flush(WAIT_S)
    assert read_all(bootstrap, topic, "read_committed", 0, settle_s=1.5) == []
    producer.commit_transaction(WAIT_S)
    assert read_all(bootstrap, topic, "read_committed", 1) == [b"pending"]


def test_zombie_is_fenced(bootstrap: str) -> None:
    topic, txn_id = unique("zombie"), unique("tx")
    create_topic(bootstrap, topic)
    zombie = txn_producer(bootstrap, txn_id)
    zombie.init_transactions(WAIT_S)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(WAIT_S)
    successor = txn_producer(bootstrap, txn_id)
    successor.init_transactions(WAIT_S)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=1)
    successor.commit_transaction(WAIT_S)
    zombie.produce(topic, value=b"late", partition=0)
    with pytest.raises(KafkaException) as err:
        zombie.commit_transaction(WAIT_S)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower()
    assert read_all(bootstrap, topic, "read_committed", 1) == [b"successor"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(bootstrap: str) -> None:
    source, sink, group = unique("src"), unique("sink"), unique("g")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        plain.produce(source, value=b"%d" % i)
    plain.flush(WAIT_S)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = txn_producer(bootstrap, unique("tx"))
    producer.init_transactions(WAIT_S)

    def process(count: int, *, commit: bool) -> None:
        batch: list = []
        deadline = Deadline(WAIT_S)
        while len(batch) < count and not deadline.expired():
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                batch.append(msg)
        assert len(batch) == count
        producer.begin_transaction()
        for msg in batch:
            producer.produce(sink, value=b"x" + msg.value())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), WAIT_S
        )
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.flush(WAIT_S)
            producer.abort_transaction(WAIT_S)

    try:
        process(3, commit=True)
        committed = consumer.committed([TopicPartition(source, 0)], WAIT_S)
        assert committed[0].offset == 3
        process(3, commit=False)  # aborted: the group's position stays at 3
        committed = consumer.committed([TopicPartition(source, 0)], WAIT_S)
        assert committed[0].offset == 3
    finally:
        consumer.close()
    assert sorted(read_all(bootstrap, sink, "read_committed", 3)) == [b"x0", b"x1", b"x2"]


def test_abandoned_transaction_times_out(bootstrap: str) -> None:
    topic = unique("timeout")
    create_topic(bootstrap, topic, 1)
    abandoned = txn_producer(bootstrap, unique("tx"), **{"transaction.timeout.ms": 1500})
    abandoned.init_transactions(WAIT_S)
    abandoned.begin_transaction()
    abandoned.produce(topic, value=b"abandoned")
    abandoned.flush(WAIT_S)
    # no commit: the coordinator aborts it after 1.5 s, so read_committed readers get past it
    follower = Producer({"bootstrap.servers": bootstrap})
    follower.produce(topic, value=b"plain")
    follower.flush(WAIT_S)
    assert read_all(bootstrap, topic, "read_committed", 1) == [b"plain"]
    assert sorted(read_all(bootstrap, topic, "read_uncommitted", 2)) == [b"abandoned", b"plain"]


def test_restart_keeps_the_coordinator_state(tmp_path: Path) -> None:
    txn_id = unique("tx")
    with EmbeddedBroker(tmp_path / "broker", overrides=OVERRIDES) as broker:
        topic = unique("restart")
        create_topic(broker.bootstrap_servers, topic, 1)
        first = txn_producer(broker.bootstrap_servers, txn_id)
        first.init_transactions(WAIT_S)
        first.begin_transaction()
        first.produce(topic, value=b"committed")
        first.commit_transaction(WAIT_S)
        first.begin_transaction()
        first.produce(topic, value=b"open")
        first.flush(WAIT_S)
        broker.restart()
        # the restarted coordinator knows the id and its open transaction: a new instance fences
        # it (the open transaction is aborted) and carries on
        second = txn_producer(broker.bootstrap_servers, txn_id)
        second.init_transactions(WAIT_S)
        second.begin_transaction()
        second.produce(topic, value=b"second")
        second.commit_transaction(WAIT_S)
        assert sorted(read_all(broker.bootstrap_servers, topic, "read_committed", 2)) == [b"committed", b"second"]
