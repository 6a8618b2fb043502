"""KIP-848 coordinator failover on three replicated nodes: the consumer group's records in
``__consumer_offsets`` (replication factor 3) let the new coordinator resume the same group epoch,
member epochs and assignments after the old one is killed (SIGKILL); the librdkafka members
(``group.protocol=consumer``) find it and go on heartbeating without a rebalance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.embedded_cluster import EmbeddedCluster, request
from pyspark_log.wire import ApiKey
from tests.waiting import Deadline

from .groups_helpers import create_topic, drive, produce, unique
from .test_kip848_confluent import exact_split, member

NODES = (1, 2, 3)
OVERRIDES = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "15000",  # members find the new coordinator well within it
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    import confluent_kafka

    if confluent_kafka.libversion()[1] < 0x020A0000:
        pytest.skip("librdkafka < 2.10 has no group.protocol=consumer")
    with EmbeddedCluster(tmp_path / "kip848-failover", brokers=NODES, combined=True, overrides=OVERRIDES) as c:
        yield c


def coordinator_of(address: str, group: str) -> int | None:
    try:
        found = request(address, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    except OSError:
        return None
    return found.node_id if found.error_code == 0 else None


def describe(address: str, group: str) -> Any:
    try:
        body = {"group_ids": [group], "include_authorized_operations": False}
        found = request(address, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups[0]
    except OSError:
        return None
    return found if found.error_code == 0 and found.group_state == "Stable" else None


def test_a_new_coordinator_resumes_the_group_epochs(cluster: EmbeddedCluster) -> None:
    topic, group = unique("failover848"), unique("g")
    bootstrap = cluster.bootstrap()
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 30)
    m1, c1 = member("c1", bootstrap, group, [topic], **{"enable.auto.commit": False})
    m2, c2 = member("c2", bootstrap, group, [topic], **{"enable.auto.commit": False})
    try:
        everything = {(topic, p) for p in range(3)}
        drive([m1, m2], lambda: exact_split([m1, m2], everything)() and len(m1.received) + len(m2.received) == 30)
        old = coordinator_of(cluster.address(1), group)
        assert old in NODES
        before = describe(cluster.address(old), group)
        assert before is not None
        # a synchronous commit is answered once the offsets partition's ISR has it, and with it
        # the group's records written before it
        c1.commit(asynchronous=False)
        epochs = {m.member_id: m.member_epoch for m in before.members}
        owned = (m1.assignment(), m2.assignment())
        cluster.kill(old)
        survivor = cluster.address(next(n for n in NODES if n != old))
        deadline = Deadline(90)
        after = None
        while not deadline.expired():
            m1.poll()
            m2.poll()
            new = coordinator_of(survivor, group)
            after = describe(cluster.address(new), group) if new not in (None, old) else None
            if after is not None and {m.member_id: m.member_epoch for m in after.members} == epochs:
                break
        assert after is not None, "no Stable group on a new coordinator"
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert {m.member_id: m.member_epoch for m in after.members} == epochs
        assert (m1.assignment(), m2.assignment()) == owned
        new = coordinator_of(survivor, group)
        assert new is not None
        loaded = f"consumer group {group} loaded at epoch {before.group_epoch} (2 member(s))"
        assert loaded in cluster.nodes[new].output()  # replayed from the replicated records
    finally:
        c1.close()
        c2.close()
