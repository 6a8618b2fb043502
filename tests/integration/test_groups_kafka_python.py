"""Consumer groups with kafka-python against a real broker: a group splits the partitions, a member
that closes hands them over, committed offsets are read back, and the admin calls see the group
(ListGroups, DescribeGroups, OffsetFetch, OffsetDelete, DeleteGroups)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kafka
import pytest

from pyspark_log.embedded import EmbeddedBroker

from .groups_helpers import (
    GROUP_BROKER_OVERRIDES,
    Member,
    create_topic,
    drive,
    produce,
    received_all,
    split_evenly,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-kafka-python"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


def kp_member(name: str, bootstrap: str, group: str, topic: str, **extra: Any) -> tuple[Member, Any]:
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        **extra,
    )

    def poll_once() -> list[bytes]:
        batches = consumer.poll(timeout_ms=50)
        return [r.value for records in batches.values() for r in records]

    member = Member(name, poll_once, lambda: {(tp.topic, tp.partition) for tp in consumer.assignment()})
    return member, consumer


def commit_when_stable(members: list[Member], consumers: list[Any], timeout_s: float = 90) -> None:
    """Commit every consumer; a client may still be finishing a rebalance it started itself (e.g.
    after a metadata refresh): poll, as kafka-python's RebalanceInProgressError advises, and retry."""
    deadline = time.monotonic() + timeout_s
    pending = list(consumers)
    while pending:
        try:
            pending[0].commit()
            pending.pop(0)
        except (kafka.errors.RebalanceInProgressError, kafka.errors.CommitFailedError):
            assert time.monotonic() < deadline, "the group did not settle"
            for m in members:
                m.poll()


def test_kafka_python_group_splits_commits_and_hands_over(bootstrap: str) -> None:
    topic, group = unique("kp"), unique("g")
    create_topic(bootstrap, topic, 4)
    m1, c1 = kp_member("kp1", bootstrap, group, topic)
    m2, c2 = kp_member("kp2", bootstrap, group, topic)
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        drive([m1, m2], split_evenly([m1, m2], topic, 4))
        values = produce(bootstrap, topic, 40)
        drive([m1, m2], lambda: split_evenly([m1, m2], topic, 4)() and received_all([m1, m2], values)())
        commit_when_stable([m1, m2], [c1, c2])

        # kafka-python may start a rebalance of its own (after a metadata refresh): poll until the
        # group is seen Stable with both members rather than reading its state once.
        def stable_with_both() -> bool:
            listed = {g["group_id"]: g for g in admin.list_groups()}
            described = admin.describe_groups([group])[group]
            return listed[group]["group_state"] == "Stable" and len(described["members"]) == 2

        drive([m1, m2], stable_with_both, timeout_s=90)
        described = admin.describe_groups([group])[group]
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] in ("range", "roundrobin")
        offsets = admin.list_group_offsets(group)[group]
        assert {(tp.topic, tp.partition) for tp in offsets} == {(topic, p) for p in range(4)}
        assert sum(om.offset for om in offsets.values()) == 40

        deleted = admin.delete_groups([group])
        assert deleted[group] != "OK"  # NON_EMPTY_GROUP while members remain

        c2.close()
        drive([m1], lambda: m1.assignment() == {(topic, p) for p in range(4)}, timeout_s=90)
    finally:
        c1.close()
    drive([], lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", timeout_s=90)
    assert admin.delete_groups([group])[group] == "OK"
    assert group not in {g["group_id"] for g in admin.list_groups()}
    assert not admin.list_group_offsets(group)[group]
    admin.close()
