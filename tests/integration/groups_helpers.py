"""Helpers of the consumer-group integration tests: a broker tuned for quick rebalances, record
production, and a loop that polls several consumers (of any client) until a condition holds."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.client import AdminClient, NewTopic, Producer
from tests.waiting import wait_until

# Kafka's group.min.session.timeout.ms is 6000: lowered so killed members expire quickly; the
# initial rebalance delay (3000 by default) is shortened for every new group.
GROUP_BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0) -> list[bytes]:
    """``count`` records keyed ``k<i>`` valued ``v<i>``; returns the values."""
    values = [f"v{i}".encode() for i in range(start, start + count)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i, value in enumerate(values, start):
            producer.send(topic, value, key=f"k{i}".encode())
        producer.flush()
    return values


@dataclass
class Member:
    """One consumer under test: how to poll it and what it received and was assigned."""

    name: str
    poll_once: Callable[[], list[bytes]]
    assignment: Callable[[], set[tuple[str, int]]]
    received: list[bytes] = field(default_factory=list)
    assigned_events: list[set[tuple[str, int]]] = field(default_factory=list)
    revoked_events: list[set[tuple[str, int]]] = field(default_factory=list)

    def poll(self) -> None:
        self.received.extend(self.poll_once())


def drive(members: Iterable[Member], until: Callable[[], bool], timeout_s: float = 90.0) -> None:
    """Poll every member in turn until ``until()``; fail after ``timeout_s``."""
    members = list(members)

    def polled() -> bool:
        for member in members:
            member.poll()
        return until()

    wait_until(
        polled,
        lambda: f"the condition; assignments: { {m.name: sorted(m.assignment()) for m in members} }",
        timeout_s=timeout_s,
        interval_s=0,
    )


def received_all(members: Iterable[Member], values: list[bytes]) -> Callable[[], bool]:
    """Every value of ``values`` reached some member. Sets, not counts: a member that consumed
    before a late rebalance moved its partitions away may legitimately see a record twice (no
    commit happened in between), which is at-least-once delivery, not a broker fault."""
    members = list(members)
    wanted = set(values)

    def check() -> bool:
        return set().union(*(m.received for m in members)) == wanted

    return check


def split_evenly(members: Iterable[Member], topic: str, partitions: int) -> Callable[[], bool]:
    """Every partition assigned to exactly one member, counts differing by at most one."""
    members = list(members)

    def check() -> bool:
        sets = [m.assignment() for m in members]
        union: set[tuple[str, int]] = set().union(*sets)
        disjoint = sum(len(s) for s in sets) == len(union)
        sizes = [len(s) for s in sets]
        return disjoint and union == {(topic, p) for p in range(partitions)} and max(sizes) - min(sizes) <= 1

    return check


# -- per-client adapters ---------------------------------------------------------------------------


def confluent_member(name: str, bootstrap: str, group: str, topics: list[str], **extra: Any) -> tuple[Member, Any]:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "client.id": name,
        **extra,
    }
    consumer = Consumer(conf)
    owned: set[tuple[str, int]] = set()

    def on_assign(_c: Any, parts: list[Any]) -> None:
        got = {(p.topic, p.partition) for p in parts}
        owned.clear()
        owned.update(got)
        member.assigned_events.append(got)

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        member.revoked_events.append({(p.topic, p.partition) for p in parts})
        owned.clear()

    def poll_once() -> list[bytes]:
        msg = consumer.poll(0.05)
        if msg is None or msg.error():
            return []
        return [msg.value()]

    member = Member(name, poll_once, lambda: set(owned))
    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    return member, consumer


def pylog_member(name: str, bootstrap: str, group: str, topics: list[str], **extra: Any) -> tuple[Member, Any]:
    from pyspark_log.client import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "client.id": name,
        **extra,
    }
    consumer = Consumer(conf)

    def poll_once() -> list[bytes]:
        return [r.value for r in consumer.poll(50) if r.value is not None]

    member = Member(name, poll_once, lambda: {(tp.topic, tp.partition) for tp in consumer.assignment()})
    consumer.subscribe(
        topics,
        on_assign=lambda ps: member.assigned_events.append({(tp.topic, tp.partition) for tp in ps}),
        on_revoke=lambda ps: member.revoked_events.append({(tp.topic, tp.partition) for tp in ps}),
    )
    return member, consumer
