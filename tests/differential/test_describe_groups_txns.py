"""The admin views of a consumer group and of a transaction on Apache Kafka 4.1.1 and pylog:
DescribeGroups (state, protocol, members as a client sees them, KIP-430 operations), ListGroups
with and without a state filter, OffsetFetch of all topics (``require_stable``), the group after
its last member left; DescribeTransactions, ListTransactions with an unknown state filter and
DescribeProducers of an open transaction, and DescribeTransactions once it committed.

The group's member comes from confluent-kafka; generated ids, producer ids and times are left
out. A difference must be a row of the table "Groups and transactions" in docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import create_ready_topic, poll, unique

HEADING = "Groups and transactions"


def describe_group(address: str, group: str, operations: bool = True) -> Any:
    body = {"groups": [group], "include_authorized_operations": operations}
    return request(address, ApiKey.DESCRIBE_GROUPS, 5, body).groups[0]


def group_views(address: str, topic: str) -> dict[str, Any]:
    group = unique("group")
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": group, "client.id": "differential-client",
        "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
    })  # fmt: skip
    out: dict[str, Any] = {}
    try:
        consumer.subscribe([topic])
        poll("the assignment", lambda: (consumer.poll(0.2), len(consumer.assignment()))[1], lambda n: n == 2)
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        g = describe_group(address, group)
        members = [(m.group_instance_id, m.client_id, m.client_host, m.member_id.startswith(m.client_id + "-"),
                    len(m.member_metadata), len(m.member_assignment)) for m in g.members]  # fmt: skip
        out["describe_groups"] = (g.error_code, g.group_state, g.protocol_type, g.protocol_data, members)
        out["describe_groups_operations"] = g.authorized_operations
        missing = describe_group(address, unique("missing"))
        out["describe_unknown_group"] = (
            missing.error_code,
            missing.group_state,
            missing.protocol_type,
            missing.members,
        )
        for name, states in (("list_groups", []), ("list_groups_empty_filter", ["Empty"])):
            listed = request(address, ApiKey.LIST_GROUPS, 4, {"states_filter": states})
            out[name] = [(x.protocol_type, x.group_state) for x in listed.groups if x.group_id == group]
        body = {"groups": [{"group_id": group, "topics": None}], "require_stable": True}
        fetched = request(address, ApiKey.OFFSET_FETCH, 8, body).groups[0]
        out["offset_fetch_all"] = [
            (t.name == topic, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata,
                                p.error_code) for p in t.partitions])
            for t in fetched.topics
        ]  # fmt: skip
    finally:
        consumer.close()
    poll("the group empty", lambda: describe_group(address, group).group_state, lambda s: s == "Empty")
    g = describe_group(address, group, operations=False)
    out["group_after_leave"] = (g.error_code, g.group_state, g.protocol_type, g.protocol_data, len(g.members))
    return out


def transaction_views(address: str, topic: str) -> dict[str, Any]:
    tid = unique("txn")
    producer = Producer({"bootstrap.servers": address, "transactional.id": tid})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=1)
    assert producer.flush(60) == 0
    out: dict[str, Any] = {}
    described = request(address, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid, unique("missing")]})
    out["describe_transactions"] = [
        (s.error_code, s.transaction_state, s.transaction_timeout_ms, s.transaction_start_time_ms > 0,
         s.producer_epoch, [(x.topic == topic, list(x.partitions)) for x in s.topics])
        for s in described.transaction_states
    ]  # fmt: skip
    body = {"state_filters": ["Ongoing", "NoSuchState"], "producer_id_filters": []}
    listed = request(address, ApiKey.LIST_TRANSACTIONS, 0, body)
    out["list_transactions"] = (
        listed.error_code, list(listed.unknown_state_filters),
        [s.transaction_state for s in listed.transaction_states if s.transactional_id == tid],
    )  # fmt: skip
    body = {"topics": [{"name": topic, "partition_indexes": [0, 1, 9]}]}
    producers = request(address, ApiKey.DESCRIBE_PRODUCERS, 0, body).topics[0]
    out["describe_producers"] = [
        (p.partition_index, p.error_code,
         [(x.producer_epoch, x.last_sequence, x.coordinator_epoch, x.current_txn_start_offset)
          for x in p.active_producers])
        for p in producers.partitions
    ]  # fmt: skip
    producer.commit_transaction(60)
    # EndTxn is answered at PrepareCommit; Kafka completes the commit once its markers are written
    state = poll(
        "CompleteCommit",
        lambda: request(address, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0],
        lambda s: s.transaction_state != "PrepareCommit",
    )
    out["transaction_after_commit"] = (state.error_code, state.transaction_state, state.producer_epoch,
                                       len(state.topics))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    out = {}
    for name, address in brokers.items():
        topic = unique("views")
        create_ready_topic(address, topic, partitions=2)
        out[name] = {**group_views(address, topic), **transaction_views(address, topic)}
    return out


ASPECTS = (
    "describe_groups", "describe_groups_operations", "describe_unknown_group", "list_groups",
    "list_groups_empty_filter", "offset_fetch_all", "group_after_leave", "describe_transactions",
    "list_transactions", "describe_producers", "transaction_after_commit",
)  # fmt: skip


@pytest.mark.parametrize("aspect", ASPECTS)
def test_same_group_and_transaction_views(observed: dict[str, dict[str, Any]], aspect: str) -> None:
    kafka, pylog = observed["kafka"][aspect], observed["pylog"][aspect]
    differs = {(aspect, str(kafka), str(pylog))} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 3) if row[0] == aspect}
    message = compare(HEADING, differs, documented)
    assert not message, message
