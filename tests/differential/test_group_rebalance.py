"""Rebalance callbacks of two confluent-kafka consumers in one classic group on Apache Kafka 4.1.1
and on pylog: eager (``range``) and cooperative (``cooperative-sticky``, KIP-429) assignment, as the
second consumer joins and then the first leaves.

The steps follow librdkafka's ``0113-cooperative_rebalance`` tests (``b_subscribe_with_cb_test``):
c1 alone takes the topic's 4 partitions; c2 subscribes and (cooperative) only c2 is polled until
its first callback (so c1 cannot revoke and rejoin before c2's first SyncGroup, which a busy machine would
otherwise decide); both are polled until each holds 2 partitions and has seen the callbacks
librdkafka's test counts against Kafka; c1 closes (LeaveGroup) and c2 is polled until it holds
all 4. Each consumer's callbacks, as (kind, number of partitions), must be the same on both
brokers; a difference would be a row of the table "Group rebalances" in docs/compatibility.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import DEADLINE_S, create_ready_topic, unique
from tests.waiting import Deadline

HEADING = "Group rebalances"
PARTITIONS = 4


@dataclass
class Callbacks:
    events: list[tuple[str, int]] = field(default_factory=list)

    def on_assign(self, _: Any, parts: list[Any]) -> None:
        self.events.append(("assign", len(parts)))

    def on_revoke(self, _: Any, parts: list[Any]) -> None:
        self.events.append(("revoke", len(parts)))

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.events if k == kind)


def poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> bool:
    """Poll ``consumers`` until ``done()``; False when the deadline passed first (the callbacks
    seen so far are then compared, and differ)."""
    deadline = Deadline(DEADLINE_S)
    while not done():
        if deadline.expired():
            return False
        for c in consumers:
            c.poll(0.2)
    return True


def consumer(address: str, group: str, name: str, strategy: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": address, "group.id": group, "client.id": name,
        "partition.assignment.strategy": strategy, "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip


def scenario(address: str, strategy: str) -> dict[str, list[tuple[str, int]]]:
    topic, group = unique(f"rebalance-{strategy}"), unique("g")
    create_ready_topic(address, topic, partitions=PARTITIONS)
    cb1, cb2 = Callbacks(), Callbacks()
    c1, c2 = consumer(address, group, "C_1", strategy), consumer(address, group, "C_2", strategy)
    cooperative = strategy == "cooperative-sticky"
    closed: list[Consumer] = []
    try:
        c1.subscribe([topic], on_assign=cb1.on_assign, on_revoke=cb1.on_revoke)
        poll_until([c1], lambda: len(c1.assignment()) == PARTITIONS)
        c2.subscribe([topic], on_assign=cb2.on_assign, on_revoke=cb2.on_revoke)
        if cooperative:  # eager: c2's first assignment needs c1's revocation (c1 polled) first
            poll_until([c2], lambda: cb2.count("assign") >= 1)
        # librdkafka's counts against Kafka: cooperative c1 assign x3 (all, then two empty
        # incremental rounds), c2 x2 (empty round 1, its partitions in round 2); eager one each
        want1, want2 = (3, 2) if cooperative else (2, 1)
        poll_until(
            [c1, c2],
            lambda: (
                len(c1.assignment()) == len(c2.assignment()) == PARTITIONS // 2
                and cb1.count("assign") >= want1
                and cb2.count("assign") >= want2
            ),
        )
        c1.close()
        closed.append(c1)
        poll_until([c2], lambda: len(c2.assignment()) == PARTITIONS)
    finally:
        for c in (c1, c2):
            if c not in closed:
                c.close()
    return {"c1": cb1.events, "c2": cb2.events}


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    return {
        name: {strategy: scenario(address, strategy) for strategy in ("range", "cooperative-sticky")}
        for name, address in brokers.items()
    }


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_same_rebalance_callbacks(observed: dict[str, dict[str, Any]], strategy: str) -> None:
    kafka, pylog = observed["kafka"][strategy], observed["pylog"][strategy]
    differs = {(strategy, str(kafka), str(pylog))} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 3) if row[0] == strategy}
    message = compare(HEADING, differs, documented)
    assert not message, message
