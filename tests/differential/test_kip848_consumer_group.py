"""A KIP-848 consumer group on Apache Kafka 4.1.1 and pylog: what ConsumerGroupDescribe answers
(state, epochs, assignor, each member's epoch, subscription, current and target assignment,
MemberType), ListGroups v5 with a type filter, DescribeGroups of a consumer group, the errors of
malformed or fenced ConsumerGroupHeartbeats, a second member joining and leaving (epochs and
partitions per member once Stable), an OffsetCommit v9 at the first member's first (now older)
epoch, the member's offsets sent to a transaction (with its membership, by librdkafka, and
without, by pylog's producer), and the group after its last member left.

The member is confluent-kafka with ``group.protocol=consumer``; member ids and client hosts are left
out, and epochs are compared by their relations (member = assignment = group epoch once Stable,
growing with each membership change), not their values: how many bumps a join takes depends on
when the client's heartbeats meet the topic's metadata, on either broker. A difference must be a
row of the table "KIP-848 consumer groups" in docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, poll, unique

HEADING = "KIP-848 consumer groups"


def describe(address: str, group: str, version: int = 1) -> Any:
    body = {"group_ids": [group], "include_authorized_operations": False}
    return request(address, ApiKey.CONSUMER_GROUP_DESCRIBE, version, body).groups[0]


def parts(assignment: Any, topic: str) -> list[tuple[bool, list[int]]]:
    return [(tp.topic_name == topic, sorted(tp.partitions)) for tp in assignment.topic_partitions]


def views(address: str) -> dict[str, Any]:
    topic, group = unique("kip848"), unique("group")
    create_ready_topic(address, topic, partitions=2)
    out: dict[str, Any] = {}
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": group, "group.protocol": "consumer",
        "client.id": "differential-client", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.subscribe([topic])
        poll("the assignment", lambda: (consumer.poll(0.2), len(consumer.assignment()))[1], lambda n: n == 2)
        g = poll("a Stable group", lambda: describe(address, group), lambda g: g.group_state == "Stable")
        first_epoch = g.group_epoch
        (first_member,) = g.members
        out["describe_group"] = (g.error_code, g.error_message, g.group_state, g.group_epoch == g.assignment_epoch,
                                 g.group_epoch >= 1, g.assignor_name, g.authorized_operations)  # fmt: skip
        out["describe_members"] = [
            (m.instance_id, m.rack_id, m.member_epoch == g.assignment_epoch, m.client_id,
             list(m.subscribed_topic_names) == [topic],
             m.subscribed_topic_regex, parts(m.assignment, topic), parts(m.target_assignment, topic), m.member_type)
            for m in g.members
        ]  # fmt: skip
        out["describe_v0_member_type"] = [m.member_type for m in describe(address, group, 0).members]
        missing = describe(address, unique("missing"))
        out["describe_unknown_group"] = (missing.error_code, missing.group_state, missing.group_epoch)
        listed = request(address, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
        out["list_groups_consumer"] = [
            (x.protocol_type, x.group_state, x.group_type) for x in listed.groups if x.group_id == group
        ]
        listed = request(address, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]})
        out["list_groups_classic"] = [x.group_type for x in listed.groups if x.group_id == group]
        old = request(address, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        d = old.groups[0]
        out["describe_groups_v5"] = (d.error_code, d.group_state, d.protocol_type, d.protocol_data, len(d.members))

        def heartbeat(**fields: Any) -> tuple[int, int]:
            body = {"group_id": group, "member_id": "differential-member", "member_epoch": 0, **fields}
            answer = request(address, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
            return answer.error_code, answer.member_epoch

        out["heartbeat_unknown_member"] = heartbeat(member_epoch=7)
        out["heartbeat_empty_member_id"] = heartbeat(member_id="", rebalance_timeout_ms=1000,
                                                     subscribed_topic_names=[topic], topic_partitions=[])  # fmt: skip
        out["heartbeat_join_without_subscription"] = heartbeat(rebalance_timeout_ms=1000, topic_partitions=[])
        out["heartbeat_bad_assignor"] = heartbeat(rebalance_timeout_ms=1000, subscribed_topic_names=[topic],
                                                  server_assignor="no-such-assignor", topic_partitions=[])  # fmt: skip
        out["heartbeat_bad_regex"] = heartbeat(rebalance_timeout_ms=1000, subscribed_topic_regex="t(",
                                               topic_partitions=[])  # fmt: skip
        out["heartbeat_invalid_epoch"] = heartbeat(member_epoch=-3)
        out["heartbeat_static_leave_without_instance"] = heartbeat(member_epoch=-2)
        # a second member: epochs and partition counts once both are Stable; then it leaves
        second = Consumer({"bootstrap.servers": address, "group.id": group, "group.protocol": "consumer",
                           "client.id": "differential-client-2", "enable.auto.commit": False})  # fmt: skip
        try:
            second.subscribe([topic])

            def both_stable() -> Any:
                consumer.poll(0.1)
                second.poll(0.1)
                return describe(address, group)

            def shape(g: Any) -> tuple[Any, ...]:
                counts = sorted(sum(len(tp.partitions) for tp in m.assignment.topic_partitions) for m in g.members)
                return (g.group_state, g.group_epoch > first_epoch, g.group_epoch == g.assignment_epoch,
                        all(m.member_epoch == g.assignment_epoch for m in g.members), counts)  # fmt: skip

            g = poll("two Stable members", both_stable, lambda g: g.group_state == "Stable" and len(g.members) == 2
                     and all(m.member_epoch == g.assignment_epoch for m in g.members))  # fmt: skip
            out["two_members"] = shape(g)
        finally:
            second.close()

        def first_only() -> Any:
            consumer.poll(0.1)
            return describe(address, group)

        g = poll("one Stable member again", first_only, lambda g: g.group_state == "Stable" and len(g.members) == 1)
        out["after_second_left"] = shape(g)
        # the member's first epoch, older now: it kept one partition throughout, the other it got
        # back after the second member had it (KIP-1251 accepts the first, Kafka 4.1 neither)
        body = {"group_id": group, "generation_id_or_member_epoch": first_member.member_epoch,
                "member_id": first_member.member_id,
                "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": 0,
                                                            "committed_metadata": None} for p in (0, 1)]}]}  # fmt: skip
        answer = request(address, ApiKey.OFFSET_COMMIT, 9, body)
        out["commit_at_an_older_member_epoch"] = sorted(p.error_code for p in answer.topics[0].partitions)
        out["offsets_in_a_transaction"] = offsets_in_a_transaction(address, consumer, topic)
        out["offsets_in_a_transaction_without_membership"] = offsets_by_group_id(address, consumer, topic, group)
    finally:
        consumer.close()
    g = poll("the group empty", lambda: describe(address, group), lambda g: g.group_state == "Empty")
    out["group_after_leave"] = (g.error_code, g.group_state, g.group_epoch > first_epoch, len(g.members))
    return out


def offsets_in_a_transaction(address: str, consumer: Consumer, topic: str) -> tuple[str | None, int]:
    """A transactional producer sends the member's offsets (TxnOffsetCommit with its member id and
    epoch) and commits: the error, if any, and the group's committed offset of partition 0."""
    from confluent_kafka import KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": address, "transactional.id": unique("txn")})
    error = None
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
    except KafkaException as e:
        error = e.args[0].name()
    finally:
        producer.flush(10)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=60)
    return error, committed.offset


