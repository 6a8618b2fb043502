"""Consumer groups with confluent-kafka (librdkafka) against a real broker: partitions split among
members, move when a member leaves or dies, and stay put when a static member restarts
(Kafka documentation §4.5 "The Consumer" "Static Membership": the member id survives a restart, "no rebalance
is triggered")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.embedded import EmbeddedBroker

from .groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    confluent_member,
    create_topic,
    drive,
    produce,
    received_all,
    split_evenly,
    unique,
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-confluent"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


def test_two_then_three_members_split_the_partitions(bootstrap: str) -> None:
    topic, group = unique("split"), unique("g")
    create_topic(bootstrap, topic, 6)
    m1, c1 = confluent_member("c1", bootstrap, group, [topic])
    m2, c2 = confluent_member("c2", bootstrap, group, [topic])
    m3, c3 = None, None
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 6))
        assert len(m1.assignment()) == len(m2.assignment()) == 3
        values = produce(bootstrap, topic, 60)
        drive([m1, m2], received_all([m1, m2], values))
        m3, c3 = confluent_member("c3", bootstrap, group, [topic])
        drive([m1, m2, m3], split_evenly([m1, m2, m3], topic, 6))
        assert [len(m.assignment()) for m in (m1, m2, m3)] == [2, 2, 2]
    finally:
        for c in (c1, c2, c3):
            if c is not None:
                c.close()


def test_a_member_that_leaves_hands_over_its_partitions(bootstrap: str) -> None:
    topic, group = unique("leave"), unique("g")
    create_topic(bootstrap, topic, 4)
    m1, c1 = confluent_member("c1", bootstrap, group, [topic])
    m2, c2 = confluent_member("c2", bootstrap, group, [topic])
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 4))
        c2.close()
        drive([m1], lambda: m1.assignment() == {(topic, p) for p in range(4)}, timeout_s=60)
    finally:
        c1.close()


CHILD = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 2000,
              "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]], on_assign=lambda _c, ps: print("ASSIGNED", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def test_a_killed_member_is_expired_and_its_partitions_move(bootstrap: str, tmp_path: Path) -> None:
    """SIGKILL sends no LeaveGroup: the coordinator removes the member after its session timeout."""
    topic, group = unique("kill"), unique("g")
    create_topic(bootstrap, topic, 4)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), bootstrap, group, topic], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    m1, c1 = confluent_member("c1", bootstrap, group, [topic])
    try:
        assert child.stdout is not None
        os.set_blocking(child.stdout.fileno(), False)
        child_lines: list[str] = []

        def child_has_two() -> bool:
            child_lines.extend(line.strip() for line in iter(child.stdout.readline, ""))  # type: ignore[union-attr]
            return "ASSIGNED 2" in child_lines and len(m1.assignment()) == 2

        drive([m1], child_has_two, timeout_s=30)
        killed_at = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        drive([m1], lambda: len(m1.assignment()) == 4, timeout_s=20)
        assert time.monotonic() - killed_at >= 1.0  # it took a session timeout, not a LeaveGroup
    finally:
        if child.poll() is None:
            child.kill()
        c1.close()


def test_a_static_member_restarts_within_its_session_timeout_without_a_rebalance(bootstrap: str) -> None:
    """KIP-345: a rejoin with the same group.instance.id gets its partitions back; the other
    member sees no revocation or new assignment."""
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    static = {"group.instance.id": "instance-1", "session.timeout.ms": 20000}
    ms, cs = confluent_member("static", bootstrap, group, [topic], **static)
    md, cd = confluent_member("dynamic", bootstrap, group, [topic])
    try:
        drive([ms, md], split_evenly([ms, md], topic, 4))
        before_static, before_events = ms.assignment(), (len(md.assigned_events), len(md.revoked_events))
        cs.close()  # a static member sends no LeaveGroup
        ms2, cs = confluent_member("static-again", bootstrap, group, [topic], **static)
        drive([ms2, md], lambda: ms2.assignment() == before_static, timeout_s=20)
        for _ in range(20):  # give a rebalance, if any, the chance to show
            md.poll()
        assert (len(md.assigned_events), len(md.revoked_events)) == before_events
    finally:
        cs.close()
        cd.close()


def test_commits_are_read_back_by_any_client(bootstrap: str) -> None:
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    from pyspark_log.client import AdminClient

    topic, group = unique("commit"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 20)
    m1, c1 = confluent_member("c1", bootstrap, group, [topic], **{"enable.auto.commit": False})
    try:
        drive([m1], lambda: len(m1.received) == 20)
        c1.commit(asynchronous=False)
        committed = c1.committed([ConfluentTopicPartition(topic, p) for p in (0, 1)], timeout=10)
        total = sum(tp.offset for tp in committed)
        assert total == 20
    finally:
        c1.close()
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        offsets = admin.list_consumer_group_offsets(group)
    assert sum(o.offset for o in offsets.values()) == 20
