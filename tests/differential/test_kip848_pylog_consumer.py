"""pylog's own consumer with ``group.protocol=consumer`` (KIP-848) on Apache Kafka 4.1.1 and on
pylog, the same scenario on both: one member owns every partition, a second joins (the broker
moves partitions only once the first revoked them: the two never own a partition at once), the
second leaves with epoch -1 and the first gets everything back. Each member commits its
positions with OffsetCommit v9 (member id and epoch) after every poll, so by committed offsets
every record is read exactly once; the observations must be equal on both brokers."""

from __future__ import annotations

from typing import Any

from pyspark_log.client import AdminClient, Consumer, Producer
from tests.differential.conftest import Brokers
from tests.differential.scenarios import create_ready_topic, unique
from tests.waiting import Deadline

PARTITIONS = 4
DEADLINE_S = 120.0


class Member:
    def __init__(self, address: str, group: str, topic: str, name: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": address, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name,
        })  # fmt: skip
        self.events: list[tuple[str, frozenset[int]]] = []
        self.consumer.subscribe(
            [topic],
            on_assign=lambda ps: self.events.append(("assigned", frozenset(tp.partition for tp in ps))),
            on_revoke=lambda ps: self.events.append(("revoked", frozenset(tp.partition for tp in ps))),
            on_lost=lambda ps: self.events.append(("lost", frozenset(tp.partition for tp in ps))),
        )
        self.received: list[tuple[int, int]] = []

    def poll(self) -> None:
        records = self.consumer.poll(50)
        self.received.extend((r.partition, r.offset) for r in records)
        if records:
            self.consumer.commit()

    def owned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())


def drive(members: list[Member], until: Any, overlaps: list[frozenset[int]]) -> None:
    deadline = Deadline(DEADLINE_S)
    while not until():
        for m in members:
            m.poll()
        sets = [m.owned() for m in members]
        both = frozenset().union(*(a & b for i, a in enumerate(sets) for b in sets[i + 1 :]))
        if both:
            overlaps.append(both)
        assert not deadline.expired(), f"not reached; owned {[sorted(s) for s in sets]}"


def scenario(address: str) -> dict[str, Any]:
    topic, group = unique("kip848-pylog"), unique("group")
    create_ready_topic(address, topic, partitions=PARTITIONS)
    sent = 0

    def produce_each(n: int) -> None:
        nonlocal sent
        with Producer({"bootstrap.servers": address}) as producer:  # retries a leader not yet known
            for p in range(PARTITIONS):
                for _ in range(n):
                    producer.send(topic, b"v", partition=p)
            producer.flush()
        sent += n * PARTITIONS

    out: dict[str, Any] = {}
    overlaps: list[frozenset[int]] = []
    everything = frozenset(range(PARTITIONS))
    produce_each(5)
    a = Member(address, group, topic, "a")
    b: Member | None = None
    try:
        drive([a], lambda: a.owned() == everything and len(a.received) == sent, overlaps)
        out["first member"] = (sorted(a.owned()), a.events)
        b = Member(address, group, topic, "b")
        second = b
        drive([a, second], lambda: len(a.owned()) == len(second.owned()) == PARTITIONS // 2, overlaps)
        produce_each(5)
        drive([a, second], lambda: len(a.received) + len(second.received) == sent, overlaps)
        out["split"] = (len(a.owned()), len(second.owned()), a.owned() | second.owned() == everything)
        out["a revoked before b was assigned"] = [kind for kind, _ in a.events]
        b.consumer.close()
        b = None
        produce_each(5)
        drive([a], lambda: a.owned() == everything and len(a.received) + len(second.received) == sent, overlaps)
        received = a.received + second.received
        out["after the second left"] = sorted(a.owned())
        out["records read"] = (len(received), len(set(received)), sent)
        out["overlapping ownership"] = overlaps
        a.consumer.close()
        with AdminClient({"bootstrap.servers": address}) as admin:
            committed = admin.list_consumer_group_offsets(group)
        out["committed"] = sorted((tp.partition, o.offset) for tp, o in committed.items())
    finally:
        for m in (a, b):
            if m is not None:
                m.consumer.close()
    return out


def test_pylog_consumer_with_the_consumer_protocol_on_both_brokers(brokers: Brokers) -> None:
    results = {name: scenario(address) for name, address in brokers.items()}
    kafka, pylog = results["kafka"], results["pylog"]
    assert kafka["records read"][0] == kafka["records read"][1] == kafka["records read"][2] == 60
    assert kafka["overlapping ownership"] == []
    assert kafka["committed"] == [(p, 15) for p in range(PARTITIONS)]
    assert pylog == kafka
