"""KIP-848 online migration on Apache Kafka 4.1.1 and pylog (``group.consumer.migration.policy``
left at its default, ``bidirectional``): a classic confluent-kafka member (eager ``range``) owns a
topic; a ``group.protocol=consumer`` member joins — the group becomes a consumer group
(ListGroups v5 type, ConsumerGroupDescribe with one classic and one consumer member, MemberType
0 and 1) and the classic member, answered through JoinGroup/SyncGroup, ends up with half the
partitions; the consumer member leaves — the group is classic again (DescribeGroups shows the
classic member, Stable, protocol ``range``) and the classic member owns everything. The
observations must be equal on both brokers."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.scenarios import create_ready_topic, unique
from tests.waiting import Deadline

DEADLINE_S = 120.0


def group_type(address: str, group: str) -> str | None:
    listed = request(address, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return next((g.group_type for g in listed.groups if g.group_id == group), None)


def until(what: str, consumers: list[Any], check: Any) -> Any:
    deadline = Deadline(DEADLINE_S)
    while True:
        for c in consumers:
            c.poll(0.05)
        got = check()
        if got:
            return got
        assert not deadline.expired(), f"{what}: not reached"


def owned(c: Any) -> int:
    return len(c.assignment())


def scenario(address: str) -> dict[str, Any]:
    topic, group = unique("migrate"), unique("group")
    create_ready_topic(address, topic, partitions=4)
    common = {"bootstrap.servers": address, "group.id": group, "enable.auto.commit": False}
    classic = Consumer({**common, "group.protocol": "classic", "partition.assignment.strategy": "range",
                        "session.timeout.ms": 10000, "heartbeat.interval.ms": 250, "client.id": "classic"})  # fmt: skip
    modern: Any = None
    out: dict[str, Any] = {}
    try:
        classic.subscribe([topic])
        until("classic member owns all", [classic], lambda: owned(classic) == 4)
        out["before"] = group_type(address, group)
        modern = Consumer({**common, "group.protocol": "consumer", "client.id": "modern"})
        modern.subscribe([topic])
        until("split", [classic, modern], lambda: owned(classic) == owned(modern) == 2)
        out["mixed type"] = group_type(address, group)
        body = {"group_ids": [group], "include_authorized_operations": False}
        described = request(address, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups[0]
        out["mixed describe"] = (
            described.error_code, described.group_state,
            sorted((m.client_id, m.member_type, len([p for t in m.assignment.topic_partitions for p in t.partitions]))
                   for m in described.members),
        )  # fmt: skip
        modern.close()
        modern = None
        until("classic again", [classic], lambda: owned(classic) == 4 and group_type(address, group) == "classic")
        out["after type"] = group_type(address, group)
        old = request(address, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        d = old.groups[0]
        out["after describe"] = (d.error_code, d.group_state, d.protocol_type, d.protocol_data,
                                 [m.client_id for m in d.members])  # fmt: skip
    finally:
        for c in (classic, modern):
            if c is not None:
                c.close()
    return out


def test_upgrade_and_downgrade_of_a_group_on_both_brokers(brokers: Brokers) -> None:
    results = {name: scenario(address) for name, address in brokers.items()}
    kafka = results["kafka"]
    assert kafka["before"] == "classic"
    assert kafka["mixed type"] == "consumer"
    assert kafka["after type"] == "classic"
    assert results["pylog"] == kafka
