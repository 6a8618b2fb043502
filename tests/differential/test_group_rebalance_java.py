"""Rebalances as the Java consumer sees them, on Apache Kafka 4.1.1 and on pylog: two
``kafka-verifiable-consumer`` processes (Kafka's own system-test client, the Java consumer of
Kafka 4.1 with the classic group protocol) in one group, eager (``RangeAssignor``) and cooperative
(``CooperativeStickyAssignor``, KIP-429): c1 alone takes the topic's 4 partitions, c2 joins and
both end with 2, c1 stops (LeaveGroup) and c2 ends with all 4.

The Java consumer's threads poll on their own, so the exact number of rounds depends on timing
(a member may rejoin once more on a busy machine); what the protocol fixes is compared instead,
from each consumer's ``partitions_assigned`` / ``partitions_revoked`` events:

* eager: before c1 gets its half it revokes everything it held (4 partitions at once);
* cooperative: c1 never revokes more than the partitions that move to c2, and never all 4;
* both: the assignments the events add up to (eager: each assignment replaces the last;
  cooperative: assignments add, revocations remove) are 4 / 2+2 / 4 at the three steps, disjoint.

A property that holds on one broker and not on the other is a row of the table "Group rebalances
(Java consumer)" in docs/compatibility.md (the tests read it).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.apache_kafka import kafka_tool_process
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, unique
from tests.waiting import wait_until

HEADING = "Group rebalances (Java consumer)"
PARTITIONS = 4
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


@dataclass
class JavaConsumer:
    """One ``kafka-verifiable-consumer`` process and the events it printed (a reader thread)."""

    proc: subprocess.Popen[str]
    cooperative: bool
    events: list[tuple[str, frozenset[int]]] = field(default_factory=list)
    _lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def drain(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            try:
                event = json.loads(line)
            except ValueError:
                continue
            name = event.get("name")
            if name in ("partitions_assigned", "partitions_revoked"):
                parts = frozenset(int(p["partition"]) for p in event.get("partitions", []))
                self.events.append(("assign" if name == "partitions_assigned" else "revoke", parts))

    def held(self) -> frozenset[int]:
        """What the events add up to (eager: the last assignment; cooperative: added less revoked)."""
        self.drain()
        owned: frozenset[int] = frozenset()
        for kind, parts in self.events:
            if kind == "assign":
                owned = owned | parts if self.cooperative else parts
            else:
                owned = owned - parts if self.cooperative else frozenset()
        return owned

    def stop(self) -> None:
        """SIGTERM: the consumer closes (LeaveGroup) in its shutdown hook."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.drain()


def start(address: str, topic: str, group: str, strategy: str) -> JavaConsumer:
    proc = kafka_tool_process(
        "kafka-verifiable-consumer", "--bootstrap-server", address, "--topic", topic, "--group-id", group,
        "--assignment-strategy", ASSIGNORS[strategy], "--reset-policy", "earliest",
    )  # fmt: skip
    return JavaConsumer(proc, cooperative=strategy == "cooperative-sticky")


def scenario(address: str, strategy: str) -> dict[str, Any]:
    """The protocol's properties as this broker's rebalances showed them to the Java consumer."""
    topic, group = unique(f"java-rebalance-{strategy}"), unique("g")
    create_ready_topic(address, topic, partitions=PARTITIONS)
    everything = frozenset(range(PARTITIONS))
    c1 = start(address, topic, group, strategy)
    c2: JavaConsumer | None = None
    try:
        wait_until(lambda: c1.held() == everything, "c1 to hold every partition")
        before_join = len(c1.events)
        c2 = start(address, topic, group, strategy)
        wait_until(
            lambda: len(c1.held()) == len(c2.held()) == PARTITIONS // 2 and not c1.held() & c2.held(),
            "c1 and c2 to hold half each",
        )
        c1_rebalance = c1.events[before_join:]
        c1.stop()
        wait_until(lambda: c2.held() == everything, "c2 to hold every partition after c1 left")
    finally:
        c1.stop()
        if c2 is not None:
            c2.stop()
    revoked = [parts for kind, parts in c1_rebalance if kind == "revoke"]
    return {
        "first assignment of c1": sorted(next(parts for kind, parts in c1.events if kind == "assign")),
        "c1 revoked all 4 at once when c2 joined": any(parts == everything for parts in revoked),
        "largest revocation of c1 when c2 joined": max((len(parts) for parts in revoked), default=0),
    }


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    return {
        name: {strategy: scenario(address, strategy) for strategy in ASSIGNORS} for name, address in brokers.items()
    }


@pytest.mark.parametrize("strategy", list(ASSIGNORS))
def test_protocol_properties_as_the_java_consumer_sees_them(observed: dict[str, dict[str, Any]], strategy: str) -> None:
    kafka, pylog = observed["kafka"][strategy], observed["pylog"][strategy]
    # what KIP-429 and the eager protocol promise, on the reference first
    assert kafka["first assignment of c1"] == list(range(PARTITIONS))
    if strategy == "cooperative-sticky":
        assert not kafka["c1 revoked all 4 at once when c2 joined"]
        assert kafka["largest revocation of c1 when c2 joined"] <= PARTITIONS // 2
    else:
        assert kafka["c1 revoked all 4 at once when c2 joined"]
    differs = {(strategy, key, str(kafka[key]), str(pylog[key])) for key in kafka if kafka[key] != pylog[key]}
    documented = {tuple(row) for row in table(HEADING, 4) if row[0] == strategy}
    message = compare(HEADING, differs, documented)
    assert not message, message
