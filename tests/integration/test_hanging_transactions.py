"""Hanging transactions (KIP-664; ``kafka-transactions.sh``) against a real broker process.

The issue's case: a transactional producer (confluent-kafka, in its own process) begins a
transaction, writes, and is SIGKILLed. Its transaction stays open on the partition, so the last
stable offset stays at the transaction's first offset and read_committed readers see nothing
written after it, until the coordinator aborts it at ``transaction.timeout.ms`` (10 minutes
here). ``pylog transactions find-hanging`` finds it; ``pylog transactions abort`` writes the
ABORT marker (WriteTxnMarkers to the leader), after which a read_committed consumer moves past
it. kafka-python's admin client (which has KIP-664's calls) reads the same state over the wire.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka import IsolationLevel as CkIsolation
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from pyspark_log.embedded import EmbeddedBroker
from tests.killed_producer import TXN_TIMEOUT_MS, leave_open_transaction
from tests.waiting import Deadline, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),  # kafka-python
]

OVERRIDES = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
}
WAIT_S = 60.0


def pylog(broker: EmbeddedBroker, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", *args, "--bootstrap-server", broker.bootstrap_servers]
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)


def pylog_json(broker: EmbeddedBroker, *args: str) -> Any:
    proc = pylog(broker, *args, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("hanging"), overrides=OVERRIDES) as b:
        yield b


def committed_end(bootstrap: str, topic: str) -> int:
    """The partition's last stable offset, as confluent-kafka's ListOffsets(read_committed) has it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.latest()}, isolation_level=CkIsolation.READ_COMMITTED
    )
    return next(iter(futures.values())).result(30).offset


def read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """What a fresh read_committed consumer reads from the start, once it has ``expected`` values."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        deadline = Deadline(WAIT_S)
        while len(values) < expected and not deadline.expired():
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.fixture
def hanging(broker: EmbeddedBroker) -> tuple[str, str]:
    """A topic whose partition 0 holds 5 records of a transaction left open by a SIGKILLed
    producer, then 3 committed (non-transactional) records. Returns (topic, transactional id)."""
    topic, txn_id = f"hang-{uuid.uuid4().hex[:8]}", f"killed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    leave_open_transaction(broker.bootstrap_servers, topic, txn_id, 5)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        plain.produce(topic, value=f"after-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    return topic, txn_id


def test_killed_producer_transaction_is_found_and_aborted(broker: EmbeddedBroker, hanging: tuple[str, str]) -> None:
    topic, txn_id = hanging
    bootstrap = broker.bootstrap_servers
    # The open transaction holds the LSO at its first offset: read_committed sees nothing yet.
    assert committed_end(bootstrap, topic) == 0

    producers = pylog_json(broker, "transactions", "describe-producers", "--topic", topic, "--partition", "0")
    open_ones = [p for p in producers if p["CurrentTransactionStartOffset"] != "None"]
    assert len(open_ones) == 1
    assert open_ones[0]["CurrentTransactionStartOffset"] == 0
    producer_id = open_ones[0]["ProducerId"]

    listed = pylog_json(broker, "transactions", "list", "--producer-id", str(producer_id))
    assert [(t["TransactionalId"], t["TransactionState"]) for t in listed] == [(txn_id, "Ongoing")]
    described = pylog_json(broker, "transactions", "describe", "--transactional-id", txn_id)
    assert described[0]["TransactionState"] == "Ongoing"
    assert described[0]["TopicPartitions"] == f"{topic}-0"
    assert described[0]["TransactionTimeoutMs"] == TXN_TIMEOUT_MS

    # --max-transaction-timeout 0: every open transaction whose producer is idle for > 0 ms
    def found() -> list[dict[str, Any]]:
        return pylog_json(broker, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")

    rows = wait_until(found, "find-hanging to list the killed producer's transaction")
    assert len(rows) == 1
    row = rows[0]
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["StartOffset"]) == (topic, 0, producer_id, 0)
    assert row["CoordinatorState"] == "Ongoing"  # the coordinator would abort it only at its timeout
    by_broker = pylog_json(broker, "transactions", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    assert [r for r in by_broker if r["Topic"] == topic] == rows
    # The default threshold (15 minutes) does not list a transaction idle for seconds.
    assert pylog_json(broker, "transactions", "find-hanging", "--topic", topic, "--partition", "0") == []

    proc = pylog(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert proc.returncode == 0, proc.stderr
    assert f"producer {producer_id}" in proc.stdout

    # The ABORT marker ends it: the LSO moves to the log end (5 aborted + 3 + the marker) and a
    # read_committed consumer reads the 3 committed records, none of the aborted ones.
    wait_until(lambda: committed_end(bootstrap, topic) == 9, "the LSO to pass the aborted transaction")
    assert read_committed(bootstrap, topic, 3) == [b"after-0", b"after-1", b"after-2"]
    assert pylog_json(broker, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    again = pylog(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert again.returncode == 1
    assert "could not find any open transactions starting at offset 0" in again.stderr


def test_abort_by_producer_id_and_kafka_python_admin(broker: EmbeddedBroker, hanging: tuple[str, str]) -> None:
    """kafka-python's KIP-664 admin calls read the broker's state; the abort names the producer
    by id and epoch (the flags for brokers before 3.0) and coordinator epoch -1 is sent as 0."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition

    topic, txn_id = hanging
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        states = admin.describe_producers([KpTopicPartition(topic, 0)])[KpTopicPartition(topic, 0)]
        producers = [p for p in states.active_producers if p.current_transaction_start_offset == 0]
        assert len(producers) == 1
        producer = producers[0]
        assert producer.coordinator_epoch == -1  # no marker yet for this producer id
        listed = [t for ts in admin.list_transactions(state_filters=["Ongoing"]).values() for t in ts]
        assert txn_id in {t.transactional_id for t in listed}
        assert [t for ts in admin.list_transactions(duration_filter_ms=3_600_000).values() for t in ts] == []
        description = admin.describe_transactions([txn_id])[txn_id]
        assert description.producer_id == producer.producer_id
        assert (topic, 0) in {(tp.topic, tp.partition) for tp in description.topic_partitions}
    finally:
        admin.close()

    proc = pylog(broker, "transactions", "abort", "--topic", topic, "--partition", "0",
                 "--producer-id", str(producer.producer_id), "--producer-epoch", str(producer.producer_epoch),
                 "--coordinator-epoch", "-1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_committed(broker.bootstrap_servers, topic, 3) == [b"after-0", b"after-1", b"after-2"]


def test_bad_flags_name_the_fix(broker: EmbeddedBroker) -> None:
    proc = pylog(broker, "transactions", "find-hanging")
    assert proc.returncode == 2
    assert "--topic or --broker-id" in proc.stderr
    proc = pylog(broker, "transactions", "abort", "--topic", "t", "--partition", "0")
    assert proc.returncode == 2
    assert "--start-offset" in proc.stderr
    proc = pylog(broker, "transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id", "5")
    assert proc.returncode == 2
    assert "--producer-epoch" in proc.stderr
    proc = pylog(broker, "transactions", "describe", "--transactional-id", f"none-{uuid.uuid4().hex[:6]}")
    assert proc.returncode == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in proc.stderr
