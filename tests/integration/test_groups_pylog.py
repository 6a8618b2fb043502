"""pylog's own consumer in consumer groups against a real broker: splitting, rebalance callbacks,
auto-commit, a mixed group with confluent-kafka, static membership and fencing (KIP-345,
FencedInstanceIdException in Kafka documentation §4.5 "The Consumer"), cooperative-sticky, pattern subscription and
``max.poll.interval.ms``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyspark_log.client import AdminClient, Consumer, KafkaError, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.wire import ErrorCode
from tests.waiting import Deadline, wait_until

from .groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    Member,
    confluent_member,
    create_topic,
    drive,
    produce,
    pylog_member,
    received_all,
    split_evenly,
    unique,
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-pylog"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


def committed_total(bootstrap: str, group: str) -> int:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return sum(o.offset for o in admin.list_consumer_group_offsets(group).values())


def test_two_members_split_and_auto_commit_their_positions(bootstrap: str) -> None:
    topic, group = unique("split"), unique("g")
    create_topic(bootstrap, topic, 4)
    auto = {"enable.auto.commit": True, "auto.commit.interval.ms": 200}
    m1, c1 = pylog_member("p1", bootstrap, group, [topic], **auto)
    m2, c2 = pylog_member("p2", bootstrap, group, [topic], **auto)
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 4))
        values = produce(bootstrap, topic, 40)
        drive([m1, m2], lambda: split_evenly([m1, m2], topic, 4)() and received_all([m1, m2], values)())
        assert m1.assigned_events[-1] == m1.assignment()
        assert m2.assigned_events[-1] == m2.assignment()
        drive([m1, m2], lambda: committed_total(bootstrap, group) == 40, timeout_s=60)
    finally:
        c1.close()
        c2.close()


def test_a_mixed_group_of_pylog_and_confluent_consumers(bootstrap: str) -> None:
    topic, group = unique("mixed"), unique("g")
    create_topic(bootstrap, topic, 6)
    mp, cp = pylog_member("pylog", bootstrap, group, [topic])
    mc, cc = confluent_member("confluent", bootstrap, group, [topic])
    try:
        drive([mp, mc], split_evenly([mp, mc], topic, 6))
        values = produce(bootstrap, topic, 60)
        drive([mp, mc], lambda: split_evenly([mp, mc], topic, 6)() and received_all([mp, mc], values)())
        assert len(mp.assignment()) == len(mc.assignment()) == 3
        cc.close()
        drive([mp], lambda: len(mp.assignment()) == 6, timeout_s=60)
    finally:
        cp.close()


def test_static_member_restarts_without_rebalance_and_a_duplicate_is_fenced(bootstrap: str) -> None:
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    static = {"group.instance.id": "worker-1", "session.timeout.ms": 20000}
    ms, cs = pylog_member("static", bootstrap, group, [topic], **static)
    md, cd = pylog_member("dynamic", bootstrap, group, [topic])
    cs2 = cs3 = None
    try:
        drive([ms, md], split_evenly([ms, md], topic, 4))
        before = ms.assignment()
        events = (len(md.assigned_events), len(md.revoked_events))
        cs.close()  # static: no LeaveGroup
        ms2, cs2 = pylog_member("static-again", bootstrap, group, [topic], **static)
        drive([ms2, md], lambda: ms2.assignment() == before, timeout_s=20)
        for _ in range(10):
            md.poll()
        assert (len(md.assigned_events), len(md.revoked_events)) == events

        # A second process with the same group.instance.id takes the identity over; the one it
        # replaced learns it was fenced (FENCED_INSTANCE_ID) on its next heartbeat.
        ms3, cs3 = pylog_member("duplicate", bootstrap, group, [topic], **static)
        with pytest.raises(KafkaError) as fenced:
            poll_both_for(ms3, ms2, seconds=20)
        assert fenced.value.code == ErrorCode.FENCED_INSTANCE_ID
    finally:
        for c in (cs2, cs3, cd):
            if c is not None:
                c.close()


def poll_both_for(*members: Member, seconds: float) -> None:
    deadline = Deadline(seconds)
    while not deadline.expired():
        for m in members:
            m.poll()


def test_cooperative_sticky_moves_only_the_partitions_it_must(bootstrap: str) -> None:
    topic, group = unique("coop"), unique("g")
    create_topic(bootstrap, topic, 6)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    m1, c1 = pylog_member("p1", bootstrap, group, [topic], **coop)
    m2, c2 = None, None
    try:
        drive([m1], lambda: len(m1.assignment()) == 6)
        m2, c2 = pylog_member("p2", bootstrap, group, [topic], **coop)
        drive([m1, m2], split_evenly([m1, m2], topic, 6))
        kept = m1.assignment()
        assert kept < {(topic, p) for p in range(6)}
        # only the three partitions that moved were revoked, never the whole assignment
        assert [len(r) for r in m1.revoked_events if r] == [3]
        assert all(not (r & kept) for r in m1.revoked_events)
    finally:
        c1.close()
        if c2 is not None:
            c2.close()


def test_pattern_subscription_and_poll_interval(bootstrap: str) -> None:
    prefix = unique("pat")
    create_topic(bootstrap, f"{prefix}-a", 1)
    create_topic(bootstrap, f"{prefix}-b", 1)
    group = unique("g")
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    with Consumer({**conf, "max.poll.interval.ms": 1500, "heartbeat.interval.ms": 100}) as lazy, Consumer(conf) as busy:
        lazy.subscribe(pattern=rf"{prefix}-.*")
        both = {TopicPartition(f"{prefix}-a", 0), TopicPartition(f"{prefix}-b", 0)}

        def lazy_holds_both() -> bool:
            lazy.poll(50)
            return lazy.assignment() == both

        wait_until(lazy_holds_both, "lazy to hold both topics", interval_s=0)
        assert lazy.subscription() == {f"{prefix}-a", f"{prefix}-b"}
        busy.subscribe(pattern=rf"{prefix}-.*")
        # ``lazy`` stops polling: after max.poll.interval.ms it leaves and ``busy`` gets everything

        def busy_holds_both() -> bool:
            busy.poll(50)
            return len(busy.assignment()) == 2

        wait_until(busy_holds_both, "busy to hold both after lazy left", interval_s=0)


def test_callbacks_run_on_the_polling_thread_and_may_commit(bootstrap: str) -> None:
    """As in Kafka's consumer, ``on_partitions_revoked`` may commit synchronously (here on close)."""
    import threading

    topic, group = unique("cb"), unique("g")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 10)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    consumer = Consumer({**conf, "enable.auto.commit": False})
    threads: list[str] = []

    def on_revoke(partitions: set[TopicPartition]) -> None:
        threads.append(threading.current_thread().name)
        consumer.commit()

    consumer.subscribe(
        [topic], on_assign=lambda _ps: threads.append(threading.current_thread().name), on_revoke=on_revoke
    )
    got: list[object] = []

    def read_ten() -> bool:
        got.extend(consumer.poll(50))
        return len(got) >= 10

    wait_until(read_ten, "10 records", interval_s=0)
    consumer.close()
    assert threads == [threading.current_thread().name] * 2
    assert committed_total(bootstrap, group) == 10