def offsets_by_group_id(address: str, consumer: Consumer, topic: str, group: str) -> tuple[str | None, int]:
    """pylog's transactional producer sends offsets by group id alone (TxnOffsetCommit with epoch -1
    and no member id) to the group while it has a member: Kafka takes a transactional commit
    without membership in every state."""
    from confluent_kafka import TopicPartition as ConfluentPartition

    from pyspark_log.client import KafkaError, Producer, TopicPartition

    error = None
    with Producer({"bootstrap.servers": address, "transactional.id": unique("txn")}) as producer:
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send_offsets_to_transaction({TopicPartition(topic, 0): 2}, group)
            producer.commit_transaction()
        except KafkaError as e:
            error = type(e).__name__
    (committed,) = consumer.committed([ConfluentPartition(topic, 0)], timeout=60)
    return error, committed.offset


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    return {name: views(address) for name, address in brokers.items()}


ASPECTS = (
    "describe_group", "describe_members", "describe_v0_member_type", "describe_unknown_group",
    "list_groups_consumer", "list_groups_classic", "describe_groups_v5", "heartbeat_unknown_member",
    "heartbeat_empty_member_id", "heartbeat_join_without_subscription", "heartbeat_bad_assignor",
    "heartbeat_bad_regex", "heartbeat_invalid_epoch", "heartbeat_static_leave_without_instance",
    "two_members", "after_second_left", "commit_at_an_older_member_epoch", "offsets_in_a_transaction",
    "offsets_in_a_transaction_without_membership", "group_after_leave",
)  # fmt: skip


@pytest.mark.parametrize("aspect", ASPECTS)
def test_same_kip848_group_views(observed: dict[str, dict[str, Any]], aspect: str) -> None:
    kafka, pylog = observed["kafka"][aspect], observed["pylog"][aspect]
    differs = {(aspect, str(kafka), str(pylog))} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 3) if row[0] == aspect}
    message = compare(HEADING, differs, documented)
    assert not message, message
