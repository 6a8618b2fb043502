"""pylog's transactional producer sending a consumer's ``group_metadata()`` with its offsets
(KIP-447: TxnOffsetCommit v3 carries the generation or member epoch, the member id and the
instance id) on Apache Kafka 4.1.1 and on pylog, the same scenario on both, for a classic group
and a KIP-848 group (``group.protocol=consumer``):

* a member's current metadata: the transaction commits and the group has the offset;
* the metadata a member held before the group moved on (classic: before a second member joined
  and the generation moved; KIP-848: of a member that has left) is refused, the producer raises
  ``CommitFailedError`` and the transaction must be aborted; the group keeps its offset;
* after the abort, the next transaction with the member's current metadata commits.

The observations must be equal on both brokers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client import AdminClient, CommitFailedError, Consumer, Producer, TopicPartition
from tests.differential.conftest import Brokers
from tests.differential.scenarios import create_ready_topic, unique
from tests.waiting import Deadline

PARTITIONS = 2
DEADLINE_S = 120.0


def member(address: str, group: str, topic: str, protocol: str) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": group, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        **({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300} if protocol == "classic" else {}),
    })  # fmt: skip
    consumer.subscribe([topic])
    return consumer


def drive(consumers: list[Consumer], until: Callable[[], bool]) -> None:
    deadline = Deadline(DEADLINE_S)
    while not until():
        for c in consumers:
            c.poll(50)
        assert not deadline.expired(), f"not reached; owned {[sorted(c.assignment()) for c in consumers]}"


def send_offsets(producer: Producer, topic: str, offset: int, group: Any) -> str:
    """One transaction holding only offsets: ``committed``, or the error and ``aborted``."""
    producer.begin_transaction()
    try:
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): offset}, group)
        producer.commit_transaction()
    except CommitFailedError as exc:
        producer.abort_transaction()
        return f"{type(exc).__name__} {exc.code.name}, aborted"
    return "committed"


def scenario(address: str, protocol: str) -> dict[str, Any]:
    topic, group = unique("kip447"), unique("group")
    create_ready_topic(address, topic, partitions=PARTITIONS)
    out: dict[str, Any] = {}
    first = member(address, group, topic, protocol)
    second: Consumer | None = None
    producer = Producer({"bootstrap.servers": address, "transactional.id": unique("txn")})
    try:
        producer.init_transactions()
        drive([first], lambda: len(first.assignment()) == PARTITIONS)
        before = first.group_metadata()
        out["metadata"] = (before.group_id == group, before.generation_id > 0, bool(before.member_id))
        out["current metadata"] = send_offsets(producer, topic, 3, before)
        second = member(address, group, topic, protocol)
        pair = [first, second]
        drive(pair, lambda: len(first.assignment()) == len(pair[1].assignment()) == PARTITIONS // 2)
        if protocol == "classic":
            stale = before  # the generation before the second member joined
        else:
            stale = second.group_metadata()  # a member that then leaves
            second.close()
            second = None
            drive([first], lambda: len(first.assignment()) == PARTITIONS)
        now = first.group_metadata()
        out["generation moved"] = now.generation_id > before.generation_id
        out["stale metadata"] = send_offsets(producer, topic, 5, stale)
        out["current metadata after the abort"] = send_offsets(producer, topic, 7, first.group_metadata())
        with AdminClient({"bootstrap.servers": address}) as admin:
            committed = admin.list_consumer_group_offsets(group)
        out["committed"] = sorted((tp.partition, o.offset) for tp, o in committed.items())
    finally:
        producer.close()
        for c in (first, second):
            if c is not None:
                c.close()
    return out


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_transaction_carries_the_consumers_group_metadata_on_both_brokers(brokers: Brokers, protocol: str) -> None:
    results = {name: scenario(address, protocol) for name, address in brokers.items()}
    kafka, pylog = results["kafka"], results["pylog"]
    assert kafka["current metadata"] == kafka["current metadata after the abort"] == "committed"
    assert kafka["stale metadata"].startswith("CommitFailedError")
    assert kafka["committed"] == [(0, 7)]
    assert pylog == kafka
