"""Transactions with kafka-python 3.x (its own Python implementation of KIP-98) against a real broker
process: committed records reach a read_committed consumer, aborted ones do not, and
send_offsets_to_transaction commits the group's offsets with the transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

OVERRIDES = {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4"}
WAIT_S = 60.0


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("txn-kafka-python"), overrides=OVERRIDES) as broker:
        yield broker.bootstrap_servers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation,
        consumer_timeout_ms=1500,
    )
    got: list[bytes] = []
    deadline = Deadline(WAIT_S)
    try:
        while not deadline.expired():
            before = len(got)
            got.extend(record.value for record in consumer)
            if len(got) >= expected and len(got) == before:
                break
    finally:
        consumer.close()
    return got


def test_commit_and_abort(bootstrap: str) -> None:
    topic, group = unique("kp-txn"), unique("g")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("tx"))
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, b"c%d" % i)
    producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(42, "", -1)}, group)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"aborted")
    producer.flush()
    producer.abort_transaction()
    producer.close()

    assert read(bootstrap, topic, "read_committed", 5) == [b"c%d" % i for i in range(5)]
    assert len(read(bootstrap, topic, "read_uncommitted", 6)) == 6
    member = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert member.committed(TopicPartition(topic, 0)) == 42
    finally:
        member.close()
